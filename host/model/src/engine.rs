//! The built-in inference engine: paged KV cache, continuous batching and
//! prefix sharing (see [`crate::paged`]).
//!
//! Two ways to drive it:
//! - [`InferenceEngine::generate`] and friends: submit prompts, step until they
//!   finish, return their completions in order;
//! - [`InferenceEngine::submit`] + [`InferenceEngine::step`]: a server loop that
//!   admits new requests between steps and streams each step's new tokens.

use std::sync::{Arc, Mutex, MutexGuard};

use rand::Rng;

use crate::error::{ModelError, Result};
use crate::model::CausalLm;
use crate::paged::{Core, EngineStats};
use crate::sampling::{Completion, SamplingParams};
use crate::tokenizer::Tokenizer;

pub use crate::paged::{EngineSettings, SeqId, SeqRequest, SeqUpdate};

/// Default cap on sequences decoded together.
pub const DEFAULT_MAX_BATCH: usize = 64;

/// A model plus (optionally) its tokenizer, serving token-in / token-out requests.
#[derive(Debug)]
pub struct InferenceEngine {
    model: CausalLm,
    tokenizer: Option<Tokenizer>,
    /// Scheduler, block pool and sequences in flight (built on first use).
    core: Mutex<Core>,
}

impl InferenceEngine {
    /// Wraps `model` with [`EngineSettings::default`]; the tokenizer is needed
    /// only for stop strings.
    pub fn new(model: CausalLm, tokenizer: Option<Tokenizer>) -> Self {
        let core = Core::new(EngineSettings::default());
        InferenceEngine {
            model,
            tokenizer,
            core: Mutex::new(core),
        }
    }

    /// Replaces the settings; fails when the KV budget cannot hold one
    /// sequence of the model's full context, or a setting is out of range.
    pub fn with_settings(self, settings: EngineSettings) -> Result<Self> {
        settings.validate(&self.model)?;
        *self.core.lock().expect("engine lock") = Core::new(settings);
        Ok(self)
    }

    /// Sets `max_num_seqs`, the most sequences decoded together (at least 1).
    pub fn with_max_batch(self, max_batch: usize) -> Self {
        {
            let mut core = self.core.lock().expect("engine lock");
            let mut settings = core.settings().clone();
            settings.max_num_seqs = max_batch.max(1);
            *core = Core::new(settings);
        }
        self
    }

    /// The settings in use.
    pub fn settings(&self) -> EngineSettings {
        self.core().settings().clone()
    }

    /// Most sequences decoded together (`max_num_seqs`).
    pub fn max_batch(&self) -> usize {
        self.core().settings().max_num_seqs
    }

    /// The served model.
    pub fn model(&self) -> &CausalLm {
        &self.model
    }

    /// Mutable model, e.g. to sync weights from the trainer with
    /// [`CausalLm::copy_weights_from`]. The prefix cache is dropped (its KV
    /// was computed by the old weights); sequences in flight keep their KV.
    pub fn model_mut(&mut self) -> &mut CausalLm {
        self.core
            .get_mut()
            .expect("engine lock")
            .reset_prefix_cache();
        &mut self.model
    }

    /// The tokenizer, when given.
    pub fn tokenizer(&self) -> Option<&Tokenizer> {
        self.tokenizer.as_ref()
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        self.core.lock().expect("engine lock")
    }

    /// Queues one sequence; it joins the running batch at the next
    /// [`InferenceEngine::step`] that has room. Bad input (empty prompt, ids
    /// outside the vocabulary, a prompt as long as the context, stop strings
    /// without a tokenizer, a sequence larger than the whole KV pool) fails here.
    pub fn submit(&self, request: SeqRequest) -> Result<SeqId> {
        self.core()
            .submit(&self.model, self.tokenizer.as_ref(), request)
    }

    /// Queues one sequence per prompt, prompt `i` sampling from `streams[i]`,
    /// all with `params`. All or nothing: on the first refused prompt the
    /// ones already queued are aborted and the error returned.
    pub fn submit_all(
        &self,
        prompts: Vec<Vec<i64>>,
        streams: &[SampleStream],
        params: SamplingParams,
    ) -> Result<Vec<SeqId>> {
        if prompts.len() != streams.len() {
            return Err(ModelError::Input(format!(
                "{} prompts but {} sampling streams",
                prompts.len(),
                streams.len()
            )));
        }
        let params = Arc::new(params);
        let mut ids = Vec::with_capacity(prompts.len());
        for (prompt, stream) in prompts.into_iter().zip(streams) {
            let request = SeqRequest {
                prompt,
                stream: *stream,
                params: params.clone(),
            };
            match self.submit(request) {
                Ok(id) => ids.push(id),
                Err(e) => {
                    for id in ids {
                        self.abort(id);
                    }
                    return Err(e);
                }
            }
        }
        Ok(ids)
    }

