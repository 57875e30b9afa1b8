//! One sequence in flight: its tokens, block table, sampling state and
//! stop conditions.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;

use super::SeqId;
use crate::error::Result;
use crate::sampling::{Completion, PromptTokenLogprob, SamplingParams, StopMatch, StopReason};
use crate::tokenizer::Tokenizer;

/// A submitted sequence.
#[derive(Debug)]
pub struct Sequence {
    pub id: SeqId,
    pub prompt: Vec<i64>,
    pub params: Arc<SamplingParams>,
    pub rng: ChaCha8Rng,
    /// Tokens that end it (EOS ids unless `ignore_eos`, plus `stop_token_ids`).
    pub stop_ids: Arc<HashSet<i64>>,
    pub output: Vec<i64>,
    pub logprobs: Vec<f32>,
    pub top_logprobs: Vec<Vec<(i64, f32)>>,
    pub prompt_logprobs: Option<Vec<PromptTokenLogprob>>,
    /// Occurrences of each generated token (presence / frequency penalties).
    pub output_counts: HashMap<i64, u32>,
    /// Block table: block `i` holds positions `i*bs .. (i+1)*bs`.
    pub blocks: Vec<usize>,
    /// Chain hashes of the full blocks registered with the prefix cache.
    pub block_hashes: Vec<u64>,
    /// Tokens whose keys and values are in `blocks`.
    pub computed: usize,
    /// Prompt tokens reused from the cache or a sibling at the last admission.
    pub cached_prompt_tokens: usize,
    pub done: Option<(StopReason, Option<StopMatch>)>,
}

impl Sequence {
    /// Prompt followed by the generated tokens.
    pub fn tokens(&self) -> Vec<i64> {
        let mut t = self.prompt.clone();
        t.extend_from_slice(&self.output);
        t
    }

    /// Prompt plus generated tokens.
    pub fn len(&self) -> usize {
        self.prompt.len() + self.output.len()
    }

    /// Token at position `i` of [`Sequence::tokens`].
    pub fn token_at(&self, i: usize) -> i64 {
        if i < self.prompt.len() {
            self.prompt[i]
        } else {
            self.output[i - self.prompt.len()]
        }
    }

    /// Whether stop tokens must not be sampled yet (`min_tokens`).
    pub fn holds_stop_tokens(&self) -> bool {
        self.output.len() < self.params.min_tokens && !self.stop_ids.is_empty()
    }

    /// Whether the next forward must compute logits of every new position.
    pub fn wants_prompt_logprobs(&self) -> bool {
        self.params.prompt_logprobs.is_some() && self.prompt_logprobs.is_none()
    }

    /// Records a sampled token and decides whether the sequence is done.
    pub fn push(
        &mut self,
        token: i64,
        logprob: f32,
        top: Option<Vec<(i64, f32)>>,
        tokenizer: Option<&Tokenizer>,
        context: usize,
    ) -> Result<()> {
        self.output.push(token);
        self.logprobs.push(logprob);
        if let Some(top) = top {
            self.top_logprobs.push(top);
        }
        *self.output_counts.entry(token).or_default() += 1;
        self.done = self.check_stop(tokenizer, context)?;
        Ok(())
    }

    fn check_stop(
        &self,
        tokenizer: Option<&Tokenizer>,
        context: usize,
    ) -> Result<Option<(StopReason, Option<StopMatch>)>> {
        let last = *self.output.last().expect("a token was just pushed");
        let early = self.output.len() < self.params.min_tokens;
        if self.stop_ids.contains(&last) && !early {
            return Ok(Some((StopReason::Stop, Some(StopMatch::Token(last)))));
        }
        if !self.params.stop.is_empty() && !early {
            let tokenizer = tokenizer.expect("checked at submit");
            // A stop string ends in the newest token's text, so only the tail
            // is decoded (not the whole output every step): a character takes
            // at most 4 byte-level tokens, and the margin keeps the window's
            // first token (whose leading space a decoder may drop) away from it.
            let longest = self.params.stop.iter().map(|s| s.chars().count()).max();
            let window = 4 * longest.unwrap_or(0) + 8;
            let tail = &self.output[self.output.len().saturating_sub(window)..];
            let text = tokenizer.decode(tail, true)?;
            if let Some(s) = self.params.stop.iter().find(|s| text.contains(s.as_str())) {
                return Ok(Some((StopReason::Stop, Some(StopMatch::String(s.clone())))));
            }
        }
        if self.output.len() >= self.params.max_tokens || self.len() >= context {
            return Ok(Some((StopReason::Length, None)));
        }
        Ok(None)
    }

    /// The finished completion.
    pub fn into_completion(self) -> Completion {
        let (stop_reason, stop_match) = self.done.unwrap_or((StopReason::Length, None));
        Completion {
            token_ids: self.output,
            logprobs: self.logprobs,
            stop_reason,
            stop_match,
            top_logprobs: self.top_logprobs,
            prompt_logprobs: self.prompt_logprobs,
            cached_prompt_tokens: self.cached_prompt_tokens,
        }
    }
}
