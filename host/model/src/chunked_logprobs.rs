//! Training log-probs without materialised logits.
//!
//! [`CausalLm::forward_logprobs_chunked`] runs the model to its final hidden
//! states, then scores the next tokens a chunk of positions at a time:
//! `hidden_chunk @ lm_head^T` in fp32, divided by the temperature, logsumexp,
//! the target's logit and optionally the entropy. The head is one libtorch
//! autograd Function (`skyrl_torch_ops::chunked_logprobs`) whose forward
//! keeps only the per-token logsumexp and whose backward recomputes each
//! chunk's logits, so neither direction ever holds `[tokens, vocab]` logits
//! (the full-logits path keeps several such tensors for its backward).
//! Values and gradients equal [`CausalLm::forward_logprobs_with`]'s.

use tch::Tensor;

use crate::error::{ModelError, Result};
use crate::model::{check_logprob_input, CausalLm, LogprobOptions, TokenLogprobs};

/// Elements of one chunk's logits in the default chunking (16M: 64 MiB in
/// fp32, 110 tokens at Qwen2's vocabulary of 151,936; a chunk keeps two or
/// three such blocks alive).
pub const LOGPROB_CHUNK_ELEMENTS: i64 = 1 << 24;

/// Default tokens per chunk for a vocabulary of `vocab`: as many as fit in
/// [`LOGPROB_CHUNK_ELEMENTS`], at least 1.
pub fn default_logprob_chunk(vocab: i64) -> i64 {
    (LOGPROB_CHUNK_ELEMENTS / vocab.max(1)).max(1)
}

impl CausalLm {
    /// [`CausalLm::forward_logprobs_with`] computed `chunk_tokens` positions
    /// at a time without full logits (see the module docs); `None` takes
    /// [`default_logprob_chunk`] of the vocabulary.
    pub fn forward_logprobs_chunked(
        &self,
        input_ids: &Tensor,
        attention_mask: &Tensor,
        options: &LogprobOptions,
        chunk_tokens: Option<i64>,
    ) -> Result<TokenLogprobs> {
        check_logprob_input(input_ids, options)?;
        let hidden = self.hidden_states(input_ids, attention_mask)?;
        self.logprobs_of_hidden(&hidden, input_ids, options, chunk_tokens)
    }

    /// Next-token logprobs (and entropy) `[B, T-1]` of final hidden states
    /// `[B, T, H]` for `input_ids [B, T]`, through the chunked LM head.
    pub(crate) fn logprobs_of_hidden(
        &self,
        hidden: &Tensor,
        input_ids: &Tensor,
        options: &LogprobOptions,
        chunk_tokens: Option<i64>,
    ) -> Result<TokenLogprobs> {
        let (b, t, h) = match hidden.size()[..] {
            [b, t, h] => (b, t, h),
            ref s => {
                return Err(ModelError::Input(format!(
                    "hidden states must be [B, T, H], got {s:?}"
                )))
            }
        };
        let chunk = chunk_tokens.unwrap_or_else(|| default_logprob_chunk(self.config().vocab_size));
        let rows = hidden.narrow(1, 0, t - 1).reshape([b * (t - 1), h]);
        let targets = input_ids
            .to_device(self.device())
            .narrow(1, 1, t - 1)
            .reshape([b * (t - 1)]);
        let out = skyrl_torch_ops::chunked_logprobs(
            &rows,
            self.lm_head(),
            &targets,
            options.temperature,
            chunk,
            options.with_entropy,
        )
        .map_err(|e| ModelError::Torch(tch::TchError::Torch(e.0)))?;
        Ok(TokenLogprobs {
            logprobs: out.logprobs.view([b, t - 1]),
            entropy: out.entropy.map(|e| e.view([b, t - 1])),
        })
    }
}
