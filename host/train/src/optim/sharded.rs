//! AdamW with its state sharded over the ranks (ZeRO-2, `trainer.strategy=fsdp`).
//!
//! Parameters stay replicated. At each step the full gradients are laid out
//! flat ([`FlatLayout`]), reduce-scattered so that rank `r` holds the summed
//! gradient of shard `r`, and released. The global gradient norm is the sum
//! over ranks of the squared norms of the parameter pieces in each shard
//! (one `_foreach_norm` per rank; at one rank exactly [`super::AdamW`]'s
//! per-tensor norms). Each rank applies [`adam_update`] (the fused AdamW
//! kernel) to its fp32 shard of the parameters with its shard of the
//! moments, then the updated shards are all-gathered into every rank's
//! parameters. Per rank that keeps `2 x numel / world` fp32 moments (plus an
//! fp32 master shard when the parameters are bf16) instead of `2 x numel`
//! (`3 x` in bf16), and no gradient between steps. fp32 parameters are their own master: the
//! shard is read from them at each step.

use std::collections::HashMap;

use anyhow::{Context, Result};
use skyrl_distributed::ReduceOp;
use tch::{Device, Kind, Tensor};

use super::flat::FlatLayout;
use super::{
    adam_update, clip_coefficient, saved_state, sum_of_squares_many, to_device, AdamWParams,
    LrSchedule,
};
use crate::config::OptimizerConfig;
use crate::dist::Dist;

/// One rank's shard of the AdamW state over a flat view of the parameters.
pub struct ShardedAdamW {
    params: Vec<(String, Tensor)>,
    layout: FlatLayout,
    rank: usize,
    /// fp32 master copy of this rank's shard of bf16 parameters (`None`:
    /// the parameters are fp32 and hold the exact values).
    master: Option<Tensor>,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    step: i64,
    /// Where the state lives between steps (the CPU when offloaded).
    state_device: Option<Device>,
    pub hp: AdamWParams,
    pub schedule: LrSchedule,
}

impl ShardedAdamW {
    /// Rank `rank`'s shard of the state for `params` over `world` ranks.
    pub fn new(
        mut params: Vec<(String, Tensor)>,
        hp: AdamWParams,
        schedule: LrSchedule,
        rank: usize,
        world: usize,
    ) -> Self {
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let layout = FlatLayout::new(&params, world);
        let device = params.first().map_or(Device::Cpu, |(_, p)| p.device());
        let low_precision = params.iter().any(|(_, p)| p.kind() != Kind::Float);
        let master = low_precision.then(|| Self::shard_of(&layout, rank, &params, device));
        let zeros = || Tensor::zeros([layout.shard_len], (Kind::Float, device));
        Self {
            exp_avg: zeros(),
            exp_avg_sq: zeros(),
            params,
            layout,
            rank,
            master,
            step: 0,
            state_device: None,
            hp,
            schedule,
        }
    }

    /// From an `optimizer_config` section.
    pub fn from_config(
        params: Vec<(String, Tensor)>,
        c: &OptimizerConfig,
        rank: usize,
        world: usize,
        total_steps: usize,
    ) -> Result<Self> {
        Ok(Self::new(
            params,
            c.into(),
            LrSchedule::from_config(c, total_steps)?,
            rank,
            world,
        ))
    }

    /// This rank's fp32 shard of the named tensors.
    fn shard_of(
        layout: &FlatLayout,
        rank: usize,
        tensors: &[(String, Tensor)],
        device: Device,
    ) -> Tensor {
        let tensors: Vec<Tensor> = tensors.iter().map(|(_, t)| t.shallow_clone()).collect();
        let (start, end) = layout.shard_range(rank);
        let _g = tch::no_grad_guard();
        layout.flatten_range(&tensors, start, end, device)
    }

    /// The flat layout (for checkpoint manifests).
    pub fn layout(&self) -> &FlatLayout {
        &self.layout
    }

    /// Learning rate the next step will use.
    pub fn current_lr(&self) -> f64 {
        self.hp.lr * self.schedule.factor(self.step as usize)
    }

