//! Advantage estimators (`grpo`, `rloo`, `reinforce++`, `gae`, `maxrl`) and a
//! name-keyed registry so users can plug in their own, mirroring skyrl-train's
//! `AdvantageEstimatorRegistry`.
//!
//! Inputs are token-level rewards `[B, T]` (outcome reward at the last response
//! token), a response mask `[B, T]` and one group id (prompt uid) per row.
//! Outputs are advantages and returns `[B, T]`.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use tch::{Device, Kind, Tensor};

use super::masked::masked_whiten;

/// Everything an estimator may read.
pub struct AdvantageInput<'a> {
    /// `[B, T]` per-token rewards.
    pub token_level_rewards: &'a Tensor,
    /// `[B, T]` 1 for response tokens that count, 0 elsewhere.
    pub response_mask: &'a Tensor,
    /// One group id (prompt uid) per row; rows with the same id form a group.
    pub group_ids: &'a [String],
    /// `[B, T]` critic values; required by `gae`.
    pub values: Option<&'a Tensor>,
}

/// Hyper-parameters shared by the estimators.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdvantageParams {
    /// Discount factor (`trainer.algorithm.gamma`).
    pub gamma: f64,
    /// GAE lambda (`trainer.algorithm.lambd`).
    pub lambd: f64,
    /// GRPO: divide by the group std (false = Dr. GRPO).
    pub grpo_norm_by_std: bool,
    /// Added to denominators (GRPO std, MaxRL mean).
    pub epsilon: f64,
}

impl Default for AdvantageParams {
    fn default() -> Self {
        Self {
            gamma: 1.0,
            lambd: 1.0,
            grpo_norm_by_std: true,
            epsilon: 1e-6,
        }
    }
}

impl From<&crate::config::AlgorithmConfig> for AdvantageParams {
    fn from(c: &crate::config::AlgorithmConfig) -> Self {
        Self {
            gamma: c.gamma,
            lambd: c.lambd,
            grpo_norm_by_std: c.grpo_norm_by_std,
            epsilon: 1e-6,
        }
    }
}

/// Batch-level advantage normalisation (`advantage_batch_normalize`), as skyrl's
/// `normalize_advantages_dict`: mean over all entries, variance over the masked
/// entries, `(A - mean) * rsqrt(max(var, 1e-8))`.
pub fn normalize_advantages(advantages: &Tensor, response_mask: &Tensor) -> Tensor {
    let n = response_mask.sum(Kind::Float);
    let mean = advantages.mean(Kind::Float);
    let var = ((advantages - &mean).square() * response_mask).sum(Kind::Float) / n;
    (advantages - mean) * var.clamp_min(1e-8).rsqrt()
}

/// Advantages and returns, both `[B, T]`.
#[derive(Debug)]
pub struct AdvantageOutput {
    pub advantages: Tensor,
    pub returns: Tensor,
}

/// A pluggable advantage estimator.
pub trait AdvantageEstimator: Send + Sync {
    fn compute(&self, input: &AdvantageInput, params: &AdvantageParams) -> Result<AdvantageOutput>;
}

impl<F> AdvantageEstimator for F
where
    F: Fn(&AdvantageInput, &AdvantageParams) -> Result<AdvantageOutput> + Send + Sync,
{
    fn compute(&self, input: &AdvantageInput, params: &AdvantageParams) -> Result<AdvantageOutput> {
        self(input, params)
    }
}

/// Name → estimator map. `with_defaults()` holds the built-ins.
#[derive(Clone, Default)]
pub struct AdvantageEstimatorRegistry {
    map: BTreeMap<String, Arc<dyn AdvantageEstimator>>,
}

impl AdvantageEstimatorRegistry {
    /// Registry with `grpo`, `rloo`, `reinforce++` (alias `reinforce_plus_plus`), `gae`, `maxrl`.
    pub fn with_defaults() -> Self {
        let mut r = Self::default();
        let builtins: [(&str, Arc<dyn AdvantageEstimator>); 6] = [
            ("grpo", Arc::new(Grpo)),
            ("rloo", Arc::new(Rloo)),
            ("reinforce++", Arc::new(ReinforcePlusPlus)),
            ("reinforce_plus_plus", Arc::new(ReinforcePlusPlus)),
            ("gae", Arc::new(Gae)),
            ("maxrl", Arc::new(MaxRl)),
        ];
        for (name, est) in builtins {
            r.map.insert(name.to_string(), est);
        }
        r
    }

    /// Adds `estimator` under `name`; a name already taken is an error.
    pub fn register(&mut self, name: &str, estimator: Arc<dyn AdvantageEstimator>) -> Result<()> {
        if self.map.contains_key(name) {
            bail!("advantage estimator '{name}' is already registered");
        }
        self.map.insert(name.to_string(), estimator);
        Ok(())
    }

