//! Policy losses and a name-keyed registry (skyrl-train's `PolicyLossRegistry`).
//!
//! Each loss returns the per-token loss `[B, T]` (after rollout correction), the
//! loss mask to reduce it with (rollout correction may drop tokens/sequences) and
//! metrics. The loss reduction is already in the advantages
//! ([`super::reduction::scale_advantages`]): the objective is the masked sum.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use tch::{Device, Kind, Tensor};

use super::masked::{masked_mean, masked_mean_dim, safe_exp_delta};
use super::off_policy::{apply_off_policy_correction, Metrics};
use crate::config::{AlgorithmConfig, DppoConfig};

/// Tensors a policy loss reads; all `[B, T]`, fp32.
pub struct PolicyLossInput<'a> {
    pub log_probs: &'a Tensor,
    pub old_log_probs: &'a Tensor,
    pub advantages: &'a Tensor,
    pub loss_mask: &'a Tensor,
    /// Logprobs reported by the inference engine (for rollout correction).
    pub rollout_logprobs: Option<&'a Tensor>,
}

/// Per-token loss, the mask to reduce it with, and metrics (e.g. `clip_ratio`).
pub struct PolicyLossOutput {
    pub loss: Tensor,
    pub loss_mask: Tensor,
    pub metrics: Metrics,
}

/// A pluggable policy loss.
pub trait PolicyLoss: Send + Sync {
    fn compute(&self, input: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput>;
}

impl<F> PolicyLoss for F
where
    F: Fn(&PolicyLossInput, &AlgorithmConfig) -> Result<PolicyLossOutput> + Send + Sync,
{
    fn compute(&self, input: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        self(input, cfg)
    }
}

/// Name → policy loss map.
#[derive(Clone, Default)]
pub struct PolicyLossRegistry {
    map: BTreeMap<String, Arc<dyn PolicyLoss>>,
}

impl PolicyLossRegistry {
    /// Registry with `regular`, `dual_clip`, `gspo`, `cispo`, `sapo`, `clip_cov`,
    /// `kl_cov`, `cross_entropy`, `rollout_is`, `dppo`, `importance_sampling`.
    pub fn with_defaults() -> Self {
        let mut r = Self::default();
        let builtins: [(&str, Arc<dyn PolicyLoss>); 11] = [
            ("regular", Arc::new(PpoClip { dual_clip: false })),
            ("dual_clip", Arc::new(PpoClip { dual_clip: true })),
            ("gspo", Arc::new(Gspo)),
            ("cispo", Arc::new(Cispo)),
            ("sapo", Arc::new(Sapo)),
            ("clip_cov", Arc::new(ClipCov)),
            ("kl_cov", Arc::new(KlCov)),
            ("cross_entropy", Arc::new(CrossEntropy)),
            ("rollout_is", Arc::new(RolloutIs)),
            ("dppo", Arc::new(Dppo)),
            ("importance_sampling", Arc::new(ImportanceSampling)),
        ];
        for (name, loss) in builtins {
            r.map.insert(name.to_string(), loss);
        }
        r
    }

    /// Adds `loss` under `name`; a name already taken is an error.
    pub fn register(&mut self, name: &str, loss: Arc<dyn PolicyLoss>) -> Result<()> {
        if self.map.contains_key(name) {
            bail!("policy loss '{name}' is already registered");
        }
        self.map.insert(name.to_string(), loss);
        Ok(())
    }

