//! The in-process engine, shared by concurrent rollout tasks with continuous
//! batching: a request's sequences join the running batch at the next engine
//! step, and the caller holding the engine steps it for everyone until its own
//! request is done. Every prompt samples from its own stream, so a request's
//! output does not depend on its company.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use skyrl_model::{Completion, EngineStats, InferenceEngine, SampleStream, SamplingParams, SeqId};
use tokio::sync::oneshot;

type Reply = oneshot::Sender<std::result::Result<(Vec<Completion>, u64), String>>;

/// A request waiting to be submitted.
struct Pending {
    prompts: Vec<Vec<i64>>,
    streams: Vec<SampleStream>,
    params: SamplingParams,
    reply: Reply,
}

/// A submitted request collecting its completions.
struct InFlight {
    completions: Vec<Option<Completion>>,
    left: usize,
    version: u64,
    reply: Option<Reply>,
}

/// Sequences in flight: which request and which prompt each one is.
#[derive(Default)]
struct Routes {
    requests: HashMap<u64, InFlight>,
    seqs: HashMap<SeqId, (u64, usize)>,
    next: u64,
}

/// The engine plus the requests waiting for it.
pub struct LocalEngine {
    /// Held while stepping and while weights are synced (a sync lands between steps).
    engine: tokio::sync::Mutex<InferenceEngine>,
    pending: Mutex<Vec<Pending>>,
    routes: Mutex<Routes>,
    busy_periods: AtomicU64,
    /// The engine's counters after its last step.
    stats: Mutex<EngineStats>,
}

impl LocalEngine {
    /// Wraps `engine`.
    pub fn new(engine: InferenceEngine) -> Self {
        Self {
            engine: tokio::sync::Mutex::new(engine),
            pending: Mutex::new(Vec::new()),
            routes: Mutex::new(Routes::default()),
            busy_periods: AtomicU64::new(0),
            stats: Mutex::new(EngineStats::default()),
        }
    }

    /// Times the engine started from idle (requests that joined one running
    /// batch count once).
    pub fn busy_periods(&self) -> u64 {
        self.busy_periods.load(Ordering::SeqCst)
    }

    /// The engine's counters after its last step (read without waiting for it).
    pub fn stats(&self) -> EngineStats {
        self.stats.lock().expect("stats lock").clone()
    }

    /// Exclusive access from a thread outside the runtime (weight sync).
    pub fn blocking_lock(&self) -> tokio::sync::MutexGuard<'_, InferenceEngine> {
        self.engine.blocking_lock()
    }

    /// Queues the request, lets other ready tasks queue theirs, then steps the
    /// engine (for every request in flight) until this one is done. Returns
    /// the completions and `version` as read when the request was submitted.
    pub async fn generate(
        &self,
        prompts: &[Vec<i64>],
        streams: &[SampleStream],
        params: &SamplingParams,
        version: &AtomicU64,
    ) -> Result<(Vec<Completion>, u64)> {
        let (reply, mut rx) = oneshot::channel();
        self.pending.lock().expect("pending lock").push(Pending {
            prompts: prompts.to_vec(),
            streams: streams.to_vec(),
            params: params.clone(),
            reply,
        });
        tokio::task::yield_now().await;
        loop {
            tokio::select! {
                biased;
                out = &mut rx => {
                    return out
                        .map_err(|_| anyhow!("the engine dropped the request"))?
                        .map_err(|e| anyhow!(e));
                }
                engine = self.engine.lock() => {
                    self.drive(&engine, version.load(Ordering::SeqCst));
                    drop(engine);
                    tokio::task::yield_now().await;
                }
            }
        }
    }

    /// Submits queued requests and runs one step, routing finished sequences.
    fn drive(&self, engine: &InferenceEngine, version: u64) {
        let queued = std::mem::take(&mut *self.pending.lock().expect("pending lock"));
        let mut routes = self.routes.lock().expect("routes lock");
        if !queued.is_empty() && !engine.has_unfinished() {
            self.busy_periods.fetch_add(1, Ordering::SeqCst);
        }
        for p in queued {
            submit(engine, &mut routes, p, version);
        }
        if !engine.has_unfinished() {
            return;
        }
        let stepped = engine.step();
        *self.stats.lock().expect("stats lock") = engine.stats();
        match stepped {
            Ok(updates) => {
                for u in updates {
                    if let Some(c) = u.finished {
                        finish(&mut routes, u.id, c);
                    }
                }
            }
            Err(e) => {
                // A failed step drops every sequence in flight.
                routes.seqs.clear();
                for (_, mut r) in routes.requests.drain() {
                    if let Some(reply) = r.reply.take() {
                        let _ = reply.send(Err(e.to_string()));
                    }
                }
            }
        }
    }
}

/// Submits every prompt of `p`; on bad input the request fails alone.
fn submit(engine: &InferenceEngine, routes: &mut Routes, p: Pending, version: u64) {
    let ids = match engine.submit_all(p.prompts, &p.streams, p.params) {
        Ok(ids) => ids,
        Err(e) => {
            let _ = p.reply.send(Err(e.to_string()));
            return;
        }
    };
    if ids.is_empty() {
        let _ = p.reply.send(Ok((Vec::new(), version)));
        return;
    }
    let key = routes.next;
    routes.next += 1;
    for (i, id) in ids.iter().enumerate() {
        routes.seqs.insert(*id, (key, i));
    }
    routes.requests.insert(
        key,
        InFlight {
            completions: vec![None; ids.len()],
            left: ids.len(),
            version,
            reply: Some(p.reply),
        },
    );
}

/// Records a finished sequence; replies when its request is complete.
fn finish(routes: &mut Routes, id: SeqId, completion: Completion) {
    let Some((key, i)) = routes.seqs.remove(&id) else {
        return;
    };
    let Some(r) = routes.requests.get_mut(&key) else {
        return;
    };
    r.completions[i] = Some(completion);
    r.left -= 1;
    if r.left == 0 {
        let r = routes.requests.remove(&key).expect("present");
        let all = r.completions.into_iter().flatten().collect();
        if let Some(reply) = r.reply {
            let _ = reply.send(Ok((all, r.version)));
        }
    }
}