    /// Looks up `name`, listing the available names when it is unknown.
    pub fn get(&self, name: &str) -> Result<Arc<dyn AdvantageEstimator>> {
        self.map.get(name).cloned().with_context(|| {
            format!(
                "unknown advantage estimator '{name}'. Available: {:?}",
                self.names()
            )
        })
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }
}

/// Row indices of each group, in order of first appearance.
pub fn group_indices(group_ids: &[String]) -> Vec<Vec<i64>> {
    let mut order: Vec<&str> = Vec::new();
    let mut groups: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (i, g) in group_ids.iter().enumerate() {
        groups
            .entry(g.as_str())
            .or_insert_with(|| {
                order.push(g.as_str());
                Vec::new()
            })
            .push(i as i64);
    }
    order.iter().map(|g| groups[g].clone()).collect()
}

fn check_shapes(input: &AdvantageInput) -> Result<(i64, i64)> {
    let size = input.token_level_rewards.size();
    if size.len() != 2 {
        bail!("token_level_rewards must be [batch, seq], got {size:?}");
    }
    if input.response_mask.size() != size {
        bail!(
            "response_mask shape {:?} differs from token_level_rewards {size:?}",
            input.response_mask.size()
        );
    }
    if input.group_ids.len() as i64 != size[0] {
        bail!(
            "{} group ids for a batch of {} rows",
            input.group_ids.len(),
            size[0]
        );
    }
    Ok((size[0], size[1]))
}

/// Applies `f(group_scores) -> group_advantages` per group to the sequence
/// scores (sum of token rewards) and broadcasts over the response mask.
fn outcome_advantage(
    input: &AdvantageInput,
    f: impl Fn(&Tensor, usize) -> Tensor,
) -> Result<AdvantageOutput> {
    check_shapes(input)?;
    let _guard = tch::no_grad_guard();
    let rewards = input.token_level_rewards.to_kind(Kind::Float);
    let scores = rewards.sum_dim_intlist([-1i64].as_slice(), false, Kind::Float);
    let mut out = scores.zeros_like();
    for idx in group_indices(input.group_ids) {
        let n = idx.len();
        let idx = Tensor::from_slice(&idx).to_device(scores.device());
        let group = scores.index_select(0, &idx);
        let adv = f(&group, n);
        out = out.index_copy(0, &idx, &adv);
    }
    let adv = out.unsqueeze(-1) * input.response_mask.to_kind(Kind::Float);
    Ok(AdvantageOutput {
        returns: adv.shallow_clone(),
        advantages: adv,
    })
}

/// GRPO: `(s - mean_g) / (std_g + eps)` with unbiased std; a group of one uses
/// mean 0 and std 1. With `grpo_norm_by_std = false` (Dr. GRPO): `s - mean_g`.
pub struct Grpo;

impl AdvantageEstimator for Grpo {
    fn compute(&self, input: &AdvantageInput, p: &AdvantageParams) -> Result<AdvantageOutput> {
        outcome_advantage(input, |g, n| {
            let (mean, std) = if n == 1 {
                (
                    g.zeros_like().sum(Kind::Float),
                    g.ones_like().sum(Kind::Float),
                )
            } else {
                (g.mean(Kind::Float), g.std(true))
            };
            if p.grpo_norm_by_std {
                (g - mean) / (std + p.epsilon)
            } else {
                g - mean
            }
        })
    }
}

/// RLOO: `(s - mean_g) * n/(n-1)`; a group of one gets advantage 0.
pub struct Rloo;

impl AdvantageEstimator for Rloo {
    fn compute(&self, input: &AdvantageInput, _p: &AdvantageParams) -> Result<AdvantageOutput> {
        outcome_advantage(input, |g, n| {
            if n == 1 {
                tracing::warn!("rloo: only one response in a group, setting its advantage to 0");
                g.zeros_like()
            } else {
                (g - g.mean(Kind::Float)) * (n as f64 / (n as f64 - 1.0))
            }
        })
    }
}

/// MaxRL (skyrl-train `compute_maxrl_advantage`): mean-normalised group-relative
/// reward `(s - mean_g) / (mean_g + eps)`; a group of one gets `s` (mean 0).
pub struct MaxRl;

impl AdvantageEstimator for MaxRl {
    fn compute(&self, input: &AdvantageInput, p: &AdvantageParams) -> Result<AdvantageOutput> {
        outcome_advantage(input, |g, n| {
            if n == 1 {
                g.shallow_clone()
            } else {
                let mean = g.mean(Kind::Float);
                (g - &mean) / (mean + p.epsilon)
            }
        })
    }
}

