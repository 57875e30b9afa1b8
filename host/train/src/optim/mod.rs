//! AdamW over named libtorch tensors with decoupled weight decay, bias
//! correction, global grad-norm clipping and a constant-with-warmup schedule.
//! Its state (moments + step, and fp32 master weights of bf16 parameters) is
//! plain tensors, so checkpoints can save it as safetensors. Numerically
//! follows `torch.optim.AdamW`, `torch.nn.utils.clip_grad_norm_` and HF
//! `get_constant_schedule_with_warmup`.
//!
//! The update runs on libtorch's own kernels (through `skyrl-torch-ops`):
//! one `torch._fused_adamw_` call over all parameters, and clipping with one
//! `_foreach_norm` plus one `_foreach_mul_`. [`AdamW`] keeps every
//! parameter's state (one process, or `ddp` after the gradients were
//! all-reduced); [`sharded::ShardedAdamW`] keeps one rank's shard of a flat
//! view of all parameters (`fsdp`) and applies the same fused update to it
//! ([`adam_update_many`] for both).

pub mod flat;
pub mod sharded;

use anyhow::{bail, Context, Result};
use tch::{Device, Kind, Tensor};

use skyrl_torch_ops::{foreach_mul_, foreach_norm, fused_adamw_, AdamWStep};

use crate::config::OptimizerConfig;

/// AdamW hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWParams {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl From<&OptimizerConfig> for AdamWParams {
    fn from(c: &OptimizerConfig) -> Self {
        Self {
            lr: c.lr,
            beta1: c.adam_betas[0],
            beta2: c.adam_betas[1],
            eps: c.adam_eps,
            weight_decay: c.weight_decay,
        }
    }
}

/// Learning-rate schedule as a multiplier of the base lr: the schedules of
/// transformers' `get_scheduler` (which skyrl-train calls with
/// `optimizer_config.scheduler`, `num_warmup_steps` and the run's total
/// training steps), with transformers' defaults for their extra arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LrSchedule {
    Constant,
    /// Linear ramp `step / warmup` for `step < warmup`, then 1.
    ConstantWithWarmup {
        warmup_steps: usize,
    },
    /// Warmup, then linear decay to 0 at `total_steps`.
    Linear {
        warmup_steps: usize,
        total_steps: usize,
    },
    /// Warmup, then half a cosine to 0 at `total_steps`.
    Cosine {
        warmup_steps: usize,
        total_steps: usize,
    },
    /// Warmup, then one hard-restart cosine cycle (transformers' default of 1).
    CosineWithRestarts {
        warmup_steps: usize,
        total_steps: usize,
    },
    /// Warmup, then linear (power 1) decay to `lr_end` = 1e-7 (transformers'
    /// defaults); `base_lr` is the optimizer's lr.
    Polynomial {
        warmup_steps: usize,
        total_steps: usize,
        base_lr: f64,
    },
    /// Warmup, then `1 / sqrt((step + shift) / timescale)` with timescale =
    /// warmup steps (10 000 without warmup).
    InverseSqrt {
        warmup_steps: usize,
    },
}

/// The schedules `optimizer_config.scheduler` accepts.
pub const SCHEDULERS: [&str; 7] = [
    "constant",
    "constant_with_warmup",
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "inverse_sqrt",
];

/// The scheduler error for `name` (`None` when it is supported).
pub fn scheduler_error(name: &str) -> Option<String> {
    match name {
        n if SCHEDULERS.contains(&n) => None,
        "cosine_with_min_lr"
        | "warmup_stable_decay"
        | "reduce_lr_on_plateau"
        | "cosine_warmup_with_min_lr" => Some(format!(
            "scheduler `{name}` needs arguments skyrl's config has no key for \
             (transformers raises without them, as skyrl-train does); use one of {SCHEDULERS:?}"
        )),
        _ => Some(format!(
            "scheduler `{name}` is unknown (one of {SCHEDULERS:?})"
        )),
    }
}

impl LrSchedule {
    /// From `optimizer_config.scheduler` / `num_warmup_steps`, for a run of
    /// `total_steps` training steps (skyrl-train's `num_training_steps`).
    pub fn from_config(c: &OptimizerConfig, total_steps: usize) -> Result<Self> {
        if let Some(e) = scheduler_error(&c.scheduler) {
            bail!(e);
        }
        let (warmup_steps, total) = (c.num_warmup_steps, total_steps);
        Ok(match c.scheduler.as_str() {
            "constant" => Self::Constant,
            "constant_with_warmup" => Self::ConstantWithWarmup { warmup_steps },
            "linear" => Self::Linear {
                warmup_steps,
                total_steps: total,
            },
            "cosine" => Self::Cosine {
                warmup_steps,
                total_steps: total,
            },
            "cosine_with_restarts" => Self::CosineWithRestarts {
                warmup_steps,
                total_steps: total,
            },
            "polynomial" => {
                if c.lr <= POLY_LR_END {
                    bail!(
                        "scheduler polynomial decays to 1e-7: lr ({}) must be larger",
                        c.lr
                    );
                }
                Self::Polynomial {
                    warmup_steps,
                    total_steps: total,
                    base_lr: c.lr,
                }
            }
            "inverse_sqrt" => Self::InverseSqrt { warmup_steps },
            _ => unreachable!("checked by scheduler_error"),
        })
    }

