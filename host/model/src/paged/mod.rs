//! Paged KV cache with continuous batching and prefix sharing (vLLM's design).
//!
//! - KV lives in fixed-size blocks of one pool sized by a memory budget
//!   ([`blocks`], [`kv`]); a sequence owns a block table.
//! - Full blocks are shared: samples of one prompt fork its blocks instead of
//!   prefilling it again, and with prefix caching full blocks are kept, keyed
//!   by a hash of all tokens up to their end, for later requests (multi-turn
//!   conversations, repeated system prompts).
//! - Every step admits waiting sequences while `max_num_seqs`,
//!   `max_num_batched_tokens` and free blocks allow, prefills them, then decodes
//!   one token for every running sequence; finished ones leave at once. When
//!   the pool runs dry the newest running sequence is preempted and later
//!   recomputed ([`scheduler`]).
//! - Decode steps attend over a contiguous per-row copy of the running
//!   sequences' KV ([`rows`]), rebuilt from the pool only when the batch
//!   changes: without a paged-attention kernel, gathering every row's blocks
//!   on every step would cost as much as attention itself. The copy costs up
//!   to the running sequences' KV again in memory, outside the pool budget.
//! - On CPU, a decode step too small for intra-op threads, or large enough for
//!   every part to keep 64 rows, is split: its rows run in parts, side by side
//!   on rayon workers, one intra-op thread each, each part with its own row
//!   copy ([`parts`]).

mod blocks;
mod forward;
mod kv;
mod parts;
mod rows;
mod sampler;
mod scheduler;
mod sequence;

use std::sync::Arc;

use crate::engine::{InferenceEngine, MixedRequest, SampleStream};
use crate::error::{ModelError, Result};
use crate::model::CausalLm;
use crate::sampling::{Completion, SamplingParams};

pub use parts::set_split_decode;
pub use scheduler::Core;

/// Engine sizing (vLLM's names).
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSettings {
    /// Most sequences running together.
    pub max_num_seqs: usize,
    /// Most prompt tokens prefilled in one step (a longer prompt is admitted
    /// alone).
    pub max_num_batched_tokens: usize,
    /// Tokens per KV block.
    pub block_size: usize,
    /// Bytes of KV pool (keys and values of every layer). `None`: enough for
    /// `max_num_seqs` sequences of the full context, capped at
    /// [`DEFAULT_CPU_KV_BYTES`] (CPU pages are touched only when written).
    pub kv_cache_bytes: Option<u64>,
    /// Keep full blocks of finished sequences for later requests with the same
    /// prefix. Samples of one prompt share its blocks either way.
    pub enable_prefix_caching: bool,
}

/// Default cap of the KV pool when no budget is given: 4 GiB.
pub const DEFAULT_CPU_KV_BYTES: u64 = 4 << 30;

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            max_num_seqs: crate::engine::DEFAULT_MAX_BATCH,
            max_num_batched_tokens: 8192,
            block_size: 16,
            kv_cache_bytes: None,
            enable_prefix_caching: true,
        }
    }
}

impl EngineSettings {
    /// Bytes one token's keys and values take in `model` (all layers).
    pub fn kv_bytes_per_token(model: &CausalLm) -> u64 {
        let c = model.config();
        let elem = model.kind().elt_size_in_bytes() as u64;
        2 * c.num_hidden_layers as u64 * c.kv_heads() as u64 * c.head_dim() as u64 * elem
    }

    /// Blocks in the pool for `model`, block 0 (the padding block) included.
    pub fn num_blocks(&self, model: &CausalLm) -> usize {
        let per_block = Self::kv_bytes_per_token(model) * self.block_size as u64;
        let context = model.config().max_position_embeddings as u64;
        let budget = self.kv_cache_bytes.unwrap_or_else(|| {
            let full = self.max_num_seqs as u64 * (context + self.block_size as u64) * per_block
                / self.block_size as u64;
            full.min(DEFAULT_CPU_KV_BYTES)
        });
        (budget / per_block.max(1)) as usize
    }

    /// Blocks one sequence of the full context needs.
    pub fn blocks_per_full_sequence(&self, model: &CausalLm) -> usize {
        (model.config().max_position_embeddings as usize).div_ceil(self.block_size)
    }