/// REINFORCE++: discounted returns `G_t = r_t + gamma * G_{t+1}` (reset where the
/// mask is 0), advantages = masked whitening of the returns, times the mask.
pub struct ReinforcePlusPlus;

impl AdvantageEstimator for ReinforcePlusPlus {
    fn compute(&self, input: &AdvantageInput, p: &AdvantageParams) -> Result<AdvantageOutput> {
        let (b, t) = check_shapes(input)?;
        let _guard = tch::no_grad_guard();
        let rewards = input.token_level_rewards.to_kind(Kind::Float);
        let mask = input.response_mask.to_kind(Kind::Float);
        let mut running = Tensor::zeros([b], (Kind::Float, rewards.device()));
        let mut cols = Vec::with_capacity(t as usize);
        for i in (0..t).rev() {
            running = rewards.select(1, i) + &running * p.gamma;
            cols.push(running.shallow_clone());
            running = &running * mask.select(1, i);
        }
        cols.reverse();
        let returns = Tensor::stack(&cols, 1);
        let advantages = masked_whiten(&returns, &mask)? * &mask;
        Ok(AdvantageOutput {
            advantages,
            returns,
        })
    }
}

/// GAE: `delta_t = r_t + gamma V_{t+1} - V_t`, `A_t = delta_t + gamma lambda A_{t+1}`,
/// returns `= A + V`, advantages whitened over the mask. Needs `values`.
pub struct Gae;

impl AdvantageEstimator for Gae {
    fn compute(&self, input: &AdvantageInput, p: &AdvantageParams) -> Result<AdvantageOutput> {
        let (b, t) = check_shapes(input)?;
        let values = input
            .values
            .context("gae needs critic values (set trainer.critic.model)")?;
        if values.size() != [b, t] {
            bail!(
                "values shape {:?} differs from rewards [{b}, {t}]",
                values.size()
            );
        }
        let _guard = tch::no_grad_guard();
        let rewards = input.token_level_rewards.to_kind(Kind::Float);
        let values = values.to_kind(Kind::Float);
        let mask = input.response_mask.to_kind(Kind::Float);
        let mut last = Tensor::zeros([b], (Kind::Float, rewards.device()));
        let mut cols = Vec::with_capacity(t as usize);
        for i in (0..t).rev() {
            let next = if i < t - 1 {
                values.select(1, i + 1)
            } else {
                Tensor::zeros([b], (Kind::Float, rewards.device()))
            };
            let delta = rewards.select(1, i) + next * p.gamma - values.select(1, i);
            last = delta + &last * (p.gamma * p.lambd);
            cols.push(last.shallow_clone());
        }
        cols.reverse();
        let adv = Tensor::stack(&cols, 1);
        let returns = &adv + &values;
        let advantages = masked_whiten(&adv, &mask)?;
        Ok(AdvantageOutput {
            advantages,
            returns,
        })
    }
}

/// Clipped critic loss: `0.5 * mean_seq(masked_mean_tok(max((clip(V)-R)^2, (V-R)^2)))`
/// where `clip(V) = V_old + clamp(V - V_old, -value_clip, value_clip)`.
/// Returns the loss and the clip fraction (None without clipping).
pub fn critic_value_loss(
    values: &Tensor,
    old_values: &Tensor,
    returns: &Tensor,
    loss_mask: &Tensor,
    value_clip: Option<f64>,
) -> (Tensor, Option<f64>) {
    use super::masked::{masked_mean, masked_mean_dim};
    let (loss, clipfrac) = match value_clip {
        Some(c) => {
            let clipped = old_values + (values - old_values).clamp(-c, c);
            let surr1 = (&clipped - returns).square();
            let surr2 = (values - returns).square();
            let frac = masked_mean(&surr1.gt_tensor(&surr2).to_kind(Kind::Float), loss_mask)
                .double_value(&[]);
            (surr1.maximum(&surr2), Some(frac))
        }
        None => ((values - returns).square(), None),
    };
    let loss = masked_mean_dim(&loss, loss_mask, -1).mean(Kind::Float) * 0.5;
    (loss, clipfrac)
}

/// Convenience: a `[B, T]` float tensor on CPU from row slices (tests, callers).
pub fn tensor_2d(rows: &[Vec<f32>]) -> Result<Tensor> {
    let t = rows.first().map(|r| r.len()).unwrap_or(0);
    if rows.iter().any(|r| r.len() != t) {
        bail!("ragged rows");
    }
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    Ok(Tensor::from_slice(&flat)
        .reshape([rows.len() as i64, t as i64])
        .to_device(Device::Cpu))
}
