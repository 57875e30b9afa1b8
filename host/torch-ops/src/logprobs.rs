//! Token log-probs through the LM head without materialised logits.

use std::ffi::c_int;

use tch::{Kind, Tensor};

use crate::ffi::{self, call};
use crate::{Result, TorchOpsError};

/// Output of [`chunked_logprobs`].
#[derive(Debug)]
pub struct ChunkedLogprobs {
    /// `[N]` fp32 log-probs of the targets.
    pub logprobs: Tensor,
    /// `[N]` fp32 entropy of each row's distribution, when asked.
    pub entropy: Option<Tensor>,
}

/// How [`chunked_logprobs`] trades memory for time in its backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadChunking {
    /// Rows a chunk at a time in both directions; the backward recomputes
    /// each chunk's logits (one extra LM-head matmul), so at most a few
    /// `[chunk, V]` blocks are ever alive.
    Recompute(i64),
    /// All rows as one chunk whose `[N, V]` fp32 log-softmax is kept for the
    /// backward: no recomputation, `4·N·V` bytes held from forward to
    /// backward (still one such tensor where the full-logits path keeps two
    /// or three). For when `N·V` is small.
    Keep,
}

/// Log-prob of `targets [N]` (int64) under `softmax(hidden @ weight^T / temperature)`
/// for `hidden [N, H]` and LM-head `weight [V, H]`, and optionally each row's
/// entropy, computed in fp32 as `chunking` says.
///
/// Differentiable in `hidden` and `weight` (a libtorch autograd Function).
/// With [`HeadChunking::Recompute`] the forward keeps only each row's
/// logsumexp, and the backward recomputes one chunk's logits at a time, so at
/// most a `[chunk, V]` block of logits (and a few like it) is alive in either
/// direction, never `[N, V]`; with [`HeadChunking::Keep`] the log-softmax is
/// kept instead.
///
/// When `weight` is an fp32 leaf (a parameter), the backward adds each
/// chunk's weight gradient straight into `weight.grad` (creating it when
/// undefined), as autograd's accumulation would add a returned gradient, and
/// returns none: no `[V, H]` gradient buffer exists besides `.grad`, and for
/// a head tied to the embedding none waits in the engine for the
/// embedding's gradient. Otherwise (bf16, a non-leaf weight) the gradient is
/// summed in fp32 and returned.
pub fn chunked_logprobs(
    hidden: &Tensor,
    weight: &Tensor,
    targets: &Tensor,
    temperature: f64,
    chunking: HeadChunking,
    with_entropy: bool,
) -> Result<ChunkedLogprobs> {
    let (chunk, keep) = match chunking {
        HeadChunking::Recompute(chunk) => (chunk, false),
        HeadChunking::Keep => (hidden.size().first().copied().unwrap_or(1).max(1), true),
    };
    let (hs, ws, ts) = (hidden.size(), weight.size(), targets.size());
    if hs.len() != 2 || ws.len() != 2 || hs[1] != ws[1] || ts != [hs[0]] {
        return Err(TorchOpsError(format!(
            "chunked_logprobs needs hidden [N, H], weight [V, H], targets [N]; got {hs:?}, {ws:?}, {ts:?}"
        )));
    }
    if targets.kind() != Kind::Int64 || hidden.kind() != weight.kind() {
        return Err(TorchOpsError(format!(
            "chunked_logprobs needs int64 targets and hidden in the weight's dtype; got {:?}, {:?}, {:?}",
            targets.kind(),
            hidden.kind(),
            weight.kind()
        )));
    }
    if temperature.is_nan() || temperature <= 0.0 || chunk < 1 {
        return Err(TorchOpsError(format!(
            "chunked_logprobs needs temperature > 0 and chunk >= 1; got {temperature}, {chunk}"
        )));
    }
    let (mut lp, mut ent) = (std::ptr::null_mut(), std::ptr::null_mut());
    call(|err| {
        // SAFETY: three live `at::Tensor*`; the shim allocates the outputs.
        unsafe {
            ffi::skyrl_chunked_logprobs(
                hidden.as_ptr().cast(),
                weight.as_ptr().cast(),
                targets.as_ptr().cast(),
                temperature,
                chunk,
                c_int::from(with_entropy),
                c_int::from(keep),
                &mut lp,
                &mut ent,
                err,
            )
        }
    })?;
    // SAFETY: on success the outputs are fresh `new at::Tensor`s we now own
    // (`ent` only when entropy was asked for).
    let logprobs = unsafe { ffi::take(lp) };
    let entropy = (!ent.is_null()).then(|| unsafe { ffi::take(ent) });
    Ok(ChunkedLogprobs { logprobs, entropy })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    const R2: HeadChunking = HeadChunking::Recompute(2);
    const R4: HeadChunking = HeadChunking::Recompute(4);

    /// The full-logits computation the chunked one replaces.
    fn full(h: &Tensor, w: &Tensor, y: &Tensor, temperature: f64) -> (Tensor, Tensor) {
        let z = h.matmul(&w.tr()).to_kind(Kind::Float) / temperature;
        let lse = z.logsumexp([-1], true);
        let lp = (z.gather(-1, &y.unsqueeze(-1), false) - &lse).squeeze_dim(-1);
        let logp = &z - &lse;
        let ent = -(logp.exp() * logp).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float);
        (lp, ent)
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
        (a - b).abs().max().double_value(&[])
    }

    /// Values and gradients (hidden and weight) of both outputs equal the
    /// full-logits path, for chunk sizes that do and do not divide N.
    #[test]
    fn equals_full_logits_values_and_gradients() {
        tch::manual_seed(0);
        let (n, h, v, temp) = (23, 16, 50, 0.7);
        let opts = (Kind::Float, Device::Cpu);
        let h0 = Tensor::randn([n, h], opts);
        let w0 = Tensor::randn([v, h], opts) * 0.5;
        let y = Tensor::randint(v, [n], (Kind::Int64, Device::Cpu));
        let (g_lp, g_ent) = (Tensor::randn([n], opts), Tensor::randn([n], opts));
        let leaves = || {
            (
                h0.copy().set_requires_grad(true),
                w0.copy().set_requires_grad(true),
            )
        };
        let (hf, wf) = leaves();
        let (lp_f, ent_f) = full(&hf, &wf, &y, temp);
        ((&lp_f * &g_lp).sum(Kind::Float) + (&ent_f * &g_ent).sum(Kind::Float)).backward();
        let chunkings = [1, 5, 23, 64]
            .map(HeadChunking::Recompute)
            .into_iter()
            .chain([HeadChunking::Keep]);
        for chunk in chunkings {
            let (hc, wc) = leaves();
            let out = chunked_logprobs(&hc, &wc, &y, temp, chunk, true).unwrap();
            let ent = out.entropy.unwrap();
            assert!(max_diff(&out.logprobs, &lp_f) < 1e-5, "{chunk:?} logprobs");
            assert!(max_diff(&ent, &ent_f) < 1e-5, "{chunk:?} entropy");
            ((&out.logprobs * &g_lp).sum(Kind::Float) + (&ent * &g_ent).sum(Kind::Float))
                .backward();
            let dh = max_diff(&hc.grad(), &hf.grad());
            let dw = max_diff(&wc.grad(), &wf.grad());
            assert!(
                dh < 1e-5 && dw < 1e-5,
                "{chunk:?}: grads differ by {dh}, {dw}"
            );
        }
    }

    /// A loss of the log-probs alone (entropy unused or not computed).
    #[test]
    fn logprobs_only_gradients() {
        tch::manual_seed(1);
        let (n, h, v) = (9, 8, 31);
        let opts = (Kind::Float, Device::Cpu);
        let h0 = Tensor::randn([n, h], opts);
        let w0 = Tensor::randn([v, h], opts);
        let y = Tensor::randint(v, [n], (Kind::Int64, Device::Cpu));
        let (hf, wf) = (
            h0.copy().set_requires_grad(true),
            w0.copy().set_requires_grad(true),
        );
        full(&hf, &wf, &y, 1.0).0.sum(Kind::Float).backward();
        let cases = [false, true].into_iter().flat_map(|entropy| {
            [
                (entropy, HeadChunking::Recompute(4)),
                (entropy, HeadChunking::Keep),
            ]
        });
        for (with_entropy, chunking) in cases {
            let (hc, wc) = (
                h0.copy().set_requires_grad(true),
                w0.copy().set_requires_grad(true),
            );
            let out = chunked_logprobs(&hc, &wc, &y, 1.0, chunking, with_entropy).unwrap();
            assert_eq!(out.entropy.is_some(), with_entropy);
            out.logprobs.sum(Kind::Float).backward();
            assert!(max_diff(&hc.grad(), &hf.grad()) < 1e-5);
            assert!(max_diff(&wc.grad(), &wf.grad()) < 1e-5);
        }
        // a head that is not a leaf gets its gradient through autograd
        // (returned, not written into a .grad), accumulated into an
        // existing .grad of the leaf behind it
        let w_leaf = w0.copy().set_requires_grad(true);
        let mut seed = w_leaf.zeros_like();
        let _ = seed.fill_(1.0);
        (&w_leaf * &seed).sum(Kind::Float).backward();
        let out = chunked_logprobs(&h0, &(&w_leaf * 1.0), &y, 1.0, R4, false).unwrap();
        out.logprobs.sum(Kind::Float).backward();
        assert!(max_diff(&(w_leaf.grad() - 1.0), &wf.grad()) < 1e-5);
        // a frozen head gets no gradient, the hidden states still do
        let (hc, wc) = (h0.copy().set_requires_grad(true), w0.copy());
        let out = chunked_logprobs(&hc, &wc, &y, 1.0, R4, false).unwrap();
        out.logprobs.sum(Kind::Float).backward();
        assert!(max_diff(&hc.grad(), &hf.grad()) < 1e-5);
        assert!(!wc.grad().defined());
    }

    #[test]
    fn refuses_bad_shapes_and_options() {
        let opts = (Kind::Float, Device::Cpu);
        let (h, w) = (Tensor::zeros([3, 4], opts), Tensor::zeros([5, 4], opts));
        let y = Tensor::zeros([3], (Kind::Int64, Device::Cpu));
        assert!(chunked_logprobs(&h, &w.tr(), &y, 1.0, R2, false).is_err());
        assert!(chunked_logprobs(&h, &w, &y.narrow(0, 0, 2), 1.0, R2, false).is_err());
        assert!(chunked_logprobs(&h, &w, &y, 0.0, R2, false).is_err());
        assert!(chunked_logprobs(&h, &w, &y, 1.0, HeadChunking::Recompute(0), false).is_err());
        assert!(chunked_logprobs(&h, &w, &y.to_kind(Kind::Float), 1.0, R2, false).is_err());
    }
}
