//! Multi-tensor optimizer kernels: `torch._fused_adamw_`, `_foreach_norm`
//! and `_foreach_mul_`.

use tch::{Kind, Tensor};

use crate::ffi::{self, call, mut_ptrs, ptrs};
use crate::{Result, TorchOpsError};

/// One AdamW update's position and hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWStep {
    /// Update number, 1-based (bias correction uses it).
    pub step: i64,
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

/// `torch._fused_adamw_`: updates `params`, `exp_avgs` and `exp_avg_sqs` in
/// place with `grads`, exactly as `torch.optim.AdamW(fused=True)` does
/// (decoupled weight decay, bias correction, no amsgrad). All tensors must be
/// on one device with one floating dtype, `grads[i]` etc. shaped like
/// `params[i]`.
pub fn fused_adamw_(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    hp: &AdamWStep,
) -> Result<()> {
    let n = params.len();
    if grads.len() != n || exp_avgs.len() != n || exp_avg_sqs.len() != n {
        return Err(TorchOpsError(format!(
            "fused_adamw_: {n} params but {} grads, {} exp_avgs, {} exp_avg_sqs",
            grads.len(),
            exp_avgs.len(),
            exp_avg_sqs.len()
        )));
    }
    if hp.step < 1 || hp.step > 1 << 24 {
        // The kernel reads the step from an fp32 scalar: exact up to 2^24.
        return Err(TorchOpsError(format!(
            "fused_adamw_: step must be in 1..=2^24, got {}",
            hp.step
        )));
    }
    for (i, p) in params.iter().enumerate() {
        for (what, t) in [
            ("grad", &grads[i]),
            ("exp_avg", &exp_avgs[i]),
            ("exp_avg_sq", &exp_avg_sqs[i]),
        ] {
            if t.size() != p.size() || t.kind() != p.kind() || t.device() != p.device() {
                return Err(TorchOpsError(format!(
                    "fused_adamw_: {what} {i} is {:?} {:?} on {:?}, its parameter {:?} {:?} on {:?}",
                    t.size(),
                    t.kind(),
                    t.device(),
                    p.size(),
                    p.kind(),
                    p.device()
                )));
            }
        }
    }
    let (p, g, m, v) = (
        mut_ptrs(params),
        ptrs(grads),
        mut_ptrs(exp_avgs),
        mut_ptrs(exp_avg_sqs),
    );
    call(|err| {
        // SAFETY: four arrays of n live `at::Tensor*` (checked lengths);
        // the shim only reads them and updates the tensors' data.
        unsafe {
            ffi::skyrl_fused_adamw(
                p.as_ptr(),
                g.as_ptr(),
                m.as_ptr(),
                v.as_ptr(),
                n,
                hp.step as f64,
                hp.lr,
                hp.beta1,
                hp.beta2,
                hp.weight_decay,
                hp.eps,
                err,
            )
        }
    })
}

/// `torch._foreach_norm(tensors, 2, dtype=float32)`: the L2 norm of every
/// tensor, as one fp32 vector `[tensors.len()]`.
pub fn foreach_norm(tensors: &[Tensor]) -> Result<Tensor> {
    let t = ptrs(tensors);
    let mut out = std::ptr::null_mut();
    // SAFETY: an array of live `at::Tensor*`; the shim allocates `out`.
    call(|err| unsafe { ffi::skyrl_foreach_norm(t.as_ptr(), t.len(), &mut out, err) })?;
    // SAFETY: on success `out` is a fresh `new at::Tensor` we now own.
    let norms = unsafe { ffi::take(out) };
    debug_assert_eq!(norms.kind(), Kind::Float);
    Ok(norms)
}

