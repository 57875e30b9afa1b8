//! A flat view of a model's parameters for sharding: the parameters (in
//! name order) laid end to end as one vector, padded to a multiple of the
//! world size and cut into equal contiguous shards, shard `r` owned by
//! rank `r`. This is the layout of ZeRO and of PyTorch's `FlatParameter`.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

/// One parameter's place in the flat vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlatEntry {
    pub name: String,
    pub shape: Vec<i64>,
    /// First element in the flat vector.
    pub offset: i64,
}

impl FlatEntry {
    /// Number of elements.
    pub fn numel(&self) -> i64 {
        self.shape.iter().product()
    }
}

/// The flat layout of a parameter list over `world` ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlatLayout {
    pub entries: Vec<FlatEntry>,
    /// Elements of all parameters.
    pub numel: i64,
    /// Elements per shard (`ceil(numel / world)`).
    pub shard_len: i64,
    pub world: usize,
}

impl FlatLayout {
    /// The layout of `params` (any order; laid out by name) over `world` ranks.
    pub fn new(params: &[(String, Tensor)], world: usize) -> Self {
        let mut sorted: Vec<(&String, Vec<i64>)> =
            params.iter().map(|(n, t)| (n, t.size())).collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        let mut offset = 0;
        let entries = sorted
            .into_iter()
            .map(|(name, shape)| {
                let e = FlatEntry {
                    name: name.clone(),
                    shape,
                    offset,
                };
                offset += e.numel();
                e
            })
            .collect();
        let world = world.max(1);
        let shard_len = (offset + world as i64 - 1) / world as i64;
        Self {
            entries,
            numel: offset,
            shard_len,
            world,
        }
    }

    /// Elements of the padded vector (`world * shard_len`).
    pub fn padded_len(&self) -> i64 {
        self.shard_len * self.world as i64
    }

    /// `[start, end)` of rank `rank`'s shard in the padded vector.
    pub fn shard_range(&self, rank: usize) -> (i64, i64) {
        let start = rank as i64 * self.shard_len;
        (start, start + self.shard_len)
    }

    /// The padded flat vector of `tensors` (by name; a missing or undefined
    /// tensor contributes zeros), in fp32 on `device`.
    pub fn flatten(&self, tensors: &HashMap<String, Tensor>, device: Device) -> Tensor {
        let mut parts = Vec::with_capacity(self.entries.len() + 1);
        for e in &self.entries {
            match tensors.get(&e.name).filter(|t| t.defined()) {
                Some(t) => parts.push(
                    t.detach()
                        .to_kind(Kind::Float)
                        .to_device(device)
                        .reshape([-1]),
                ),
                None => parts.push(Tensor::zeros([e.numel()], (Kind::Float, device))),
            }
        }
        let pad = self.padded_len() - self.numel;
        if pad > 0 {
            parts.push(Tensor::zeros([pad], (Kind::Float, device)));
        }
        Tensor::cat(&parts, 0)
    }

    /// Elements `[start, end)` of the padded flat vector of `tensors`
    /// (zeros where a tensor is missing or past the end), in fp32 on
    /// `device`, without building the whole vector.
    pub fn flatten_range(
        &self,
        tensors: &HashMap<String, Tensor>,
        start: i64,
        end: i64,
        device: Device,
    ) -> Tensor {
        let mut parts = Vec::new();
        let mut covered = start;
        for e in &self.entries {
            let (lo, hi) = (e.offset.max(start), (e.offset + e.numel()).min(end));
            if lo >= hi {
                continue;
            }
            let part = match tensors.get(&e.name).filter(|t| t.defined()) {
                Some(t) => t
                    .detach()
                    .reshape([-1])
                    .narrow(0, lo - e.offset, hi - lo)
                    .to_kind(Kind::Float)
                    .to_device(device),
                None => Tensor::zeros([hi - lo], (Kind::Float, device)),
            };
            parts.push(part);
            covered = hi;
        }
        if covered < end {
            parts.push(Tensor::zeros([end - covered], (Kind::Float, device)));
        }
        Tensor::cat(&parts, 0)
    }