    /// Drops every gradient (a step consumes them).
    pub fn zero_grad(&mut self) {
        for (_, p) in &self.params {
            skyrl_distributed::memory::release_grad(p);
        }
    }

    /// Keeps the state on the CPU between steps (`offload_after_step`).
    pub fn offload_state(&mut self) {
        self.state_device = Some(Device::Cpu);
        self.move_state(Device::Cpu);
    }

    fn move_state(&mut self, device: Device) {
        for t in [&mut self.exp_avg, &mut self.exp_avg_sq]
            .into_iter()
            .chain(self.master.as_mut())
        {
            *t = to_device(t, device);
        }
    }

    /// Reduce-scatters the gradients, clips by the global norm (when
    /// `max_norm > 0`), updates this rank's shard and all-gathers the new
    /// parameters. Returns `(grad_norm_before_clipping, lr_used)`.
    pub fn step(&mut self, dist: &Dist, max_norm: f64) -> Result<(f64, f64)> {
        let _g = tch::no_grad_guard();
        let device = self.params.first().map_or(Device::Cpu, |(_, p)| p.device());
        let comm = dist.collective_device();
        let grads: Vec<Tensor> = self.params.iter().map(|(_, p)| p.grad()).collect();
        let flat = self.layout.flatten(&grads, comm);
        drop(grads);
        self.zero_grad();
        let mut shard = match dist.group() {
            Some(g) => {
                let mut out = Tensor::zeros([self.layout.shard_len], (Kind::Float, comm));
                g.reduce_scatter(&mut out, &flat, ReduceOp::Sum)
                    .context("gradient reduce-scatter failed")?;
                out
            }
            None => flat.shallow_clone(),
        };
        drop(flat);
        let norm = if max_norm > 0.0 {
            let pieces: Vec<Tensor> = self
                .layout
                .shard_segments(self.rank)
                .into_iter()
                .map(|(start, len)| shard.narrow(0, start, len))
                .collect();
            let norm = dist.sum_f64(&[sum_of_squares_many(&pieces)])?[0].sqrt();
            let clip = clip_coefficient(max_norm, norm);
            if clip < 1.0 {
                let _ = shard.f_mul_scalar_(clip)?;
            }
            norm
        } else {
            0.0
        };
        let lr = self.current_lr();
        self.step += 1;
        self.move_state(device);
        let grad = to_device(&shard, device);
        let hp = self.hp;
        let mut target = match &self.master {
            Some(m) => m.shallow_clone(),
            None => Self::shard_of(&self.layout, self.rank, &self.params, device),
        };
        adam_update(
            &mut target,
            &grad,
            &mut self.exp_avg,
            &mut self.exp_avg_sq,
            &hp,
            lr,
            self.step,
        );
        self.gather_params(dist, &target)?;
        if let Some(d) = self.state_device {
            self.move_state(d);
        }
        Ok((norm, lr))
    }

    /// All-gathers every rank's updated `shard` into its parameters.
    fn gather_params(&mut self, dist: &Dist, shard: &Tensor) -> Result<()> {
        let comm = dist.collective_device();
        let full = match dist.group() {
            Some(g) => {
                let mut full = Tensor::zeros([self.layout.padded_len()], (Kind::Float, comm));
                g.all_gather(&mut full, &to_device(shard, comm))
                    .context("parameter all-gather failed")?;
                full
            }
            None => shard.shallow_clone(),
        };
        for ((_, p), (_, new)) in self.params.iter_mut().zip(self.layout.unflatten(&full)?) {
            p.f_copy_(&new)?;
        }
        Ok(())
    }

    /// Bytes of optimizer state this rank holds (moments, and the master
    /// shard of bf16 parameters).
    pub fn state_bytes(&self) -> i64 {
        let tensors = 2 + i64::from(self.master.is_some());
        tensors * self.layout.shard_len * 4
    }