    /// Multiplier after `step` scheduler steps (0 before the first update),
    /// as transformers' lambdas compute it.
    pub fn factor(&self, step: usize) -> f64 {
        let warm = |w: usize| step as f64 / w.max(1) as f64;
        let progress = |w: usize, t: usize| (step - w) as f64 / t.saturating_sub(w).max(1) as f64;
        match *self {
            Self::Constant => 1.0,
            Self::ConstantWithWarmup { warmup_steps: w }
            | Self::Linear {
                warmup_steps: w, ..
            }
            | Self::Cosine {
                warmup_steps: w, ..
            }
            | Self::CosineWithRestarts {
                warmup_steps: w, ..
            }
            | Self::Polynomial {
                warmup_steps: w, ..
            }
            | Self::InverseSqrt { warmup_steps: w }
                if step < w =>
            {
                warm(w)
            }
            Self::ConstantWithWarmup { .. } => 1.0,
            Self::Linear {
                warmup_steps: w,
                total_steps: t,
            } => (t as f64 - step as f64).max(0.0) / t.saturating_sub(w).max(1) as f64,
            Self::Cosine {
                warmup_steps: w,
                total_steps: t,
            } => (0.5 * (1.0 + (std::f64::consts::PI * 0.5 * 2.0 * progress(w, t)).cos())).max(0.0),
            Self::CosineWithRestarts {
                warmup_steps: w,
                total_steps: t,
            } => {
                let p = progress(w, t);
                if p >= 1.0 {
                    0.0
                } else {
                    (0.5 * (1.0 + (std::f64::consts::PI * (p % 1.0)).cos())).max(0.0)
                }
            }
            Self::Polynomial {
                warmup_steps: w,
                total_steps: t,
                base_lr,
            } => {
                if step > t {
                    POLY_LR_END / base_lr
                } else {
                    let remaining = 1.0 - (step - w) as f64 / t.saturating_sub(w).max(1) as f64;
                    ((base_lr - POLY_LR_END) * remaining + POLY_LR_END) / base_lr
                }
            }
            Self::InverseSqrt { warmup_steps: w } => {
                let timescale = if w == 0 { 10_000.0 } else { w as f64 };
                let shift = timescale - w as f64;
                1.0 / ((step as f64 + shift) / timescale).sqrt()
            }
        }
    }
}

/// transformers' default `lr_end` of the polynomial schedule.
const POLY_LR_END: f64 = 1e-7;

/// Scales `grads` so their global L2 norm is at most `max_norm`
/// (`clip_coef = max_norm / (norm + 1e-6)`, applied only when < 1) and
/// returns the norm before clipping: the square root of the sum of the
/// squared per-tensor norms of one `_foreach_norm` (torch's norm of norms),
/// combined in f64 so the same sum over shards gives the same norm on every
/// rank; then one `_foreach_mul_` when clipping.
pub fn clip_grads(grads: &[Tensor], max_norm: f64) -> f64 {
    if grads.is_empty() {
        return 0.0;
    }
    let total = sum_of_squares_many(grads).sqrt();
    let clip = clip_coefficient(max_norm, total);
    if clip < 1.0 {
        foreach_mul_(grads, clip).expect("_foreach_mul_ of the gradients");
    }
    total
}

/// Sum of the squared L2 norms of `tensors` (one `_foreach_norm` in fp32,
/// the squares summed in f64).
pub fn sum_of_squares_many(tensors: &[Tensor]) -> f64 {
    if tensors.is_empty() {
        return 0.0;
    }
    foreach_norm(tensors)
        .expect("_foreach_norm of the gradients")
        .to_kind(Kind::Double)
        .square()
        .sum(Kind::Double)
        .double_value(&[])
}

/// `min(1, max_norm / (norm + 1e-6))`.
pub fn clip_coefficient(max_norm: f64, norm: f64) -> f64 {
    (max_norm / (norm + 1e-6)).min(1.0)
}

