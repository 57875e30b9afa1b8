//! Masked reductions over `[batch, seq]` tensors (fp32), matching skyrl-train's
//! `masked_mean`, `masked_var` and `masked_whiten`.

use anyhow::{bail, Result};
use tch::{Kind, Tensor};

/// Mean of `t` over positions where `mask` is 1: `sum(t*mask) / max(sum(mask), 1)` (scalar).
pub fn masked_mean(t: &Tensor, mask: &Tensor) -> Tensor {
    (t * mask).sum(Kind::Float) / mask.sum(Kind::Float).clamp_min(1.0)
}

/// Masked mean along `dim` (no keepdim), denominators clamped to at least 1.
pub fn masked_mean_dim(t: &Tensor, mask: &Tensor, dim: i64) -> Tensor {
    (t * mask).sum_dim_intlist([dim].as_slice(), false, Kind::Float)
        / mask
            .sum_dim_intlist([dim].as_slice(), false, Kind::Float)
            .clamp_min(1.0)
}

/// Masked variance over all masked positions; `unbiased` applies Bessel's
/// correction `n/(n-1)`. Errors when fewer than two positions are unmasked and
/// `unbiased` is set, as in skyrl-train.
pub fn masked_var(values: &Tensor, mask: &Tensor, unbiased: bool) -> Result<Tensor> {
    let mean = masked_mean(values, mask);
    let centered = values - &mean;
    let var = masked_mean(&centered.square(), mask);
    if !unbiased {
        return Ok(var);
    }
    let n = mask.sum(Kind::Float).double_value(&[]);
    if n == 0.0 {
        bail!("masked_var: at least one element in the mask has to be 1");
    }
    if n == 1.0 {
        bail!("masked_var: the mask sums to one, so the unbiased variance divides by zero (use a larger mini-batch)");
    }
    let bessel = mask.sum(Kind::Float) / (mask.sum(Kind::Float) - 1.0);
    Ok(var * bessel)
}

/// Whitens `values` with the masked mean and unbiased masked variance:
/// `(v - mean) * rsqrt(var + 1e-8)`.
pub fn masked_whiten(values: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let mean = masked_mean(values, mask);
    let var = masked_var(values, mask, true)?;
    Ok((values - mean) * (var + 1e-8).rsqrt())
}

/// `exp(clamp(delta, -clip, clip))` in fp32: the overflow-safe ratio used everywhere.
pub fn safe_exp_delta(delta: &Tensor, clip: f64) -> Tensor {
    delta.to_kind(Kind::Float).clamp(-clip, clip).exp()
}

/// Reads a scalar tensor as `f64`.
pub fn scalar(t: &Tensor) -> f64 {
    t.double_value(&[])
}
