//! AdamW over named libtorch tensors with decoupled weight decay, bias
//! correction, global grad-norm clipping and a constant-with-warmup schedule.
//! Its state (moments + step) is plain tensors, so checkpoints can save it as
//! safetensors. Numerically follows `torch.optim.AdamW` (single-tensor path),
//! `torch.nn.utils.clip_grad_norm_` and HF `get_constant_schedule_with_warmup`.

use anyhow::{bail, Context, Result};
use tch::{Kind, Tensor};

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

/// Learning-rate schedule as a multiplier of the base lr.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LrSchedule {
    Constant,
    /// Linear ramp `step / warmup` for `step < warmup`, then 1.
    ConstantWithWarmup {
        warmup_steps: usize,
    },
}

impl LrSchedule {
    /// From `optimizer_config.scheduler` / `num_warmup_steps`.
    pub fn from_config(c: &OptimizerConfig) -> Result<Self> {
        match c.scheduler.as_str() {
            "constant" => Ok(Self::Constant),
            "constant_with_warmup" => Ok(Self::ConstantWithWarmup {
                warmup_steps: c.num_warmup_steps,
            }),
            other => bail!("unknown scheduler '{other}' (constant_with_warmup or constant)"),
        }
    }

    /// Multiplier after `step` scheduler steps (0 before the first update).
    pub fn factor(&self, step: usize) -> f64 {
        match *self {
            Self::Constant => 1.0,
            Self::ConstantWithWarmup { warmup_steps } if step < warmup_steps => {
                step as f64 / warmup_steps.max(1) as f64
            }
            Self::ConstantWithWarmup { .. } => 1.0,
        }
    }
}

/// Scales all gradients so their global L2 norm is at most `max_norm`
/// (`clip_coef = max_norm / (norm + 1e-6)`, applied only when < 1).
/// Returns the norm before clipping. Parameters without gradients are skipped.
pub fn clip_grad_norm(params: &[Tensor], max_norm: f64) -> f64 {
    let _g = tch::no_grad_guard();
    let grads: Vec<Tensor> = params
        .iter()
        .map(|p| p.grad())
        .filter(|g| g.defined())
        .collect();
    if grads.is_empty() {
        return 0.0;
    }
    let norms: Vec<Tensor> = grads
        .iter()
        .map(|g| g.to_kind(Kind::Float).norm())
        .collect();
    let total = Tensor::stack(&norms, 0).norm();
    let clip = (Tensor::from(max_norm).to_kind(Kind::Float) / (&total + 1e-6)).clamp_max(1.0);
    for mut g in grads {
        let _ = g.f_mul_(&clip.to_kind(g.kind()));
    }
    total.double_value(&[])
}

/// AdamW over a fixed, ordered list of named parameters.
pub struct AdamW {
    params: Vec<(String, Tensor)>,
    exp_avg: Vec<Tensor>,
    exp_avg_sq: Vec<Tensor>,
    step: i64,
    pub hp: AdamWParams,
    pub schedule: LrSchedule,
}

impl AdamW {
    /// Creates the optimiser; parameters are sorted by name for a stable order.
    pub fn new(mut params: Vec<(String, Tensor)>, hp: AdamWParams, schedule: LrSchedule) -> Self {
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let zeros = |p: &Tensor| p.zeros_like().to_kind(Kind::Float).detach();
        let exp_avg = params.iter().map(|(_, p)| zeros(p)).collect();
        let exp_avg_sq = params.iter().map(|(_, p)| zeros(p)).collect();
        Self {
            params,
            exp_avg,
            exp_avg_sq,
            step: 0,
            hp,
            schedule,
        }
    }

    /// From an `optimizer_config` section.
    pub fn from_config(params: Vec<(String, Tensor)>, c: &OptimizerConfig) -> Result<Self> {
        Ok(Self::new(params, c.into(), LrSchedule::from_config(c)?))
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

    /// Clips gradients to `max_norm` (if > 0) and applies one AdamW update.
    /// Returns `(grad_norm_before_clipping, lr_used)`.
    pub fn step(&mut self, max_norm: f64) -> (f64, f64) {
        let tensors: Vec<Tensor> = self.params.iter().map(|(_, p)| p.shallow_clone()).collect();
        let norm = if max_norm > 0.0 {
            clip_grad_norm(&tensors, max_norm)
        } else {
            0.0
        };
        let lr = self.current_lr();
        self.step += 1;
        let hp = self.hp;
        let t = self.step as f64;
        let bc1 = 1.0 - hp.beta1.powf(t);
        let bc2_sqrt = (1.0 - hp.beta2.powf(t)).sqrt();
        let step_size = lr / bc1;
        let _g = tch::no_grad_guard();
        for (i, (_, p)) in self.params.iter_mut().enumerate() {
            let grad = p.grad();
            if !grad.defined() {
                continue;
            }
            let grad = grad.to_kind(Kind::Float);
            let _ = p.f_mul_scalar_(1.0 - lr * hp.weight_decay);
            let m = &mut self.exp_avg[i];
            let _ = m.f_lerp_(&grad, 1.0 - hp.beta1);
            let v = &mut self.exp_avg_sq[i];
            let _ = v.f_mul_scalar_(hp.beta2);
            let _ = v.f_add_(&(&grad * &grad * (1.0 - hp.beta2)));
            let denom = v.sqrt() / bc2_sqrt + hp.eps;
            let update = (&*m / denom) * (-step_size);
            let _ = p.f_add_(&update.to_kind(p.kind()));
        }
        (norm, lr)
    }

    /// Moments as named tensors (`exp_avg.<name>`, `exp_avg_sq.<name>`) plus `step`,
    /// as CPU snapshots (later steps do not change them).
    pub fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let snapshot = |t: &Tensor| {
            if t.device() == tch::Device::Cpu {
                t.copy()
            } else {
                t.to_device(tch::Device::Cpu)
            }
        };
        let mut out = Vec::with_capacity(2 * self.params.len() + 1);
        for (i, (name, _)) in self.params.iter().enumerate() {
            out.push((format!("exp_avg.{name}"), snapshot(&self.exp_avg[i])));
            out.push((format!("exp_avg_sq.{name}"), snapshot(&self.exp_avg_sq[i])));
        }
        out.push(("step".into(), Tensor::from_slice(&[self.step])));
        out
    }

    /// Restores moments and step saved by [`state_tensors`](Self::state_tensors).
    /// Every parameter must have both moments with matching shapes.
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
                let key = format!("{prefix}.{name}");
                let saved = map
                    .get(&key)
                    .with_context(|| format!("optimizer state is missing `{key}`"))?;
                if saved.size() != p.size() {
                    bail!(
                        "optimizer state `{key}` has shape {:?}, parameter has {:?}",
                        saved.size(),
                        p.size()
                    );
                }
                *slot = saved.to_kind(Kind::Float).to_device(p.device()).detach();
            }
        }
        self.step = step;
        Ok(())
    }
}