/// The saved state `prefix.name` of parameter `p`, checked to have its shape.
pub(crate) fn saved_state<'a>(
    saved: Option<&'a Tensor>,
    prefix: &str,
    name: &str,
    p: &Tensor,
) -> Result<&'a Tensor> {
    let key = format!("{prefix}.{name}");
    let saved = saved.with_context(|| format!("optimizer state is missing `{key}`"))?;
    if saved.size() != p.size() {
        bail!(
            "optimizer state `{key}` has shape {:?}, parameter has {:?}",
            saved.size(),
            p.size()
        );
    }
    Ok(saved)
}

/// One AdamW update of every `targets[i]` (fp32) with `grads[i]` (fp32) at
/// learning rate `lr`, after `step` updates (1-based): decoupled weight
/// decay, then the bias-corrected moment step, in one `torch._fused_adamw_`
/// call. Element-wise, so a flat shard of parameters gets exactly what its
/// parameters would.
///
/// # Panics
/// When libtorch refuses the lists (lengths, shapes, dtypes or devices that
/// differ), which the optimizers here never build.
pub fn adam_update_many(
    targets: &[Tensor],
    grads: &[Tensor],
    exp_avg: &[Tensor],
    exp_avg_sq: &[Tensor],
    hp: &AdamWParams,
    lr: f64,
    step: i64,
) {
    let step = AdamWStep {
        step,
        lr,
        beta1: hp.beta1,
        beta2: hp.beta2,
        eps: hp.eps,
        weight_decay: hp.weight_decay,
    };
    fused_adamw_(targets, grads, exp_avg, exp_avg_sq, &step).expect("torch._fused_adamw_");
}

/// [`adam_update_many`] of one tensor.
pub fn adam_update(
    target: &mut Tensor,
    grad: &Tensor,
    exp_avg: &mut Tensor,
    exp_avg_sq: &mut Tensor,
    hp: &AdamWParams,
    lr: f64,
    step: i64,
) {
    let one = |t: &Tensor| [t.shallow_clone()];
    adam_update_many(
        &one(target),
        &one(grad),
        &one(exp_avg),
        &one(exp_avg_sq),
        hp,
        lr,
        step,
    );
}

/// Moves `t` to `device` unless it is already there.
pub(crate) fn to_device(t: &Tensor, device: Device) -> Tensor {
    if t.device() == device {
        t.shallow_clone()
    } else {
        t.to_device(device)
    }
}

/// AdamW over a fixed, ordered list of named parameters.
pub struct AdamW {
    params: Vec<(String, Tensor)>,
    exp_avg: Vec<Tensor>,
    exp_avg_sq: Vec<Tensor>,
    /// fp32 copies of parameters held in a lower precision (bf16 training).
    master: Vec<Option<Tensor>>,
    step: i64,
    /// Where the state lives between steps (the CPU when offloaded).
    state_device: Option<Device>,
    pub hp: AdamWParams,
    pub schedule: LrSchedule,
}

