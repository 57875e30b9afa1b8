//! The in-process engine, shared by concurrent rollout tasks: requests that
//! are pending together (e.g. the prompt groups of fully-async training) are
//! decoded as one batch. Every prompt samples from its own stream, so a
//! request's output does not depend on its company.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use skyrl_model::{BatchRequest, Completion, InferenceEngine, SampleStream, SamplingParams};
use tokio::sync::oneshot;

/// One request waiting for the engine.
struct Pending {
    prompts: Vec<Vec<i64>>,
    streams: Vec<SampleStream>,
    params: SamplingParams,
    reply: oneshot::Sender<std::result::Result<(Vec<Completion>, u64), String>>,
}

/// The engine plus the requests waiting for it.
pub struct LocalEngine {
    /// Held while decoding and while weights are synced (a sync lands between batches).
    engine: tokio::sync::Mutex<InferenceEngine>,
    pending: Mutex<Vec<Pending>>,
    batches: AtomicU64,
}

impl LocalEngine {
    /// Wraps `engine`.
    pub fn new(engine: InferenceEngine) -> Self {
        Self {
            engine: tokio::sync::Mutex::new(engine),
            pending: Mutex::new(Vec::new()),
            batches: AtomicU64::new(0),
        }
    }

    /// Decode batches run so far (requests served together count once).
    pub fn decode_batches(&self) -> u64 {
        self.batches.load(Ordering::SeqCst)
    }

    /// Exclusive access from a thread outside the runtime (weight sync).
    pub fn blocking_lock(&self) -> tokio::sync::MutexGuard<'_, InferenceEngine> {
        self.engine.blocking_lock()
    }

    /// Queues the request, lets other ready tasks queue theirs, then whoever
    /// holds the engine decodes everything queued with matching settings.
    /// Returns the completions and `version` as read while holding the engine.
    pub async fn generate(
        &self,
        prompts: &[Vec<i64>],
        streams: &[SampleStream],
        params: &SamplingParams,
        version: &AtomicU64,
    ) -> Result<(Vec<Completion>, u64)> {
        let (reply, rx) = oneshot::channel();
        self.pending.lock().expect("pending lock").push(Pending {
            prompts: prompts.to_vec(),
            streams: streams.to_vec(),
            params: params.clone(),
            reply,
        });
        tokio::task::yield_now().await;
        {
            let engine = self.engine.lock().await;
            let queued = std::mem::take(&mut *self.pending.lock().expect("pending lock"));
            if !queued.is_empty() {
                self.batches.fetch_add(1, Ordering::SeqCst);
                serve(&engine, queued, version.load(Ordering::SeqCst));
            }
        }
        rx.await
            .map_err(|_| anyhow!("the engine dropped the request"))?
            .map_err(|e| anyhow!(e))
    }
}

/// Decodes `queued`, one batch per distinct sampling setting (see
/// [`InferenceEngine::generate_coalesced`]).
fn serve(engine: &InferenceEngine, mut queued: Vec<Pending>, version: u64) {
    while !queued.is_empty() {
        let key = queued[0].params.clone();
        let (batch, rest): (Vec<Pending>, Vec<Pending>) = queued
            .into_iter()
            .partition(|p| p.params.batches_with(&key));
        queued = rest;
        let requests: Vec<BatchRequest<'_>> = batch
            .iter()
            .map(|p| (p.prompts.as_slice(), p.streams.as_slice()))
            .collect();
        let outs = engine.generate_coalesced(&requests, &key);
        for (p, out) in batch.into_iter().zip(outs) {
            let _ = p
                .reply
                .send(out.map(|c| (c, version)).map_err(|e| e.to_string()));
        }
    }
}
