//! A flat view of a model's parameters for sharding: the parameters (in
//! name order) laid end to end as one vector, padded to a multiple of the
//! world size and cut into equal contiguous shards, shard `r` owned by
//! rank `r`. This is the layout of ZeRO and of PyTorch's `FlatParameter`.

use anyhow::{bail, Result};
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

    /// The padded flat vector of `tensors` (one per entry, in the layout's
    /// name order; an undefined tensor contributes zeros), in fp32 on `device`.
    pub fn flatten(&self, tensors: &[Tensor], device: Device) -> Tensor {
        self.flatten_range(tensors, 0, self.padded_len(), device)
    }

    /// Elements `[start, end)` of [`flatten`](Self::flatten)'s vector, without
    /// building the whole vector.
    pub fn flatten_range(
        &self,
        tensors: &[Tensor],
        start: i64,
        end: i64,
        device: Device,
    ) -> Tensor {
        assert_eq!(
            tensors.len(),
            self.entries.len(),
            "one tensor per flat-layout entry"
        );
        let mut parts = Vec::new();
        let mut covered = start;
        for (e, t) in self.entries.iter().zip(tensors) {
            let (lo, hi) = (e.offset.max(start), (e.offset + e.numel()).min(end));
            if lo >= hi {
                continue;
            }
            let part = if t.defined() {
                t.detach()
                    .reshape([-1])
                    .narrow(0, lo - e.offset, hi - lo)
                    .to_kind(Kind::Float)
                    .to_device(device)
            } else {
                Tensor::zeros([hi - lo], (Kind::Float, device))
            };
            parts.push(part);
            covered = hi;
        }
        if covered < end {
            parts.push(Tensor::zeros([end - covered], (Kind::Float, device)));
        }
        Tensor::cat(&parts, 0)
    }

    /// The pieces of parameters in rank `rank`'s shard, as `(start, len)`
    /// within the shard, in layout order (padding excluded). At one rank
    /// these are the whole parameters.
    pub fn shard_segments(&self, rank: usize) -> Vec<(i64, i64)> {
        let (start, end) = self.shard_range(rank);
        self.entries
            .iter()
            .filter_map(|e| {
                let (lo, hi) = (e.offset.max(start), (e.offset + e.numel()).min(end));
                (lo < hi).then_some((lo - start, hi - lo))
            })
            .collect()
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
        // By name: `a` then `b`.
        let tensors: Vec<Tensor> = params().into_iter().rev().map(|(_, t)| t).collect();
        let flat = l.flatten(&tensors, Device::Cpu);
        assert_eq!(
            Vec::<f32>::try_from(&flat).unwrap(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 0.0]
        );
        for (a, b) in [(0, 6), (1, 4), (3, 6), (2, 3)] {
            assert_eq!(
                Vec::<f32>::try_from(&l.flatten_range(&tensors, a, b, Device::Cpu)).unwrap(),
                Vec::<f32>::try_from(&flat.narrow(0, a, b - a)).unwrap(),
                "range {a}..{b}"
            );
        }
        assert_eq!(l.shard_segments(0), [(0, 2), (2, 1)]);
        assert_eq!(l.shard_segments(1), [(0, 2)]);
        assert_eq!(
            FlatLayout::new(&params(), 1).shard_segments(0),
            [(0, 2), (2, 3)]
        );
        let back = l.unflatten(&flat).unwrap();
        assert_eq!(back[0].1.size(), vec![1, 2]);
        assert_eq!(
            Vec::<f32>::try_from(&back[1].1).unwrap(),
            vec![3.0, 4.0, 5.0]
        );
    }
}