    /// Looks up `name`, listing the available names when it is unknown.
    pub fn get(&self, name: &str) -> Result<Arc<dyn PolicyLoss>> {
        self.map.get(name).cloned().with_context(|| {
            format!(
                "unknown policy loss '{name}'. Available: {:?}",
                self.names()
            )
        })
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }
}

/// Shared metrics: clip fraction and ratio statistics over unmasked tokens.
fn ratio_metrics(ratio: &Tensor, mask: &Tensor, clipped: Option<&Tensor>) -> Metrics {
    let mut m = Metrics::new();
    let clip = clipped
        .map(|c| masked_mean(&c.to_kind(Kind::Float), mask).double_value(&[]))
        .unwrap_or(0.0);
    m.insert("clip_ratio".into(), clip);
    let r = ratio.detach();
    m.insert("ratio_mean".into(), masked_mean(&r, mask).double_value(&[]));
    let valid = mask.gt(0.0);
    if valid.any().int64_value(&[]) != 0 {
        let sel = r.masked_select(&valid);
        m.insert("ratio_max".into(), sel.max().double_value(&[]));
        m.insert("ratio_min".into(), sel.min().double_value(&[]));
    }
    m
}

fn finish(
    loss: Tensor,
    input: &PolicyLossInput,
    cfg: &AlgorithmConfig,
    mut metrics: Metrics,
) -> Result<PolicyLossOutput> {
    let (loss, loss_mask, extra) = apply_off_policy_correction(
        loss,
        input.old_log_probs,
        input.rollout_logprobs,
        input.loss_mask,
        &cfg.off_policy_correction,
    )?;
    metrics.extend(extra);
    Ok(PolicyLossOutput {
        loss,
        loss_mask,
        metrics,
    })
}

/// PPO clipped surrogate `-min(rA, clip(r, 1-eps_low, 1+eps_high) A)`; with
/// `dual_clip`, for `A < 0` the loss is further capped at `-c A`.
pub struct PpoClip {
    pub dual_clip: bool,
}

impl PolicyLoss for PpoClip {
    fn compute(&self, x: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let ratio = safe_exp_delta(&(x.log_probs - x.old_log_probs), 20.0);
        let surr1 = &ratio * x.advantages;
        let surr2 = ratio.clamp(1.0 - cfg.eps_clip_low, 1.0 + cfg.eps_clip_high) * x.advantages;
        let clipped = surr2.neg().gt_tensor(&surr1.neg());
        let mut loss = surr1.minimum(&surr2).neg();
        if self.dual_clip {
            let loss3 = x.advantages.neg() * cfg.clip_ratio_c;
            let capped = loss3.minimum(&loss);
            loss = capped.where_self(&x.advantages.lt(0.0), &loss);
        }
        let metrics = ratio_metrics(&ratio, x.loss_mask, Some(&clipped));
        finish(loss, x, cfg, metrics)
    }
}

/// GSPO-token: sequence log-ratio = masked mean of `logp - logp_old`; token ratio
/// `exp(logp - sg(logp) + sg(seq_log_ratio))` (log clamped at 10), then PPO clip.
pub struct Gspo;

impl PolicyLoss for Gspo {
    fn compute(&self, x: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        if cfg.loss_reduction != "sequence_mean" {
            tracing::warn!(
                "with GSPO it's recommended to use 'sequence_mean' loss reduction; got {}",
                cfg.loss_reduction
            );
        }
        let log_ratio = x.log_probs - x.old_log_probs;
        let seq = masked_mean_dim(&log_ratio, x.loss_mask, -1).unsqueeze(-1);
        let log_w = (x.log_probs - x.log_probs.detach() + seq.detach()).clamp_max(10.0);
        let ratio = log_w.exp();
        let surr1 = &ratio * x.advantages;
        let surr2 = ratio.clamp(1.0 - cfg.eps_clip_low, 1.0 + cfg.eps_clip_high) * x.advantages;
        let clipped = surr2.neg().gt_tensor(&surr1.neg());
        let loss = surr1.minimum(&surr2).neg();
        let metrics = ratio_metrics(&ratio, x.loss_mask, Some(&clipped));
        finish(loss, x, cfg, metrics)
    }
}

/// CISPO: `-A * sg(clip(r, 1-cispo_eps_clip_low, 1+cispo_eps_clip_high)) * logp`.
pub struct Cispo;

impl PolicyLoss for Cispo {
    fn compute(&self, x: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let lo = 1.0 - cfg.cispo.cispo_eps_clip_low;
        let hi = 1.0 + cfg.cispo.cispo_eps_clip_high;
        let ratio = safe_exp_delta(&(x.log_probs - x.old_log_probs), 20.0);
        let clamped = ratio.clamp(lo, hi).detach();
        let loss = x.advantages.neg() * clamped * x.log_probs;
        let clipped = ratio.lt(lo).logical_or(&ratio.gt(hi));
        let metrics = ratio_metrics(&ratio, x.loss_mask, Some(&clipped));
        finish(loss, x, cfg, metrics)
    }
}

/// SAPO: soft gate `f = sigmoid(tau (r - 1)) * 4 / tau`, `tau = tau_pos` if `A > 0`
/// else `tau_neg`; loss `-f * A`.
pub struct Sapo;

impl PolicyLoss for Sapo {
    fn compute(&self, x: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let ratio = safe_exp_delta(&(x.log_probs - x.old_log_probs), 20.0);
        let pos = x.advantages.gt(0.0);
        let taus =
            Tensor::where_scalar(&pos, cfg.sapo.tau_pos, cfg.sapo.tau_neg).to_kind(Kind::Float);
        let gates = ((&ratio - 1.0) * &taus).sigmoid() * (taus.reciprocal() * 4.0);
        let loss = (gates * x.advantages).neg();
        let metrics = ratio_metrics(&ratio, x.loss_mask, None);
        finish(loss, x, cfg, metrics)
    }
}

/// Clip-Cov (Cui et al. 2025): PPO clip plus zeroing the gradient of a random
/// `clip_ratio` fraction of tokens whose centred covariance `(A - mean A)(logp -
/// mean logp)` lies in `(clip_cov_lb, clip_cov_ub)`. Uses libtorch's global RNG
/// (`tch::manual_seed`) for the random choice, like skyrl's `torch.randperm`.
pub struct ClipCov;

impl PolicyLoss for ClipCov {
    fn compute(&self, x: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let cc = &cfg.clip_cov;
        let mask = x.loss_mask;
        let ratio = safe_exp_delta(&(x.log_probs - x.old_log_probs), 20.0);
        let pg1 = x.advantages.neg() * &ratio;
        let pg2 = x.advantages.neg() * ratio.clamp(1.0 - cfg.eps_clip_low, 1.0 + cfg.eps_clip_high);
        let valid = mask.gt(0.0);
        let clip_by_origin = pg2.gt_tensor(&pg1).logical_and(&valid);
        let cov = (x.advantages - masked_mean(x.advantages, mask))
            * (x.log_probs.detach() - masked_mean(&x.log_probs.detach(), mask));
        let cov = cov
            .masked_fill(&valid.logical_not(), f64::NEG_INFINITY)
            .masked_fill(&clip_by_origin, f64::NEG_INFINITY);
        let n_valid = mask.sum(Kind::Float).double_value(&[]);
        let clip_num = ((cc.clip_ratio * n_valid) as i64).max(1);
        let cand = cov
            .lt(cc.clip_cov_ub)
            .logical_and(&cov.gt(cc.clip_cov_lb))
            .logical_and(&valid)
            .nonzero();
        let mut corr = x.advantages.ones_like();
        let n_cand = cand.size()[0];
        if n_cand > 0 {
            let perm =
                Tensor::randperm(n_cand, (Kind::Int64, Device::Cpu)).to_device(cand.device());
            let take = perm.narrow(0, 0, clip_num.min(n_cand));
            let chosen = cand.index_select(0, &take);
            let rows = chosen.select(1, 0);
            let cols = chosen.select(1, 1);
            let zeros = Tensor::zeros([take.size()[0]], (corr.kind(), corr.device()));
            corr = corr.index_put(&[Some(rows), Some(cols)], &zeros, false);
        }
        let clip_frac = masked_mean(&corr.eq(0.0).to_kind(Kind::Float), mask).double_value(&[]);
        let loss = pg1.maximum(&pg2) * &corr;
        let mut metrics = ratio_metrics(&ratio, mask, None);
        metrics.insert("clip_ratio".into(), clip_frac);
        Ok(PolicyLossOutput {
            loss,
            loss_mask: mask.shallow_clone(),
            metrics,
        })
    }
}

/// KL-Cov (Cui et al. 2025): `-A r`, plus `ppo_kl_coef * |logp - logp_old|` on the
/// top `kl_cov_frac` of unmasked tokens by centred covariance.
pub struct KlCov;

impl PolicyLoss for KlCov {
    fn compute(&self, x: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let kc = &cfg.kl_cov;
        let mask = x.loss_mask;
        let delta = x.log_probs - x.old_log_probs;
        let ratio = safe_exp_delta(&delta, 20.0);
        let pg1 = x.advantages.neg() * &ratio;
        let pg_kl = &pg1 + delta.abs() * kc.ppo_kl_coef;
        let valid = mask.gt(0.0);
        let flat_valid = valid.reshape([-1]);
        let valid_idx = flat_valid.nonzero().squeeze_dim(-1);
        let n = valid_idx.size()[0];
        let mut loss = pg1.shallow_clone();
        if n > 0 {
            let adv = x
                .advantages
                .detach()
                .reshape([-1])
                .index_select(0, &valid_idx);
            let logp = x
                .log_probs
                .detach()
                .reshape([-1])
                .index_select(0, &valid_idx);
            let cov = (&adv - adv.mean(Kind::Float)) * (&logp - logp.mean(Kind::Float));
            let k = ((n as f64 * kc.kl_cov_frac) as i64).max(1).min(n);
            let (_, top) = cov.topk(k, 0, true, true);
            let chosen = valid_idx.index_select(0, &top);
            let sel = Tensor::zeros([pg1.numel() as i64], (Kind::Bool, pg1.device()))
                .index_fill(0, &chosen, 1)
                .reshape(pg1.size());
            loss = pg_kl.where_self(&sel, &pg1);
        }
        let mut metrics = ratio_metrics(&ratio, mask, None);
        metrics.insert("clip_ratio".into(), 0.0);
        Ok(PolicyLossOutput {
            loss,
            loss_mask: mask.shallow_clone(),
            metrics,
        })
    }
}

/// Supervised fine-tuning: `-logp` per token, summed over the masked tokens
/// (Tinker's and skyrl 0.3.0's semantics; advantages and old logprobs ignored,
/// so the loss reduction does not apply).
pub struct CrossEntropy;

impl PolicyLoss for CrossEntropy {
    fn compute(&self, x: &PolicyLossInput, _cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let mut metrics = Metrics::new();
        metrics.insert("clip_ratio".into(), 0.0);
        Ok(PolicyLossOutput {
            loss: x.log_probs.neg(),
            loss_mask: x.loss_mask.shallow_clone(),
            metrics,
        })
    }
}

/// Rollout-IS: `-sg(w) * A * logp` with `w = exp(logp - logp_rollout)` zeroed
/// outside `(1 - eps_clip_low, 1 + eps_clip_high)`. Needs rollout logprobs.
pub struct RolloutIs;

impl PolicyLoss for RolloutIs {
    fn compute(&self, x: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let rollout = x
            .rollout_logprobs
            .context("rollout_is needs rollout logprobs (generator.sampling_params.logprobs)")?;
        let ratio = safe_exp_delta(&(x.log_probs - rollout), 20.0);
        let in_range = ratio
            .gt(1.0 - cfg.eps_clip_low)
            .logical_and(&ratio.lt(1.0 + cfg.eps_clip_high));
        let w = ratio.where_self(&in_range, &ratio.zeros_like()).detach();
        let loss = (w * x.advantages * x.log_probs).neg();
        let metrics = ratio_metrics(&ratio, x.loss_mask, Some(&in_range.logical_not()));
        finish(loss, x, cfg, metrics)
    }
}

/// DPPO (arXiv 2602.04879): `-(r * A * m)` with `r = exp(logp - logp_mu)`, the
/// behaviour policy `mu` being the rollout logprobs (else the old ones), and a
/// no-grad mask `m` dropping tokens whose probability moved too far in the
/// advantage's direction: `binary_tv` by `p - q` against `dppo.delta_high`
/// (`A > 0`) / `q - p` against `dppo.delta_low` (`A < 0`); `binary_kl` by the
/// Bernoulli KL between `q` and `p`. Off-policy correction follows.
pub struct Dppo;

impl PolicyLoss for Dppo {
    fn compute(&self, x: &PolicyLossInput, cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let d = &cfg.dppo;
        let mu = x.rollout_logprobs.unwrap_or(x.old_log_probs);
        let ratio = safe_exp_delta(&(x.log_probs - mu), 20.0);
        let dropped = dppo_dropped(x.log_probs, mu, x.advantages, d)?;
        let keep = dropped.logical_not().to_kind(Kind::Float);
        let loss = (&ratio * x.advantages * keep).neg();
        let metrics = ratio_metrics(&ratio, x.loss_mask, Some(&dropped));
        finish(loss, x, cfg, metrics)
    }
}

/// DPPO's no-grad mask: true where a token's probability moved too far from
/// the behaviour policy's (`mu`, log-probs) in its advantage's direction
/// (see [`Dppo`]). Shared with the Tinker service's `dppo` loss.
pub fn dppo_dropped(
    log_probs: &Tensor,
    mu: &Tensor,
    advantages: &Tensor,
    d: &DppoConfig,
) -> Result<Tensor> {
    let _g = tch::no_grad_guard();
    let lp = log_probs.detach();
    let p = lp.exp();
    let q = mu.exp();
    let diff = &p - &q;
    let pos = advantages.gt(0.0);
    let neg = advantages.lt(0.0);
    Ok(match d.dppo_type.as_str() {
        "binary_tv" => pos
            .logical_and(&diff.gt(d.delta_high))
            .logical_or(&neg.logical_and(&diff.neg().gt(d.delta_low))),
        "binary_kl" => {
            let eps = 1e-8;
            let one_minus_q: Tensor = 1.0 - &q;
            let one_minus_p: Tensor = 1.0 - &p;
            let log_odds: Tensor = ((&one_minus_q + eps) / (one_minus_p + eps)).log();
            let kl = &q * (mu - &lp) + one_minus_q * log_odds;
            pos.logical_and(&diff.gt(0.0))
                .logical_and(&kl.gt(d.delta_high))
                .logical_or(
                    &neg.logical_and(&diff.lt(0.0))
                        .logical_and(&kl.gt(d.delta_low)),
                )
        }
        other => bail!("unknown dppo.dppo_type '{other}' (expected binary_tv or binary_kl)"),
    })
}

/// Importance sampling (Tinker's `importance_sampling`): `-(exp(logp - logp_old) * A)`,
/// summed over the masked tokens; no clipping and no off-policy correction.
pub struct ImportanceSampling;

impl PolicyLoss for ImportanceSampling {
    fn compute(&self, x: &PolicyLossInput, _cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let ratio = (x.log_probs - x.old_log_probs).exp();
        let loss = (&ratio * x.advantages).neg();
        let mut metrics = Metrics::new();
        metrics.insert(
            "importance_ratio".into(),
            masked_mean(&ratio.detach(), x.loss_mask).double_value(&[]),
        );
        Ok(PolicyLossOutput {
            loss,
            loss_mask: x.loss_mask.shallow_clone(),
            metrics,
        })
    }
}