    /// Splits a (padded or unpadded) flat vector back into named tensors of
    /// their shapes; views into `flat`.
    pub fn unflatten(&self, flat: &Tensor) -> Result<Vec<(String, Tensor)>> {
        if flat.numel() < self.numel as usize {
            bail!(
                "flat vector has {} elements, the parameters need {}",
                flat.numel(),
                self.numel
            );
        }
        Ok(self
            .entries
            .iter()
            .map(|e| {
                let t = flat.narrow(0, e.offset, e.numel()).view(e.shape.as_slice());
                (e.name.clone(), t)
            })
            .collect())
    }

    /// The same parameters over another world size.
    pub fn with_world(&self, world: usize) -> Self {
        let world = world.max(1);
        Self {
            entries: self.entries.clone(),
            numel: self.numel,
            shard_len: (self.numel + world as i64 - 1) / world as i64,
            world,
        }
    }

    /// Checks that `params` are the parameters this layout was made for.
    pub fn check_matches(&self, params: &[(String, Tensor)]) -> Result<()> {
        let mine = FlatLayout::new(params, self.world);
        if mine.entries != self.entries {
            let names: HashMap<&str, &FlatEntry> =
                self.entries.iter().map(|e| (e.name.as_str(), e)).collect();
            for e in &mine.entries {
                let saved = names
                    .get(e.name.as_str())
                    .with_context(|| format!("the saved layout has no parameter `{}`", e.name))?;
                if saved.shape != e.shape {
                    bail!(
                        "parameter `{}` is {:?} in the saved layout, {:?} in the model",
                        e.name,
                        saved.shape,
                        e.shape
                    );
                }
            }
            bail!(
                "the saved layout has {} parameters, the model {}",
                self.entries.len(),
                mine.entries.len()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Vec<(String, Tensor)> {
        vec![
            ("b".into(), Tensor::from_slice(&[3.0f32, 4.0, 5.0])),
            ("a".into(), Tensor::from_slice(&[1.0f32, 2.0]).view([1, 2])),
        ]
    }

    #[test]
    fn parameters_are_laid_out_by_name_and_padded_to_equal_shards() {
        let l = FlatLayout::new(&params(), 2);
        assert_eq!(l.entries[0].name, "a");
        assert_eq!(l.entries[1].offset, 2);
        assert_eq!((l.numel, l.shard_len, l.padded_len()), (5, 3, 6));
        assert_eq!(l.shard_range(1), (3, 6));
        let map: HashMap<String, Tensor> = params().into_iter().collect();
        let flat = l.flatten(&map, Device::Cpu);
        assert_eq!(
            Vec::<f32>::try_from(&flat).unwrap(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 0.0]
        );
        for (a, b) in [(0, 6), (1, 4), (3, 6), (2, 3)] {
            assert_eq!(
                Vec::<f32>::try_from(&l.flatten_range(&map, a, b, Device::Cpu)).unwrap(),
                Vec::<f32>::try_from(&flat.narrow(0, a, b - a)).unwrap(),
                "range {a}..{b}"
            );
        }
        let back = l.unflatten(&flat).unwrap();
        assert_eq!(back[0].1.size(), vec![1, 2]);
        assert_eq!(
            Vec::<f32>::try_from(&back[1].1).unwrap(),
            vec![3.0, 4.0, 5.0]
        );
    }

    #[test]
    fn a_different_model_is_named() {
        let l = FlatLayout::new(&params(), 1);
        let other = vec![(
            "a".to_string(),
            Tensor::zeros([3], (Kind::Float, Device::Cpu)),
        )];
        let err = l.check_matches(&other).unwrap_err().to_string();
        assert!(err.contains("`a`"), "{err}");
    }
}