    /// Runs one engine step: admits waiting sequences (prefilling their
    /// uncached prompt tokens), decodes one token for every running sequence,
    /// and returns what each touched sequence produced. A failed step fails
    /// (and drops) every sequence in flight.
    pub fn step(&self) -> Result<Vec<SeqUpdate>> {
        let _guard = tch::no_grad_guard();
        self.core().step(&self.model, self.tokenizer.as_ref())
    }

    /// Whether sequences are waiting or running.
    pub fn has_unfinished(&self) -> bool {
        self.core().has_unfinished()
    }

    /// Drops a sequence (e.g. its client went away); unknown ids are ignored.
    pub fn abort(&self, id: SeqId) {
        self.core().abort(id);
    }

    /// Forgets every cached prefix (vLLM's `reset_prefix_cache`).
    pub fn reset_prefix_cache(&self) {
        self.core().reset_prefix_cache();
    }

    /// Frees the KV pool (vLLM's `sleep`); fails while sequences are in
    /// flight. The pool is allocated again on the next step.
    pub fn sleep(&self) -> Result<()> {
        self.core().release_pool()
    }

    /// Counters: prefill tokens computed and reused, preemptions, pool use.
    pub fn stats(&self) -> EngineStats {
        self.core().stats()
    }

    /// Generates one completion per prompt (same order). With `params.seed`,
    /// prompt `i` samples from stream `(seed, i)`; see [`SampleStream`].
    pub fn generate(
        &self,
        prompts: &[Vec<i64>],
        params: &SamplingParams,
    ) -> Result<Vec<Completion>> {
        let streams = SampleStream::sequence(params.seed, prompts.len());
        self.generate_with_streams(prompts, &streams, params)
    }

    /// Like [`InferenceEngine::generate`], with an explicit sampling stream per
    /// prompt (`params.seed` is ignored).
    pub fn generate_with_streams(
        &self,
        prompts: &[Vec<i64>],
        streams: &[SampleStream],
        params: &SamplingParams,
    ) -> Result<Vec<Completion>> {
        self.generate_coalesced(&[(prompts, streams)], params)
            .pop()
            .expect("one request in, one result out")
    }

    /// Decodes several requests together and returns each request's
    /// completions, in order. A request with bad input fails by itself.
    pub fn generate_coalesced(
        &self,
        requests: &[BatchRequest<'_>],
        params: &SamplingParams,
    ) -> Vec<Result<Vec<Completion>>> {
        let mixed: Vec<MixedRequest<'_>> = requests
            .iter()
            .map(|&(prompts, streams)| (prompts, streams, params))
            .collect();
        self.generate_mixed(&mixed)
    }

    /// Decodes requests with their own sampling settings in one running batch.
    pub fn generate_mixed(&self, requests: &[MixedRequest<'_>]) -> Vec<Result<Vec<Completion>>> {
        crate::paged::run_to_completion(self, requests)
    }
}

/// One request of a coalesced batch: its prompts and their sampling streams.
pub type BatchRequest<'a> = (&'a [Vec<i64>], &'a [SampleStream]);

/// A request with its own settings: prompts, their streams, sampling params.
pub type MixedRequest<'a> = (&'a [Vec<i64>], &'a [SampleStream], &'a SamplingParams);

/// The random stream one prompt samples from: ChaCha8 seeded by `seed`, stream `index`.
///
/// A prompt's completion depends only on its stream, not on which other prompts
/// share its decode batch, so servers can coalesce requests freely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleStream {
    pub seed: u64,
    pub index: u64,
}

impl SampleStream {
    /// Streams `(seed, 0..n)`: what [`InferenceEngine::generate`] uses for one
    /// call with `seed` (a fresh random seed when `None`).
    pub fn sequence(seed: Option<u64>, n: usize) -> Vec<SampleStream> {
        let seed = seed.unwrap_or_else(|| rand::rng().random());
        (0..n as u64)
            .map(|index| SampleStream { seed, index })
            .collect()
    }

    /// The ChaCha8 generator of this stream.
    pub fn rng(&self) -> rand_chacha::ChaCha8Rng {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(self.index);
        rng
    }
}
