//! Response-token logprobs of a model over a [`TrainingBatch`], shared by
//! every role that runs the policy's architecture (policy, reference).

use anyhow::Result;
use skyrl_model::{CausalLm, LayerCheckpoints, LogprobOptions};
use tch::Tensor;

use crate::batch::TrainingBatch;

/// Logprobs `[len, R]` of the response tokens of rows `start..start+len`
/// (and their entropy when asked), at `temperature`, through the chunked LM
/// head (no `[rows, T, vocab]` logits, in the forward or the backward).
pub fn response_logprobs(
    model: &CausalLm,
    batch: &TrainingBatch,
    start: i64,
    len: i64,
    temperature: f64,
    with_entropy: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    let ids = batch.input_ids.narrow(0, start, len);
    let attn = batch.attention_mask.narrow(0, start, len);
    let options = LogprobOptions {
        temperature,
        with_entropy,
    };
    let out = model.forward_logprobs_chunked(&ids, &attn, &options, None)?;
    let r = batch.response_len();
    let lp = out.logprobs.narrow(1, batch.prompt_len - 1, r);
    let ent = out.entropy.map(|e| e.narrow(1, batch.prompt_len - 1, r));
    Ok((lp, ent))
}

/// Response logprobs of a training forward, with the recomputation state
/// when the forward was checkpointed per layer.
pub struct TrainingForward<'m> {
    pub logprobs: Tensor,
    pub entropy: Option<Tensor>,
    /// Finish the backward through the layers with this after `loss.backward()`.
    pub checkpoints: Option<LayerCheckpoints<'m>>,
}

/// [`response_logprobs`] for training, with entropy and LoRA dropout on;
/// `checkpointing` recomputes each decoder layer in the backward
/// (`trainer.gradient_checkpointing`) and so runs without dropout (the
/// config refuses both together), or the recomputation would differ.
pub fn training_forward<'m>(
    model: &'m CausalLm,
    batch: &TrainingBatch,
    start: i64,
    len: i64,
    temperature: f64,
    checkpointing: bool,
) -> Result<TrainingForward<'m>> {
    if !checkpointing {
        let (logprobs, entropy) = model
            .with_training(|| response_logprobs(model, batch, start, len, temperature, true))?;
        return Ok(TrainingForward {
            logprobs,
            entropy,
            checkpoints: None,
        });
    }
    let ids = batch.input_ids.narrow(0, start, len);
    let attn = batch.attention_mask.narrow(0, start, len);
    let options = LogprobOptions {
        temperature,
        with_entropy: true,
    };
    let (out, checkpoints) = model.forward_logprobs_checkpointed(&ids, &attn, &options)?;
    let r = batch.response_len();
    Ok(TrainingForward {
        logprobs: out.logprobs.narrow(1, batch.prompt_len - 1, r),
        entropy: out.entropy.map(|e| e.narrow(1, batch.prompt_len - 1, r)),
        checkpoints: Some(checkpoints),
    })
}

/// No-grad logprobs `[N, R]` of every row, `micro` rows per forward.
pub fn logprobs_all(
    model: &CausalLm,
    batch: &TrainingBatch,
    micro: i64,
    temperature: f64,
) -> Result<Tensor> {
    let _g = tch::no_grad_guard();
    let n = batch.rows();
    let micro = micro.max(1);
    let mut parts = Vec::new();
    let mut s = 0;
    while s < n {
        let len = micro.min(n - s);
        parts.push(response_logprobs(model, batch, s, len, temperature, false)?.0);
        s += len;
    }
    Ok(Tensor::cat(&parts, 0))
}