impl AdamW {
    /// Creates the optimiser; parameters are sorted by name for a stable order.
    /// Parameters not in fp32 get fp32 master weights.
    pub fn new(mut params: Vec<(String, Tensor)>, hp: AdamWParams, schedule: LrSchedule) -> Self {
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let zeros = |p: &Tensor| p.zeros_like().to_kind(Kind::Float).detach();
        let exp_avg = params.iter().map(|(_, p)| zeros(p)).collect();
        let exp_avg_sq = params.iter().map(|(_, p)| zeros(p)).collect();
        let master = params
            .iter()
            .map(|(_, p)| (p.kind() != Kind::Float).then(|| p.detach().to_kind(Kind::Float)))
            .collect();
        Self {
            params,
            exp_avg,
            exp_avg_sq,
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
        total_steps: usize,
    ) -> Result<Self> {
        Ok(Self::new(
            params,
            c.into(),
            LrSchedule::from_config(c, total_steps)?,
        ))
    }

    /// Number of updates taken.
    pub fn step_count(&self) -> i64 {
        self.step
    }

    /// Learning rate the next [`step`](Self::step) will use.
    pub fn current_lr(&self) -> f64 {
        self.hp.lr * self.schedule.factor(self.step as usize)
    }

    /// Parameters in optimiser order.
    pub fn params(&self) -> &[(String, Tensor)] {
        &self.params
    }

    /// Sets every gradient to zero.
    pub fn zero_grad(&mut self) {
        for (_, p) in self.params.iter_mut() {
            p.zero_grad();
        }
    }

    /// Keeps the state on the CPU between steps (`offload_after_step`); a
    /// step brings it to the parameters' device and back.
    pub fn offload_state(&mut self) {
        self.state_device = Some(Device::Cpu);
        self.move_state(Device::Cpu);
    }

    fn move_state(&mut self, device: Device) {
        for t in self
            .exp_avg
            .iter_mut()
            .chain(self.exp_avg_sq.iter_mut())
            .chain(self.master.iter_mut().flatten())
        {
            *t = to_device(t, device);
        }
    }

    /// Clips gradients to `max_norm` (if > 0) and applies one AdamW update
    /// to every parameter that has a gradient, all in one fused call.
    /// Returns `(grad_norm_before_clipping, lr_used)`.
    pub fn step(&mut self, max_norm: f64) -> (f64, f64) {
        let _g = tch::no_grad_guard();
        let with_grad: Vec<(usize, Tensor)> = self
            .params
            .iter()
            .enumerate()
            .map(|(i, (_, p))| (i, p.grad()))
            .filter(|(_, g)| g.defined())
            .collect();
        let norm = if max_norm > 0.0 {
            let grads: Vec<Tensor> = with_grad.iter().map(|(_, g)| g.shallow_clone()).collect();
            clip_grads(&grads, max_norm)
        } else {
            0.0
        };
        let lr = self.current_lr();
        self.step += 1;
        if let Some(device) = self.params.first().map(|(_, p)| p.device()) {
            if self.state_device.is_some() {
                self.move_state(device);
            }
        }
        let n = with_grad.len();
        let (mut targets, mut grads) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let (mut m, mut v) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for (i, g) in &with_grad {
            let i = *i;
            targets.push(match &self.master[i] {
                Some(master) => master.shallow_clone(),
                None => self.params[i].1.shallow_clone(),
            });
            grads.push(if g.kind() == Kind::Float {
                g.shallow_clone()
            } else {
                g.to_kind(Kind::Float)
            });
            m.push(self.exp_avg[i].shallow_clone());
            v.push(self.exp_avg_sq[i].shallow_clone());
        }
        adam_update_many(&targets, &grads, &m, &v, &self.hp, lr, self.step);
        for (i, _) in &with_grad {
            if let Some(master) = &self.master[*i] {
                let _ = self.params[*i].1.f_copy_(master);
            }
        }
        if let Some(device) = self.state_device {
            self.move_state(device);
        }
        (norm, lr)
    }

    /// Bytes of optimizer state (moments and master weights).
    pub fn state_bytes(&self) -> i64 {
        self.exp_avg
            .iter()
            .chain(&self.exp_avg_sq)
            .chain(self.master.iter().flatten())
            .map(|t| t.numel() as i64 * 4)
            .sum()
    }

    /// Moments as named tensors (`exp_avg.<name>`, `exp_avg_sq.<name>`, and
    /// `master.<name>` for bf16 parameters) plus `step`, as CPU snapshots
    /// (later steps do not change them).
    pub fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let snapshot = |t: &Tensor| {
            if t.device() == tch::Device::Cpu {
                t.copy()
            } else {
                t.to_device(tch::Device::Cpu)
            }
        };
        let mut out = Vec::with_capacity(3 * self.params.len() + 1);
        for (i, (name, _)) in self.params.iter().enumerate() {
            out.push((format!("exp_avg.{name}"), snapshot(&self.exp_avg[i])));
            out.push((format!("exp_avg_sq.{name}"), snapshot(&self.exp_avg_sq[i])));
            if let Some(m) = &self.master[i] {
                out.push((format!("master.{name}"), snapshot(m)));
            }
        }
        out.push(("step".into(), Tensor::from_slice(&[self.step])));
        out
    }

    /// Restores moments and step saved by [`state_tensors`](Self::state_tensors).
    /// Every parameter must have both moments with matching shapes; master
    /// weights are restored when saved, else taken from the parameters.
    pub fn load_state_tensors(&mut self, state: Vec<(String, Tensor)>) -> Result<()> {
        let map: std::collections::HashMap<String, Tensor> = state.into_iter().collect();
        let step = map
            .get("step")
            .context("optimizer state has no `step`")?
            .int64_value(&[0]);
        let _g = tch::no_grad_guard();
        for (i, (name, p)) in self.params.iter().enumerate() {
            for (prefix, slot) in [
                ("exp_avg", &mut self.exp_avg[i]),
                ("exp_avg_sq", &mut self.exp_avg_sq[i]),
            ] {
                let saved = saved_state(map.get(&format!("{prefix}.{name}")), prefix, name, p)?;
                *slot = saved.to_kind(Kind::Float).to_device(p.device()).detach();
            }
            if let Some(master) = &mut self.master[i] {
                *master = match map.get(&format!("master.{name}")) {
                    Some(saved) if saved.size() == p.size() => {
                        saved.to_kind(Kind::Float).to_device(p.device()).detach()
                    }
                    _ => p.detach().to_kind(Kind::Float),
                };
            }
        }
        self.step = step;
        if let Some(device) = self.state_device {
            self.move_state(device);
        }
        Ok(())
    }
}
