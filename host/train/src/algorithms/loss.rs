//! The full actor objective for one micro-batch, as skyrl 0.3.0's worker
//! builds it: `loss = policy_loss + w * (kl_loss_coef * kl - entropy_loss_coef * entropy)`,
//! where `policy_loss` is the masked sum of the per-token loss (the advantages
//! come pre-scaled by the reduction, see [`super::reduction`]) and `w` is the
//! micro-batch's share of the mini-batch's rows.

use anyhow::{bail, Result};
use tch::{Kind, Tensor};

use super::kl::{compute_approx_kl, entropy_from_logits, KlEstimator};
use super::masked::{masked_mean, masked_mean_dim};
use super::off_policy::Metrics;
use super::policy_loss::{PolicyLossInput, PolicyLossRegistry};
use crate::config::AlgorithmConfig;

/// Tensors for one micro-batch (all `[B, T]` except `logits`, `[B, T, V]`).
pub struct ActorBatch<'a> {
    pub log_probs: &'a Tensor,
    pub old_log_probs: &'a Tensor,
    /// Advantages scaled by the loss reduction ([`super::reduction::scale_advantages`]).
    pub advantages: &'a Tensor,
    pub loss_mask: &'a Tensor,
    pub rollout_logprobs: Option<&'a Tensor>,
    /// Reference-model logprobs; needed when `use_kl_loss`.
    pub ref_log_probs: Option<&'a Tensor>,
    /// Response logits (already divided by the temperature); needed when `use_entropy_loss`.
    pub logits: Option<&'a Tensor>,
    /// Weight of the KL and entropy terms: this micro-batch's rows / the mini-batch's rows.
    pub aux_weight: f64,
}

/// Scalar loss to back-propagate plus its parts as metrics.
pub struct ActorLoss {
    pub loss: Tensor,
    pub metrics: Metrics,
}

/// Computes the policy loss named in `cfg.policy_loss_type` as a masked sum and
/// adds the KL loss (sequence-mean of the masked token mean) and the entropy
/// bonus (masked token mean), weighted by `batch.aux_weight`, when enabled.
pub fn actor_loss(
    registry: &PolicyLossRegistry,
    cfg: &AlgorithmConfig,
    batch: &ActorBatch,
) -> Result<ActorLoss> {
    let policy = registry.get(&cfg.policy_loss_type)?;
    let out = policy.compute(
        &PolicyLossInput {
            log_probs: batch.log_probs,
            old_log_probs: batch.old_log_probs,
            advantages: batch.advantages,
            loss_mask: batch.loss_mask,
            rollout_logprobs: batch.rollout_logprobs,
        },
        cfg,
    )?;
    let policy_loss = (&out.loss * &out.loss_mask).sum(Kind::Float);
    let mut metrics = out.metrics;
    metrics.insert("policy_loss".into(), policy_loss.double_value(&[]));
    let mut loss = policy_loss;

    if cfg.use_kl_loss {
        let Some(ref_lp) = batch.ref_log_probs else {
            bail!("use_kl_loss is set but no reference logprobs were given");
        };
        let est: KlEstimator = cfg.kl_estimator_type.parse()?;
        let kl = compute_approx_kl(batch.log_probs, ref_lp, Some(batch.loss_mask), est);
        let kl = masked_mean_dim(&kl, batch.loss_mask, -1).mean(Kind::Float);
        metrics.insert("kl_loss".into(), kl.double_value(&[]));
        loss += kl * (cfg.kl_loss_coef * batch.aux_weight);
    }
    if cfg.use_entropy_loss || batch.logits.is_some() {
        if let Some(logits) = batch.logits {
            let ent = masked_mean(&entropy_from_logits(logits), batch.loss_mask);
            metrics.insert("entropy".into(), ent.double_value(&[]));
            if cfg.use_entropy_loss {
                loss -= ent * (cfg.entropy_loss_coef * batch.aux_weight);
            }
        } else {
            bail!("use_entropy_loss is set but no logits were given");
        }
    }
    metrics.insert("final_loss".into(), loss.double_value(&[]));
    Ok(ActorLoss { loss, metrics })
}
