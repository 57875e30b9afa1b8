//! KL estimators (k1, abs, k2, k3) and the fixed / adaptive KL controllers used
//! when the KL penalty goes into the reward (`use_kl_in_reward`).

use std::str::FromStr;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use super::masked::masked_mean_dim;

/// Which approximation of KL(pi || pi_ref) to use (http://joschu.net/blog/kl-approx.html).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KlEstimator {
    /// `logp - logp_ref`
    K1,
    /// `|logp - logp_ref|`
    Abs,
    /// `0.5 * (logp - logp_ref)^2`
    K2,
    /// `clamp(exp(x) - x - 1, -10, 10)`, `x = clamp(logp_ref - logp, -20, 20)`
    K3,
}

impl FromStr for KlEstimator {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "k1" => Self::K1,
            "abs" => Self::Abs,
            "k2" => Self::K2,
            "k3" => Self::K3,
            other => bail!("invalid KL estimator type '{other}' (expected k1, abs, k2 or k3)"),
        })
    }
}

/// Per-token KL estimate, multiplied by `loss_mask` when given.
pub fn compute_approx_kl(
    log_probs: &Tensor,
    log_probs_base: &Tensor,
    loss_mask: Option<&Tensor>,
    estimator: KlEstimator,
) -> Tensor {
    let kld = match estimator {
        KlEstimator::K1 => log_probs - log_probs_base,
        KlEstimator::Abs => (log_probs - log_probs_base).abs(),
        KlEstimator::K2 => (log_probs - log_probs_base).square() * 0.5,
        KlEstimator::K3 => {
            let x = (log_probs_base - log_probs).clamp(-20.0, 20.0);
            (x.exp() - &x - 1.0).clamp(-10.0, 10.0)
        }
    };
    match loss_mask {
        Some(m) => kld * m,
        None => kld,
    }
}

/// KL coefficient controller for the in-reward KL penalty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KlController {
    /// Constant coefficient.
    Fixed { value: f64 },
    /// Adaptive controller of Ziegler et al. 2019 (arXiv:1909.08593).
    Adaptive {
        value: f64,
        target: f64,
        horizon: f64,
    },
}

impl KlController {
    /// From `trainer.algorithm.kl_ctrl` with `kl_loss_coef` as the initial value.
    pub fn from_config(c: &crate::config::AlgorithmConfig) -> Result<Self> {
        Ok(match c.kl_ctrl.kind.as_str() {
            "fixed" => Self::Fixed {
                value: c.kl_loss_coef,
            },
            "adaptive" if c.kl_ctrl.horizon > 0.0 => Self::Adaptive {
                value: c.kl_loss_coef,
                target: c.kl_ctrl.kl_target,
                horizon: c.kl_ctrl.horizon,
            },
            "adaptive" => bail!("kl_ctrl.horizon must be > 0, got {}", c.kl_ctrl.horizon),
            other => bail!("invalid KL controller type '{other}' (fixed or adaptive)"),
        })
    }

    /// Current coefficient.
    pub fn value(&self) -> f64 {
        match self {
            Self::Fixed { value } | Self::Adaptive { value, .. } => *value,
        }
    }

    /// Updates the coefficient from the observed KL after `n_steps` samples.
    pub fn update(&mut self, current_kl: f64, n_steps: usize) {
        if let Self::Adaptive {
            value,
            target,
            horizon,
        } = self
        {
            let err = (current_kl / *target - 1.0).clamp(-0.2, 0.2);
            *value *= 1.0 + err * n_steps as f64 / *horizon;
        }
    }
}

/// Result of subtracting the KL penalty from token rewards.
pub struct KlRewardPenalty {
    /// `rewards - kl * coef`
    pub token_level_rewards: Tensor,
    /// Mean over sequences of the per-sequence masked mean KL (fed to the controller).
    pub mean_kl: f64,
    /// Mean over sequences of max |kl|.
    pub mean_max_kl: f64,
}

/// Applies the KL penalty to the rewards (`use_kl_in_reward`) and updates `ctrl`.
pub fn apply_kl_penalty_to_rewards(
    token_level_rewards: &Tensor,
    log_probs: &Tensor,
    ref_log_probs: &Tensor,
    loss_mask: &Tensor,
    estimator: KlEstimator,
    ctrl: &mut KlController,
) -> KlRewardPenalty {
    let penalty = KlPenaltyInput {
        token_level_rewards,
        log_probs,
        ref_log_probs,
        loss_mask,
        estimator,
    };
    apply_kl_penalty_over_ranks(&penalty, ctrl, |x| Ok(x.to_vec()))
        .expect("summing in one process cannot fail")
}

/// The tensors of [`apply_kl_penalty_to_rewards`].
pub struct KlPenaltyInput<'a> {
    pub token_level_rewards: &'a Tensor,
    pub log_probs: &'a Tensor,
    pub ref_log_probs: &'a Tensor,
    pub loss_mask: &'a Tensor,
    pub estimator: KlEstimator,
}

/// [`apply_kl_penalty_to_rewards`] for a batch split over ranks: the means fed
/// to the controller are over every rank's sequences, `sum_over_ranks`
/// summing `[sum of sequence means, sum of max |kl|, sequences]`.
pub fn apply_kl_penalty_over_ranks(
    input: &KlPenaltyInput,
    ctrl: &mut KlController,
    sum_over_ranks: impl Fn(&[f64]) -> anyhow::Result<Vec<f64>>,
) -> anyhow::Result<KlRewardPenalty> {
    let kl = compute_approx_kl(
        input.log_probs,
        input.ref_log_probs,
        Some(input.loss_mask),
        input.estimator,
    );
    let rows = input.token_level_rewards.size()[0] as f64;
    let local = [
        masked_mean_dim(&kl, input.loss_mask, -1)
            .sum(Kind::Double)
            .double_value(&[]),
        kl.abs()
            .amax([-1i64].as_slice(), false)
            .sum(Kind::Double)
            .double_value(&[]),
        rows,
    ];
    let total = sum_over_ranks(&local)?;
    let n = total[2].max(1.0);
    let (mean_kl, mean_max_kl) = (total[0] / n, total[1] / n);
    let rewards = input.token_level_rewards - &kl * ctrl.value();
    ctrl.update(mean_kl, total[2] as usize);
    Ok(KlRewardPenalty {
        token_level_rewards: rewards,
        mean_kl,
        mean_max_kl,
    })
}

/// Entropy of the categorical distribution per position: `logsumexp(z) - sum(softmax(z) * z)`.
/// `logits` is `[..., V]`; the result drops the last dim.
pub fn entropy_from_logits(logits: &Tensor) -> Tensor {
    let logits = logits.to_kind(Kind::Float);
    let pd = logits.softmax(-1, Kind::Float);
    logits.logsumexp([-1i64].as_slice(), false)
        - (&pd * &logits).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float)
}
