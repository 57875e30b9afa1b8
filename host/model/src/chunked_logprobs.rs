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
//! Where `tokens x vocab` is at most [`LOGPROB_KEEP_ELEMENTS`] (256 MiB of
//! fp32: short batches, small vocabularies), the default instead keeps the
//! one `[tokens, vocab]` log-softmax for the backward and saves the
//! recomputing matmul, which costs a third of the LM head's training time
//! (~9% of a 100M model's step at vocab 32000).
//! Values and gradients equal [`CausalLm::forward_logprobs_with`]'s.

use skyrl_torch_ops::HeadChunking;
use tch::Tensor;

use crate::error::{ModelError, Result};
use crate::model::{check_logprob_input, CausalLm, LogprobOptions, TokenLogprobs};

/// Elements of one chunk's logits in the default chunking (16M: 64 MiB in
/// fp32, 110 tokens at Qwen2's vocabulary of 151,936; a chunk keeps two or
/// three such blocks alive).
pub const LOGPROB_CHUNK_ELEMENTS: i64 = 1 << 24;

/// Largest `tokens x vocab` whose log-softmax the default keeps from the
/// forward to the backward instead of recomputing it (64M: 256 MiB of fp32,
/// e.g. 2,048 tokens at vocab 32,000; 441 tokens at Qwen2's 151,936).
pub const LOGPROB_KEEP_ELEMENTS: i64 = 1 << 26;

/// Default tokens per chunk for a vocabulary of `vocab`: as many as fit in
/// [`LOGPROB_CHUNK_ELEMENTS`], at least 1.
pub fn default_logprob_chunk(vocab: i64) -> i64 {
    (LOGPROB_CHUNK_ELEMENTS / vocab.max(1)).max(1)
}

impl CausalLm {
    /// Sets the default chunking's chunk to `positions` sequence positions of
    /// every row (skyrl's `trainer.logprobs_chunk_size`), or back to the
    /// memory-sized default with `None`.
    pub fn set_logprob_chunk_positions(&mut self, positions: Option<i64>) {
        self.logprob_chunk_positions = positions.map(|p| p.max(1));
    }

    /// [`CausalLm::forward_logprobs_with`] computed `chunk_tokens` positions
    /// at a time without full logits (see the module docs); `None` keeps the
    /// log-softmax when it has at most [`LOGPROB_KEEP_ELEMENTS`] elements and
    /// fits one chunk, and otherwise takes chunks of the positions set by
    /// [`CausalLm::set_logprob_chunk_positions`] of every row, or
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

    /// Log-probs `[B, T]` of `targets [B, T]` (fp32, with grad), position `t`
    /// scoring `targets[:, t]` after `input_ids[:, ..=t]`, through the chunked
    /// LM head: for callers whose data carry their own targets (Tinker's
    /// datums) rather than the next input token.
    pub fn target_logprobs(
        &self,
        input_ids: &Tensor,
        attention_mask: &Tensor,
        targets: &Tensor,
    ) -> Result<Tensor> {
        if targets.size() != input_ids.size() {
            return Err(ModelError::Input(format!(
                "targets {:?} must have the shape of input_ids {:?}",
                targets.size(),
                input_ids.size()
            )));
        }
        let hidden = self.hidden_states(input_ids, attention_mask)?;
        let out = self.logprobs_at(&hidden, targets, &LogprobOptions::default(), None)?;
        Ok(out.logprobs)
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
        let t = batch_time_hidden(hidden)?.1;
        let next = input_ids.narrow(1, 1, t - 1);
        self.logprobs_at(&hidden.narrow(1, 0, t - 1), &next, options, chunk_tokens)
    }

    /// Log-probs (and entropy) `[B, P]` of `targets [B, P]` scored from final
    /// hidden states `[B, P, H]`, position by position, through the chunked
    /// LM head.
    fn logprobs_at(
        &self,
        hidden: &Tensor,
        targets: &Tensor,
        options: &LogprobOptions,
        chunk_tokens: Option<i64>,
    ) -> Result<TokenLogprobs> {
        let (b, p, h) = batch_time_hidden(hidden)?;
        let vocab = self.config().vocab_size;
        let chunking = head_chunking([b, p, vocab], chunk_tokens, self.logprob_chunk_positions);
        let out = skyrl_torch_ops::chunked_logprobs(
            &hidden.reshape([b * p, h]),
            self.lm_head(),
            &targets.to_device(self.device()).reshape([b * p]),
            options.temperature,
            chunking,
            options.with_entropy,
        )
        .map_err(|e| ModelError::Torch(tch::TchError::Torch(e.0)))?;
        Ok(TokenLogprobs {
            logprobs: out.logprobs.view([b, p]),
            entropy: out.entropy.map(|e| e.view([b, p])),
        })
    }
}

/// `(B, T, H)` of final hidden states `[B, T, H]`.
fn batch_time_hidden(hidden: &Tensor) -> Result<(i64, i64, i64)> {
    match hidden.size()[..] {
        [b, t, h] => Ok((b, t, h)),
        ref s => Err(ModelError::Input(format!(
            "hidden states must be [B, T, H], got {s:?}"
        ))),
    }
}

/// The LM head's chunking for `[rows, positions, vocab]` logits: an explicit
/// `chunk_tokens` recomputes in chunks of that many tokens; else chunks of
/// `chunk_positions` positions of every row, or of [`default_logprob_chunk`];
/// one small chunk keeps its log-softmax ([`LOGPROB_KEEP_ELEMENTS`]).
fn head_chunking(
    [rows, positions, vocab]: [i64; 3],
    chunk_tokens: Option<i64>,
    chunk_positions: Option<i64>,
) -> HeadChunking {
    let small = rows * positions * vocab <= LOGPROB_KEEP_ELEMENTS;
    match (chunk_tokens, chunk_positions) {
        (Some(chunk), _) => HeadChunking::Recompute(chunk),
        (None, Some(p)) if small && positions <= p => HeadChunking::Keep,
        (None, Some(p)) => HeadChunking::Recompute(rows * p),
        (None, None) if small => HeadChunking::Keep,
        (None, None) => HeadChunking::Recompute(default_logprob_chunk(vocab)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_positions_cut_every_row_and_one_small_chunk_keeps_its_softmax() {
        let qwen = 151_936;
        // skyrl's 1024 positions of 2 rows of 4096: chunks of 2 x 1024 tokens.
        assert_eq!(
            head_chunking([2, 4096, qwen], None, Some(1024)),
            HeadChunking::Recompute(2048)
        );
        // A short sequence fits one chunk: kept as the default does.
        assert_eq!(
            head_chunking([2, 100, 1000], None, Some(1024)),
            HeadChunking::Keep
        );
        // ... unless that chunk is large.
        assert_eq!(
            head_chunking([4, 1000, qwen], None, Some(1024)),
            HeadChunking::Recompute(4096)
        );
        // The memory-sized default, and an explicit token chunk.
        assert_eq!(
            head_chunking([2, 100, 1000], None, None),
            HeadChunking::Keep
        );
        assert_eq!(
            head_chunking([2, 4096, qwen], None, None),
            HeadChunking::Recompute(default_logprob_chunk(qwen))
        );
        assert_eq!(
            head_chunking([2, 100, 1000], Some(7), Some(1024)),
            HeadChunking::Recompute(7)
        );
    }
}
