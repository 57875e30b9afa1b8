//! Rollout correction: truncated importance sampling (token / sequence level) and
//! sequence / token / outlier masks against the inference engine's logprobs,
//! matching skyrl-train's `off_policy_correction_utils`.
//!
//! The importance ratio is `rho = exp(logp_old - logp_rollout)` (clamped at ±20
//! in log space).

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use tch::{Kind, Tensor};

use super::masked::{masked_mean, safe_exp_delta};
use crate::config::OffPolicyCorrectionConfig;

/// Metrics keyed by name.
pub type Metrics = BTreeMap<String, f64>;

fn frac(count: &Tensor, total: f64) -> f64 {
    count
        .to_kind(Kind::Float)
        .sum(Kind::Float)
        .double_value(&[])
        / total
}

/// TIS weight (detached): token level `min(rho, cap)` `[B,T]`, or sequence level
/// `min(exp(sum_t log rho), cap)` `[B,1]`.
pub fn compute_tis_ratio(
    old_log_probs: &Tensor,
    rollout_logprobs: &Tensor,
    loss_mask: &Tensor,
    tis_ratio_type: &str,
    cfg: &OffPolicyCorrectionConfig,
) -> Result<(Tensor, Metrics)> {
    let log_ratio = old_log_probs - rollout_logprobs;
    let mut metrics = Metrics::new();
    match tis_ratio_type {
        "token" => {
            let ratio = safe_exp_delta(&log_ratio, 20.0);
            let cap = cfg.token_tis_ratio_clip_high;
            let valid = loss_mask.gt(0.0);
            let capped = ratio.gt(cap).logical_and(&valid);
            let total = valid
                .to_kind(Kind::Float)
                .sum(Kind::Float)
                .double_value(&[])
                .max(1.0);
            metrics.insert("tis_token_clip_high_ratio".into(), frac(&capped, total));
            Ok((ratio.clamp_max(cap).detach(), metrics))
        }
        "sequence" => {
            let seq_log =
                (&log_ratio * loss_mask).sum_dim_intlist([-1i64].as_slice(), true, Kind::Float);
            let ratio = safe_exp_delta(&seq_log, 20.0);
            let cap = cfg.sequence_tis_ratio_clip_high;
            let n = ratio.size()[0] as f64;
            metrics.insert("tis_seq_clip_high_ratio".into(), frac(&ratio.gt(cap), n));
            Ok((ratio.clamp_max(cap).detach(), metrics))
        }
        other => bail!("unknown tis_ratio_type '{other}' (expected token or sequence)"),
    }
}

/// `[B,1]` mask that drops whole sequences containing any unmasked token whose
/// ratio is outside `[outlier_token_is_threshold_low, outlier_token_is_threshold_high]`.
pub fn compute_outlier_token_mask(
    old_log_probs: &Tensor,
    rollout_logprobs: &Tensor,
    loss_mask: &Tensor,
    cfg: &OffPolicyCorrectionConfig,
) -> (Tensor, Metrics) {
    let ratio = safe_exp_delta(&(old_log_probs - rollout_logprobs), 20.0);
    let valid = loss_mask.gt(0.0);
    let over = match cfg.outlier_token_is_threshold_high {
        Some(h) => ratio.gt(h).logical_and(&valid),
        None => valid.zeros_like(),
    };
    let under = match cfg.outlier_token_is_threshold_low {
        Some(l) => ratio.lt(l).logical_and(&valid),
        None => valid.zeros_like(),
    };
    let in_bounds = over.logical_not().logical_and(&under.logical_not());
    let seq_ok = in_bounds.logical_or(&loss_mask.eq(0.0)).all_dim(-1, true);
    let n = seq_ok.size()[0] as f64;
    let mut m = Metrics::new();
    m.insert(
        "outlier_seq_masked_ratio".into(),
        frac(&seq_ok.logical_not(), n),
    );
    m.insert(
        "outlier_seq_over_high_ratio".into(),
        frac(&over.any_dim(-1, false), n),
    );
    m.insert(
        "outlier_seq_under_low_ratio".into(),
        frac(&under.any_dim(-1, false), n),
    );
    (seq_ok.to_kind(Kind::Float), m)
}

/// `[B,T]` mask dropping single tokens whose ratio is outside
/// `[token_mask_is_threshold_low, token_mask_is_threshold_high]`.
pub fn compute_token_mask(
    old_log_probs: &Tensor,
    rollout_logprobs: &Tensor,
    loss_mask: &Tensor,
    cfg: &OffPolicyCorrectionConfig,
) -> (Tensor, Metrics) {
    let ratio = safe_exp_delta(&(old_log_probs - rollout_logprobs), 20.0);
    let mut keep = ratio.ones_like().to_kind(Kind::Bool);
    if let Some(h) = cfg.token_mask_is_threshold_high {
        keep = keep.logical_and(&ratio.le(h));
    }
    if let Some(l) = cfg.token_mask_is_threshold_low {
        keep = keep.logical_and(&ratio.ge(l));
    }
    let valid = loss_mask.gt(0.0);
    let total = valid
        .to_kind(Kind::Float)
        .sum(Kind::Float)
        .double_value(&[])
        .max(1.0);
    let mut m = Metrics::new();
    m.insert(
        "token_mask_ratio".into(),
        frac(&keep.logical_not().logical_and(&valid), total),
    );
    (keep.to_kind(Kind::Float), m)
}