    /// Rejects settings that cannot serve one full-context sequence.
    pub fn validate(&self, model: &CausalLm) -> Result<()> {
        let bad = |m: String| Err(ModelError::Input(m));
        if self.max_num_seqs == 0 {
            return bad("max_num_seqs must be at least 1".into());
        }
        if self.block_size == 0 || self.block_size > 1024 {
            return bad(format!(
                "block_size must be in 1..=1024, got {}",
                self.block_size
            ));
        }
        if self.max_num_batched_tokens == 0 {
            return bad("max_num_batched_tokens must be at least 1".into());
        }
        let need = self.blocks_per_full_sequence(model) + 1;
        let have = self.num_blocks(model);
        if have < need {
            let per_block = Self::kv_bytes_per_token(model) * self.block_size as u64;
            return bad(format!(
                "the KV cache budget ({} bytes, {have} blocks of {} tokens) cannot hold one \
                 sequence of the model's {}-token context ({need} blocks, {} bytes); raise \
                 the budget (kv_cache_bytes / gpu_memory_utilization)",
                self.kv_cache_bytes
                    .map_or("default".into(), |b| b.to_string()),
                self.block_size,
                model.config().max_position_embeddings,
                need as u64 * per_block
            ));
        }
        Ok(())
    }
}

/// Identifies a submitted sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(pub u64);

/// One sequence to generate.
#[derive(Debug, Clone)]
pub struct SeqRequest {
    pub prompt: Vec<i64>,
    /// Its random stream (the completion depends only on this and the prompt).
    pub stream: SampleStream,
    /// Shared by the samples of one request.
    pub params: Arc<SamplingParams>,
}

/// What one step did to one sequence.
#[derive(Debug, Clone)]
pub struct SeqUpdate {
    pub id: SeqId,
    /// Tokens generated in this step (one, or none when it was only prefilled).
    pub new_token_ids: Vec<i64>,
    /// Their log-probs (see [`crate::LogprobMode`]).
    pub new_logprobs: Vec<f32>,
    /// Their top alternatives, when `params.top_logprobs > 0`.
    pub new_top_logprobs: Vec<Vec<(i64, f32)>>,
    /// The whole completion, when the sequence finished in this step.
    pub finished: Option<Completion>,
}

/// Engine counters since it was built.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct EngineStats {
    /// Prompt tokens run through the model at prefill (recomputes included).
    pub prefill_tokens_computed: u64,
    /// Prompt tokens whose KV was shared with a sibling sample or found in
    /// the prefix cache.
    pub prefill_tokens_reused: u64,
    /// Tokens generated.
    pub decode_tokens: u64,
    /// Steps run.
    pub steps: u64,
    /// Decode steps whose rows were split across threads (see `paged/parts.rs`).
    pub parallel_decode_steps: u64,
    /// Sequences preempted (their KV freed, recomputed later).
    pub preemptions: u64,
    /// Blocks in the pool (the padding block excluded).
    pub kv_blocks_total: usize,
    /// Blocks neither used nor holding a cached prefix.
    pub kv_blocks_free: usize,
    /// Blocks holding a cached prefix (in use or not).
    pub kv_blocks_cached: usize,
    /// Most blocks in use by sequences at once (cached free blocks excluded).
    pub kv_blocks_peak_used: usize,
    pub running: usize,
    pub waiting: usize,
}

/// Submits every prompt of `requests`, steps until all finished, and returns
/// each request's completions in order (a request with bad input fails alone;
/// a failed step fails every request still in flight).
pub(crate) fn run_to_completion(
    engine: &InferenceEngine,
    requests: &[MixedRequest<'_>],
) -> Vec<Result<Vec<Completion>>> {
    struct Slot {
        ids: Vec<SeqId>,
        error: Option<ModelError>,
    }
    let mut slots: Vec<Slot> = Vec::with_capacity(requests.len());
    let mut done: std::collections::HashMap<SeqId, Completion> = Default::default();
    for &(prompts, streams, params) in requests {
        let mut slot = Slot {
            ids: Vec::new(),
            error: None,
        };
        match engine.submit_all(prompts.to_vec(), streams, params.clone()) {
            Ok(ids) => slot.ids = ids,
            Err(e) => slot.error = Some(e),
        }
        slots.push(slot);
    }
    let wanted: usize = slots.iter().map(|s| s.ids.len()).sum();
    while done.len() < wanted {
        match engine.step() {
            Ok(updates) => {
                for u in updates {
                    if let Some(c) = u.finished {
                        done.insert(u.id, c);
                    }
                }
            }
            Err(e) => {
                let message = e.to_string();
                for slot in &slots {
                    for id in &slot.ids {
                        engine.abort(*id);
                    }
                }
                return slots
                    .into_iter()
                    .map(|s| match s.error {
                        Some(e) => Err(e),
                        None => Err(ModelError::Input(message.clone())),
                    })
                    .collect();
            }
        }
    }
    slots
        .into_iter()
        .map(|s| match s.error {
            Some(e) => Err(e),
            None => Ok(s
                .ids
                .iter()
                .map(|id| done.remove(id).expect("every submitted sequence finished"))
                .collect()),
        })
        .collect()
}