/// `torch._foreach_mul_(tensors, scalar)`: scales every tensor in place.
pub fn foreach_mul_(tensors: &[Tensor], scalar: f64) -> Result<()> {
    let t = mut_ptrs(tensors);
    // SAFETY: an array of live `at::Tensor*`; only their data changes.
    call(|err| unsafe { ffi::skyrl_foreach_mul_scalar(t.as_ptr(), t.len(), scalar, err) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    fn randn(shape: &[i64]) -> Tensor {
        Tensor::randn(shape, (Kind::Float, Device::Cpu))
    }

    /// The fused kernel against torch's single-tensor AdamW formulas.
    #[test]
    fn fused_adamw_matches_the_single_tensor_update() {
        tch::manual_seed(0);
        let shapes: [&[i64]; 3] = [&[7, 5], &[3], &[2, 2, 9]];
        let params: Vec<Tensor> = shapes.iter().map(|s| randn(s)).collect();
        let reference: Vec<Tensor> = params.iter().map(Tensor::copy).collect();
        let zeros = |v: &[Tensor]| v.iter().map(Tensor::zeros_like).collect::<Vec<_>>();
        let (m, v) = (zeros(&params), zeros(&params));
        let (mut rm, mut rv) = (zeros(&params), zeros(&params));
        let (b1, b2, eps, wd, lr) = (0.9, 0.99, 1e-8, 0.1, 1e-2);
        for step in 1..=5 {
            let grads: Vec<Tensor> = shapes.iter().map(|s| randn(s)).collect();
            let hp = AdamWStep {
                step,
                lr,
                beta1: b1,
                beta2: b2,
                eps,
                weight_decay: wd,
            };
            fused_adamw_(&params, &grads, &m, &v, &hp).unwrap();
            for i in 0..shapes.len() {
                let (bc1, bc2) = (1.0 - b1.powi(step as i32), 1.0 - b2.powi(step as i32));
                let mut p = reference[i].shallow_clone();
                let _ = p.f_mul_scalar_(1.0 - lr * wd).unwrap();
                rm[i] = &rm[i] * b1 + &grads[i] * (1.0 - b1);
                rv[i] = &rv[i] * b2 + &grads[i] * &grads[i] * (1.0 - b2);
                let denom = rv[i].sqrt() / bc2.sqrt() + eps;
                let _ = p.f_sub_(&(&rm[i] / denom * (lr / bc1))).unwrap();
            }
        }
        for i in 0..shapes.len() {
            let d = (&params[i] - &reference[i]).abs().max().double_value(&[]);
            assert!(d < 1e-6, "param {i} differs by {d}");
            let d = (&m[i] - &rm[i]).abs().max().double_value(&[]);
            assert!(d < 1e-6, "exp_avg {i} differs by {d}");
        }
    }

    #[test]
    fn fused_adamw_refuses_mismatched_lists() {
        let p = vec![randn(&[3])];
        let g = vec![randn(&[4])];
        let hp = AdamWStep {
            step: 1,
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        };
        let err = fused_adamw_(&p, &g, &p, &p, &hp).unwrap_err().to_string();
        assert!(err.contains("grad 0"), "{err}");
        let err = fused_adamw_(&p, &[], &p, &p, &hp).unwrap_err().to_string();
        assert!(err.contains("0 grads"), "{err}");
    }

    #[test]
    fn foreach_norm_and_mul() {
        tch::manual_seed(1);
        let t = vec![randn(&[4, 4]), randn(&[9])];
        let norms = foreach_norm(&t).unwrap();
        assert_eq!(norms.size(), [2]);
        for (i, x) in t.iter().enumerate() {
            let want = x.square().sum(Kind::Double).sqrt().double_value(&[]);
            let got = norms.double_value(&[i as i64]);
            assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
        }
        let before: Vec<Tensor> = t.iter().map(Tensor::copy).collect();
        foreach_mul_(&t, 0.5).unwrap();
        for (a, b) in t.iter().zip(&before) {
            assert_eq!((a - b * 0.5).abs().max().double_value(&[]), 0.0);
        }
        assert_eq!(foreach_norm(&[]).unwrap().size(), [0]);
        foreach_mul_(&[], 2.0).unwrap();
    }
}