    /// This rank's shard of the state (`exp_avg`, `exp_avg_sq`, `master` for
    /// bf16 parameters, `step`) as CPU snapshots, for a sharded checkpoint.
    pub fn shard_state(&self) -> Vec<(String, Tensor)> {
        let cpu = |t: &Tensor| t.to_device(Device::Cpu).copy();
        let mut out = vec![
            ("exp_avg".into(), cpu(&self.exp_avg)),
            ("exp_avg_sq".into(), cpu(&self.exp_avg_sq)),
            ("step".into(), Tensor::from_slice(&[self.step])),
        ];
        if let Some(m) = &self.master {
            out.push(("master".into(), cpu(m)));
        }
        out
    }

    /// Restores from the per-parameter state [`super::AdamW::state_tensors`]
    /// writes (`exp_avg.<name>`, `exp_avg_sq.<name>`, optional
    /// `master.<name>`, `step`), whatever world size saved it; master weights
    /// default to the current parameters.
    pub fn load_state_tensors(&mut self, state: Vec<(String, Tensor)>) -> Result<()> {
        let map: HashMap<String, Tensor> = state.into_iter().collect();
        let step = map
            .get("step")
            .context("optimizer state has no `step`")?
            .int64_value(&[0]);
        let device = self.exp_avg.device();
        let group = |prefix: &str| -> Result<Vec<(String, Tensor)>> {
            self.params
                .iter()
                .map(|(name, p)| {
                    let key = format!("{prefix}.{name}");
                    let t = match map.get(&key) {
                        None if prefix == "master" => p.detach(),
                        saved => saved_state(saved, prefix, name, p)?.shallow_clone(),
                    };
                    Ok((name.clone(), t))
                })
                .collect()
        };
        let (m, v, master) = (group("exp_avg")?, group("exp_avg_sq")?, group("master")?);
        self.exp_avg = Self::shard_of(&self.layout, self.rank, &m, device);
        self.exp_avg_sq = Self::shard_of(&self.layout, self.rank, &v, device);
        if self.master.is_some() {
            self.master = Some(Self::shard_of(&self.layout, self.rank, &master, device));
        }
        self.step = step;
        if let Some(d) = self.state_device {
            self.move_state(d);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::AdamW;

    /// Two parameter sets with the same values and random gradients.
    fn params(seed: i64) -> Vec<(String, Tensor)> {
        tch::manual_seed(seed);
        ["w", "b", "a"]
            .iter()
            .zip([[3i64, 5], [1, 7], [4, 4]])
            .map(|(n, s)| {
                let t = Tensor::randn(s, (Kind::Float, Device::Cpu)).set_requires_grad(true);
                (n.to_string(), t)
            })
            .collect()
    }

    /// Small enough that every step clips.
    const MAX_NORM: f64 = 0.01;

    #[test]
    fn one_shard_updates_exactly_like_adamw() {
        let hp = AdamWParams {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        };
        let (pa, pb) = (params(1), params(1));
        let share = |v: &[(String, Tensor)]| -> Vec<(String, Tensor)> {
            v.iter()
                .map(|(n, t)| (n.clone(), t.shallow_clone()))
                .collect()
        };
        let mut whole = AdamW::new(share(&pa), hp, LrSchedule::Constant);
        let mut shard = ShardedAdamW::new(share(&pb), hp, LrSchedule::Constant, 0, 1);
        let dist = Dist::single();
        for step in 0..4 {
            tch::manual_seed(100 + step);
            for ((_, a), (_, b)) in pa.iter().zip(&pb) {
                let g = Tensor::randn(a.size(), (Kind::Float, Device::Cpu)) * 1e-3;
                (a * &g).sum(Kind::Float).backward();
                (b * &g).sum(Kind::Float).backward();
            }
            let (na, _) = whole.step(MAX_NORM);
            let (nb, _) = shard.step(&dist, MAX_NORM).unwrap();
            assert!((na - nb).abs() < 1e-6 * na, "grad norms {na} vs {nb}");
            whole.zero_grad();
            for ((n, a), (_, b)) in pa.iter().zip(&pb) {
                let d = (a - b).abs().max().double_value(&[]);
                assert_eq!(d, 0.0, "step {step}: `{n}` differs by {d}");
            }
        }
    }
}