/// `[B,1]` mask dropping sequences whose geometric-mean (`geometric`) or product
/// (`product`) ratio is outside the configured bounds.
pub fn compute_sequence_mask(
    old_log_probs: &Tensor,
    rollout_logprobs: &Tensor,
    loss_mask: &Tensor,
    metric: &str,
    cfg: &OffPolicyCorrectionConfig,
) -> Result<(Tensor, Metrics)> {
    let log_ratio = old_log_probs - rollout_logprobs;
    let seq_log = (&log_ratio * loss_mask).sum_dim_intlist([-1i64].as_slice(), true, Kind::Float);
    let (ratio, high, low, prefix) = match metric {
        "geometric" => {
            let n = loss_mask
                .sum_dim_intlist([-1i64].as_slice(), true, Kind::Float)
                .clamp_min(1.0);
            (
                safe_exp_delta(&(seq_log / n), 20.0),
                cfg.geo_mask_high,
                cfg.geo_mask_low,
                "geo_sequence_mask",
            )
        }
        "product" => (
            safe_exp_delta(&seq_log, 20.0),
            cfg.product_mask_high,
            cfg.product_mask_low,
            "product_sequence_mask",
        ),
        other => bail!("unknown sequence_mask_metric '{other}' (expected geometric or product)"),
    };
    let over = ratio.gt(high);
    let under = ratio.lt(low);
    let keep = over.logical_not().logical_and(&under.logical_not());
    let n = ratio.size()[0] as f64;
    let mut m = Metrics::new();
    m.insert(
        format!("{prefix}_masked_ratio"),
        frac(&keep.logical_not(), n),
    );
    m.insert(format!("{prefix}_over_high_ratio"), frac(&over, n));
    m.insert(format!("{prefix}_under_low_ratio"), frac(&under, n));
    Ok((keep.to_kind(Kind::Float), m))
}

/// Combined correction: returns the TIS weight (if `tis_ratio_type` is set), the
/// updated loss mask (outlier, token and sequence masks applied) and metrics.
/// Does nothing unless TIS, a sequence mask, the outlier mask or the token mask is set.
pub fn compute_off_policy_correction(
    old_log_probs: &Tensor,
    rollout_logprobs: &Tensor,
    loss_mask: &Tensor,
    cfg: &OffPolicyCorrectionConfig,
) -> Result<(Option<Tensor>, Metrics, Tensor)> {
    let apply_tis = cfg.tis_ratio_type.is_some();
    let apply_seq = cfg.sequence_mask_metric.is_some();
    let apply_outlier = cfg.outlier_token_is_threshold_low.is_some()
        || cfg.outlier_token_is_threshold_high.is_some();
    // As skyrl: the token mask needs both bounds (validation refuses one alone).
    let apply_tok =
        cfg.token_mask_is_threshold_low.is_some() && cfg.token_mask_is_threshold_high.is_some();
    if !apply_tis && !apply_seq && !apply_outlier && !apply_tok {
        return Ok((None, Metrics::new(), loss_mask.shallow_clone()));
    }
    let ratio = safe_exp_delta(&(old_log_probs - rollout_logprobs), 20.0);
    let masked_ratio = &ratio * loss_mask;
    let mut metrics = Metrics::new();
    metrics.insert(
        "is_ratio_mean".into(),
        masked_mean(&ratio, loss_mask).double_value(&[]),
    );
    metrics.insert(
        "is_ratio_std".into(),
        masked_ratio.std(true).double_value(&[]),
    );
    metrics.insert("is_ratio_max".into(), masked_ratio.max().double_value(&[]));
    metrics.insert("is_ratio_min".into(), masked_ratio.min().double_value(&[]));

    // A copy: the masks below multiply it in place.
    let mut mask = loss_mask.copy();
    if apply_outlier {
        let (outlier, m) =
            compute_outlier_token_mask(old_log_probs, rollout_logprobs, loss_mask, cfg);
        mask *= outlier;
        metrics.extend(m);
    }

    if apply_tok {
        let (tok, m) = compute_token_mask(old_log_probs, rollout_logprobs, &mask, cfg);
        mask *= tok;
        metrics.extend(m);
    }

    let mut tis = None;
    if let Some(kind) = &cfg.tis_ratio_type {
        let (r, m) = compute_tis_ratio(old_log_probs, rollout_logprobs, &mask, kind, cfg)?;
        metrics.extend(m);
        tis = Some(r);
    }
    if let Some(metric) = &cfg.sequence_mask_metric {
        let (seq, m) = compute_sequence_mask(old_log_probs, rollout_logprobs, &mask, metric, cfg)?;
        mask *= seq;
        metrics.extend(m);
    }
    Ok((tis, metrics, mask))
}

/// Applies the correction to a per-token `loss` when rollout logprobs are present.
/// Returns `(loss * tis, new_loss_mask, metrics)`.
pub fn apply_off_policy_correction(
    loss: Tensor,
    old_log_probs: &Tensor,
    rollout_logprobs: Option<&Tensor>,
    loss_mask: &Tensor,
    cfg: &OffPolicyCorrectionConfig,
) -> Result<(Tensor, Tensor, Metrics)> {
    let Some(rollout) = rollout_logprobs else {
        return Ok((loss, loss_mask.shallow_clone(), Metrics::new()));
    };
    let (tis, metrics, mask) =
        compute_off_policy_correction(old_log_probs, rollout, loss_mask, cfg)?;
    let loss = match tis {
        Some(w) => loss * w,
        None => loss,
    };
    Ok((loss, mask, metrics))
}
