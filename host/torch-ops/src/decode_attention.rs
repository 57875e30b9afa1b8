//! Attention of one query position per row, for decode steps on CPU in fp32,
//! without BLAS's packing copies (see `shim/decode_attention.cpp`).

use tch::{Device, Kind, Tensor};

use crate::ffi::{self, call};
use crate::{Result, TorchOpsError};

/// Whether [`decode_attention`] takes these operands: fp32 CPU tensors
/// outside autograd, `q [B, Hkv, G, D]`, keys and values `[B, Hkv, S, D]`
/// alike with the head dimension contiguous, `mask [B, S]`.
pub fn decode_attention_applies(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor) -> bool {
    let all = [q, k, v, mask];
    let (qs, ks, ms) = (q.size(), k.size(), mask.size());
    all.iter()
        .all(|t| t.kind() == Kind::Float && t.device() == Device::Cpu && !t.requires_grad())
        && qs.len() == 4
        && ks.len() == 4
        && ms.len() == 2
        && ks == v.size()
        && k.stride() == v.stride()
        && k.stride()[3] == 1
        && ks[0] == qs[0]
        && ks[1] == qs[1]
        && ks[3] == qs[3]
        && ms == [qs[0], ks[2]]
}

/// `softmax(q kᵀ · scale + mask) v` for each of the `G` query heads that
/// share a key/value head: `q [B, Hkv, G, D]`, `k`/`v [B, Hkv, S, D]`,
/// additive `mask [B, S]` (`-inf` masks a key, which is then never read).
/// Returns `[B, Hkv, G, D]` fp32. Runs on the calling thread's libtorch
/// intra-op threads when the work is large enough.
pub fn decode_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &Tensor,
    scale: f64,
) -> Result<Tensor> {
    if !decode_attention_applies(q, k, v, mask) {
        return Err(TorchOpsError(format!(
            "decode_attention needs fp32 CPU tensors without grad, q [B, Hkv, G, D], k/v [B, Hkv, S, D] \
             with equal strides and a contiguous D, mask [B, S]; got q {:?}, k {:?} (strides {:?}), \
             v {:?}, mask {:?}",
            q.size(),
            k.size(),
            k.stride(),
            v.size(),
            mask.size()
        )));
    }
    let mut out = std::ptr::null_mut();
    call(|err| {
        // SAFETY: four live `at::Tensor*`; the shim allocates the output.
        unsafe {
            ffi::skyrl_decode_attention(
                q.as_ptr().cast(),
                k.as_ptr().cast(),
                v.as_ptr().cast(),
                mask.as_ptr().cast(),
                scale,
                &mut out,
                err,
            )
        }
    })?;
    // SAFETY: on success `out` is a fresh `new at::Tensor` we now own.
    Ok(unsafe { ffi::take(out) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SDPA on the same operands, the query heads of a group as its rows.
    fn reference(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor, scale: f64) -> Tensor {
        let (b, s) = (mask.size()[0], mask.size()[1]);
        let m = mask.view([b, 1, 1, s]);
        Tensor::scaled_dot_product_attention(q, k, v, Some(&m), 0.0, false, Some(scale), false)
    }

    fn check(b: i64, h: i64, g: i64, s: i64, d: i64, capacity: i64) {
        tch::manual_seed(7);
        let q = Tensor::randn([b, h, g, d], (Kind::Float, Device::Cpu));
        // Keys and values as views of a longer cache, as the engines hold them.
        let k = Tensor::randn([b, h, capacity, d], (Kind::Float, Device::Cpu)).narrow(2, 0, s);
        let v = Tensor::randn([b, h, capacity, d], (Kind::Float, Device::Cpu)).narrow(2, 0, s);
        // Row i sees its first s - i keys (at least one).
        let lens = Tensor::arange(b, (Kind::Int64, Device::Cpu)).neg() + s;
        let keep = Tensor::arange(s, (Kind::Int64, Device::Cpu))
            .view([1, s])
            .lt_tensor(&lens.clamp_min(1).view([b, 1]));
        let mask = Tensor::zeros([b, s], (Kind::Float, Device::Cpu))
            .masked_fill(&keep.logical_not(), f64::NEG_INFINITY);
        let scale = (d as f64).powf(-0.5);
        let got = decode_attention(&q, &k, &v, &mask, scale).unwrap();
        let want = reference(&q, &k, &v, &mask, scale);
        let diff = (&got - &want).abs().max().double_value(&[]);
        assert!(
            diff < 1e-5,
            "B{b} H{h} G{g} S{s} D{d}: max difference {diff}"
        );
    }

    #[test]
    fn matches_sdpa_over_shapes_and_masks() {
        check(3, 2, 4, 37, 32, 64); // grouped heads, a view of a longer cache
        check(2, 4, 1, 9, 16, 9); // one query head per kv head, contiguous
        check(5, 1, 2, 130, 20, 131); // a head size that is no multiple of 8
        check(40, 2, 4, 37, 16, 40); // rows whose last blocks of keys are all masked
    }

    #[test]
    fn refuses_what_it_cannot_run() {
        let q = Tensor::zeros([1, 1, 1, 8], (Kind::Float, Device::Cpu));
        let k = Tensor::zeros([1, 1, 4, 8], (Kind::Float, Device::Cpu));
        let mask = Tensor::zeros([1, 4], (Kind::Float, Device::Cpu));
        let half = k.to_kind(Kind::Half);
        assert!(decode_attention(&q, &half, &half, &mask, 1.0).is_err());
        let strided = Tensor::zeros([1, 1, 8, 4], (Kind::Float, Device::Cpu)).transpose(2, 3);
        assert!(decode_attention(&q, &strided, &strided, &mask, 1.0).is_err());
        let wrong_mask = Tensor::zeros([1, 5], (Kind::Float, Device::Cpu));
        assert!(decode_attention(&q, &k, &k, &wrong_mask, 1.0).is_err());
        assert!(decode_attention(&q, &k, &k, &mask, 1.0).is_ok());
    }
}
