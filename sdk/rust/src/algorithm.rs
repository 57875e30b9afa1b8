//! The [`AdvantageEstimator`] and [`PolicyLoss`] traits (algorithm plugins)
//! and their glue to the WIT `advantage` and `policy-loss` interfaces.
//!
//! A policy loss needs no autograd: it returns the loss and `d loss / d logp`
//! per token; the host back-propagates `sum(stopgrad(grad) * logp)`.

use serde_json::Value;

pub use crate::bindings::exports::skyrl::plugin::algorithm::AlgorithmInfo;
/// A `rows x cols` f32 matrix, row-major: one row per sequence, one column
/// per response token.
pub use crate::bindings::exports::skyrl::plugin::algorithm::Matrix;
use crate::bindings::exports::skyrl::plugin::{advantage, policy_loss};
use crate::bindings::skyrl::plugin::types::PluginError;
use crate::{Error, Result};

impl Matrix {
    /// A `rows x cols` matrix of zeros.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Self {
            rows: rows as u32,
            cols: cols as u32,
            data: vec![0.0; rows * cols],
        }
    }

    /// Number of rows (sequences).
    pub fn nrows(&self) -> usize {
        self.rows as usize
    }

    /// Number of columns (tokens).
    pub fn ncols(&self) -> usize {
        self.cols as usize
    }

    /// Row `r` as a slice.
    pub fn row(&self, r: usize) -> &[f32] {
        let c = self.ncols();
        &self.data[r * c..(r + 1) * c]
    }

    /// Row `r` as a mutable slice.
    pub fn row_mut(&mut self, r: usize) -> &mut [f32] {
        let c = self.ncols();
        &mut self.data[r * c..(r + 1) * c]
    }

    /// The element at row `r`, column `c`.
    pub fn at(&self, r: usize, c: usize) -> f32 {
        self.data[r * self.ncols() + c]
    }
}

/// What an advantage estimator reads.
pub struct AdvantageInput {
    /// Per-token rewards; an outcome reward sits on the last response token.
    pub token_rewards: Matrix,
    /// 1 for response tokens that count, 0 elsewhere.
    pub response_mask: Matrix,
    /// One group id (prompt uid) per row.
    pub group_ids: Vec<String>,
    /// Critic values per token, when the run trains a critic.
    pub values: Option<Matrix>,
    /// `trainer.algorithm` (gamma, lambd, ...), with this plugin's
    /// `plugin_options` under `options`.
    pub config: Value,
}

/// Advantages and returns, each the shape of the rewards.
pub struct AdvantageOutput {
    pub advantages: Matrix,
    pub returns: Matrix,
}

/// An advantage estimator (skyrl's `@register_advantage_estimator`).
pub trait AdvantageEstimator: 'static {
    fn compute(input: &AdvantageInput) -> Result<AdvantageOutput>;
}

/// What a policy loss reads for one micro-batch. The advantages are already
/// scaled by the loss reduction: the loss is the masked sum over tokens.
pub struct LossInput {
    pub log_probs: Matrix,
    pub old_log_probs: Matrix,
    /// The inference engine's log-probabilities, when the run records them.
    pub rollout_log_probs: Option<Matrix>,
    pub advantages: Matrix,
    pub loss_mask: Matrix,
    /// `trainer.algorithm` (eps_clip_low, eps_clip_high, ...), with this
    /// plugin's `plugin_options` under `options`.
    pub config: Value,
}

/// The loss, `d loss / d log_probs` (shape of `log_probs`) and metrics.
pub struct LossOutput {
    pub loss: f64,
    pub grad: Matrix,
    pub metrics: Vec<(String, f64)>,
}

/// A policy loss (skyrl's `@register_policy_loss`).
pub trait PolicyLoss: 'static {
    fn compute(input: &LossInput) -> Result<LossOutput>;
}

/// The info record the export macro returns from `algorithm.info`.
pub fn info_of(name: &str, version: &str, description: &str) -> AlgorithmInfo {
    AlgorithmInfo {
        name: name.to_owned(),
        version: version.to_owned(),
        description: description.to_owned(),
    }
}

fn parse_config(json: &str) -> Result<Value> {
    if json.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(json).map_err(|e| Error::config(format!("config: {e}")))
}

/// Glue for `advantage.compute`, used by [`export_algorithm!`](crate::export_algorithm).
pub fn advantage_with<A: AdvantageEstimator>(
    input: advantage::AdvantageInput,
) -> Result<advantage::AdvantageOutput, PluginError> {
    let input = AdvantageInput {
        config: parse_config(&input.config_json)?,
        token_rewards: input.token_rewards,
        response_mask: input.response_mask,
        group_ids: input.group_ids,
        values: input.values,
    };
    let out = A::compute(&input)?;
    Ok(advantage::AdvantageOutput {
        advantages: out.advantages,
        returns: out.returns,
    })
}

/// Glue for `policy-loss.compute`, used by [`export_algorithm!`](crate::export_algorithm).
pub fn loss_with<L: PolicyLoss>(
    input: policy_loss::LossInput,
) -> Result<policy_loss::LossOutput, PluginError> {
    let input = LossInput {
        config: parse_config(&input.config_json)?,
        log_probs: input.log_probs,
        old_log_probs: input.old_log_probs,
        rollout_log_probs: input.rollout_log_probs,
        advantages: input.advantages,
        loss_mask: input.loss_mask,
    };
    let out = L::compute(&input)?;
    Ok(policy_loss::LossOutput {
        loss: out.loss,
        grad: out.grad,
        metrics: out.metrics,
    })
}
