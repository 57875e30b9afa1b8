//! The engine thread: owns the engine and runs it as a continuous-batching
//! step loop.
//!
//! Between two engine steps the thread takes every command that arrived:
//! generation requests join the running batch at once (each with its own
//! sampling settings; every sequence samples from its own stream, so a
//! request's output does not depend on its company), and weight loads and
//! other engine jobs run there, so they never interleave with a step. While
//! paused no step runs and new requests are held: sequences in flight keep
//! their KV and continue after resume. With nothing to do the thread blocks on
//! the command channel.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use skyrl_model::{
    CausalLm, Completion, InferenceEngine, LoadOptions, ModelError, SampleStream, SamplingParams,
    SeqId, SeqUpdate,
};
use tokio::sync::{mpsc as tmpsc, oneshot};

/// Why a generation request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerateError {
    /// The request itself is bad (prompt too long, token outside the
    /// vocabulary, ...): a client error.
    #[error("{0}")]
    Rejected(String),
    /// The engine failed while the request was in flight: a server error.
    #[error("{0}")]
    Failed(String),
}

/// Reply to a generation request: completions (in prompt order) and the
/// weight version when the request started.
pub type GenerateReply = oneshot::Sender<Result<(Vec<Completion>, u64), GenerateError>>;

/// What one engine step produced for sequence `index` of a streaming request.
#[derive(Debug, Clone)]
pub struct SeqEvent {
    /// Position of the sequence in the request's `prompts`.
    pub index: usize,
    /// New tokens, their log-probs and top alternatives, and the completion
    /// when the sequence finished.
    pub update: SeqUpdate,
}

/// Where a streaming request's per-step output goes.
pub type EventSender = tmpsc::UnboundedSender<SeqEvent>;

/// What the engine thread can be asked to do.
pub enum EngineCommand {
    /// Generate one completion per prompt, prompt `i` sampling from `streams[i]`.
    /// The request joins the running batch at the next step (or after resume).
    Generate {
        prompts: Vec<Vec<i64>>,
        streams: Vec<SampleStream>,
        params: SamplingParams,
        /// Streaming: every step's new tokens per sequence (dropped when the
        /// request ends, before `reply` is sent).
        events: Option<EventSender>,
        reply: GenerateReply,
    },
    /// Stop admitting requests and stepping (sequences in flight keep their KV).
    Pause { reply: oneshot::Sender<()> },
    /// Step again; held requests join the batch.
    Resume { reply: oneshot::Sender<()> },
    /// Replace the weights with a Hugging Face checkpoint directory between two
    /// steps; replies with the new version.
    LoadWeights {
        path: PathBuf,
        reply: oneshot::Sender<Result<u64, String>>,
    },
    /// Run `job` on the engine thread between two steps (weight transfers that
    /// need exclusive access, e.g. an NCCL receive); replies with the new
    /// version when `job` changed the weights.
    WithEngine {
        job: EngineJob,
        reply: oneshot::Sender<Result<u64, String>>,
    },
}

/// A job run on the engine thread; returns whether the weights changed.
pub type EngineJob = Box<dyn FnOnce(&mut InferenceEngine) -> Result<bool, String> + Send>;

/// A handle to the engine thread.
#[derive(Clone)]
pub struct EngineWorker {
    tx: mpsc::Sender<EngineCommand>,
    version: Arc<AtomicU64>,
    paused: Arc<AtomicBool>,
    max_num_seqs: usize,
    max_model_len: usize,
}

impl EngineWorker {
    /// Moves `engine` onto its own thread.
    pub fn spawn(engine: InferenceEngine) -> Self {
        let (tx, rx) = mpsc::channel();
        let version = Arc::new(AtomicU64::new(0));
        let paused = Arc::new(AtomicBool::new(false));
        let max_num_seqs = engine.max_batch();
        let max_model_len = engine.model().config().max_position_embeddings as usize;
        let mut state = WorkerState {
            engine,
            rx,
            held: VecDeque::new(),
            requests: HashMap::new(),
            seqs: HashMap::new(),
            next_request: 0,
            version: version.clone(),
            paused: paused.clone(),
        };
        std::thread::Builder::new()
            .name("skyrl-engine".into())
            .spawn(move || state.run())
            .expect("spawning the engine thread");
        Self {
            tx,
            version,
            paused,
            max_num_seqs,
            max_model_len,
        }
    }

    /// Sends a command; false when the engine thread is gone.
    pub fn send(&self, cmd: EngineCommand) -> bool {
        self.tx.send(cmd).is_ok()
    }

    /// Current weight version (bumped by every load).
    pub fn weight_version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// Whether generation is paused.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Most sequences the engine runs together (`max_num_seqs`).
    pub fn max_num_seqs(&self) -> usize {
        self.max_num_seqs
    }

    /// The model's context length (prompt plus completion).
    pub fn max_model_len(&self) -> usize {
        self.max_model_len
    }
}

/// A generation request that has not joined the batch yet (paused).
struct Held {
    prompts: Vec<Vec<i64>>,
    streams: Vec<SampleStream>,
    params: SamplingParams,
    events: Option<EventSender>,
    reply: GenerateReply,
}

/// A generation request with sequences in the engine.
struct Active {
    ids: Vec<SeqId>,
    done: Vec<Option<Completion>>,
    left: usize,
    version: u64,
    events: Option<EventSender>,
    reply: GenerateReply,
}

impl Active {
    /// Whether the client stopped waiting for the answer.
    fn abandoned(&self) -> bool {
        self.reply.is_closed() || self.events.as_ref().is_some_and(|e| e.is_closed())
    }
}

struct WorkerState {
    engine: InferenceEngine,
    rx: mpsc::Receiver<EngineCommand>,
    /// Requests received while paused, in arrival order.
    held: VecDeque<Held>,
    requests: HashMap<u64, Active>,
    /// Each sequence in flight: its request and its position there.
    seqs: HashMap<SeqId, (u64, usize)>,
    next_request: u64,
    version: Arc<AtomicU64>,
    paused: Arc<AtomicBool>,
}

impl WorkerState {
    fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// Whether a step would make progress.
    fn can_step(&self) -> bool {
        !self.paused() && self.engine.has_unfinished()
    }

    fn run(&mut self) {
        loop {
            if !self.can_step() {
                // Idle (or paused): wait for a command.
                match self.rx.recv() {
                    Ok(cmd) => self.handle(cmd),
                    Err(_) => return,
                }
            }
            // Everything else that arrived joins before the next step.
            while let Ok(cmd) = self.rx.try_recv() {
                self.handle(cmd);
            }
            self.drop_abandoned();
            if self.can_step() {
                self.step();
            }
        }
    }

    fn handle(&mut self, cmd: EngineCommand) {
        match cmd {
            EngineCommand::Generate {
                prompts,
                streams,
                params,
                events,
                reply,
            } => {
                let held = Held {
                    prompts,
                    streams,
                    params,
                    events,
                    reply,
                };
                if self.paused() {
                    self.held.push_back(held);
                } else {
                    self.submit(held);
                }
            }
            EngineCommand::Pause { reply } => {
                self.paused.store(true, Ordering::SeqCst);
                let _ = reply.send(());
            }
            EngineCommand::Resume { reply } => {
                self.paused.store(false, Ordering::SeqCst);
                while let Some(h) = self.held.pop_front() {
                    self.submit(h);
                }
                let _ = reply.send(());
            }
            EngineCommand::LoadWeights { path, reply } => {
                let _ = reply.send(self.load_weights(&path));
            }
            EngineCommand::WithEngine { job, reply } => {
                let out = job(&mut self.engine).map(|changed| {
                    if changed {
                        self.version.fetch_add(1, Ordering::SeqCst) + 1
                    } else {
                        self.version.load(Ordering::SeqCst)
                    }
                });
                let _ = reply.send(out);
            }
        }
    }

    /// Queues every sequence of a request in the engine; a request with bad
    /// input is refused as a whole.
    fn submit(&mut self, h: Held) {
        if h.reply.is_closed() {
            return;
        }
        let ids = match self.engine.submit_all(h.prompts, &h.streams, h.params) {
            Ok(ids) => ids,
            Err(e) => {
                let _ = h.reply.send(Err(reject(e)));
                return;
            }
        };
        if ids.is_empty() {
            let version = self.version.load(Ordering::SeqCst);
            let _ = h.reply.send(Ok((Vec::new(), version)));
            return;
        }
        let key = self.next_request;
        self.next_request += 1;
        for (i, id) in ids.iter().enumerate() {
            self.seqs.insert(*id, (key, i));
        }
        let n = ids.len();
        self.requests.insert(
            key,
            Active {
                ids,
                done: vec![None; n],
                left: n,
                version: self.version.load(Ordering::SeqCst),
                events: h.events,
                reply: h.reply,
            },
        );
    }

    /// Aborts the sequences of requests whose client went away.
    fn drop_abandoned(&mut self) {
        self.held
            .retain(|h| !(h.reply.is_closed() || h.events.as_ref().is_some_and(|e| e.is_closed())));
        let gone: Vec<u64> = self
            .requests
            .iter()
            .filter(|(_, r)| r.abandoned())
            .map(|(k, _)| *k)
            .collect();
        for key in gone {
            let r = self.requests.remove(&key).expect("listed above");
            for (id, done) in r.ids.iter().zip(&r.done) {
                self.seqs.remove(id);
                if done.is_none() {
                    self.engine.abort(*id);
                }
            }
            tracing::debug!(sequences = r.ids.len(), "client went away; aborted");
        }
    }

    fn step(&mut self) {
        match self.engine.step() {
            Ok(updates) => {
                for u in updates {
                    self.route(u);
                }
            }
            Err(e) => {
                // The engine dropped every sequence in flight.
                let message = format!("generation failed: {e}");
                tracing::error!("{message}");
                self.seqs.clear();
                for (_, r) in self.requests.drain() {
                    drop(r.events);
                    let _ = r.reply.send(Err(GenerateError::Failed(message.clone())));
                }
            }
        }
    }

    /// Hands one sequence's step output to its request; replies once the
    /// request's last sequence finished.
    fn route(&mut self, update: SeqUpdate) {
        let Some(&(key, index)) = self.seqs.get(&update.id) else {
            return;
        };
        let r = self
            .requests
            .get_mut(&key)
            .expect("sequence of a live request");
        let finished = update.finished.clone();
        if let Some(events) = &r.events {
            let _ = events.send(SeqEvent { index, update });
        }
        let Some(c) = finished else {
            return;
        };
        self.seqs.remove(&r.ids[index]);
        r.done[index] = Some(c);
        r.left -= 1;
        if r.left == 0 {
            let r = self.requests.remove(&key).expect("present");
            drop(r.events);
            let outs = r.done.into_iter().map(|c| c.expect("finished")).collect();
            let _ = r.reply.send(Ok((outs, r.version)));
        }
    }

    fn load_weights(&mut self, path: &std::path::Path) -> Result<u64, String> {
        let options = LoadOptions {
            device: self.engine.model().device(),
            kind: self.engine.model().kind(),
        };
        CausalLm::from_pretrained(path, &options)
            .and_then(|m| self.engine.model_mut().copy_weights_from(&m))
            .map(|()| self.version.fetch_add(1, Ordering::SeqCst) + 1)
            .map_err(|e| format!("cannot load weights from {}: {e}", path.display()))
    }
}

/// A submit failure: bad input is the client's fault, anything else the server's.
fn reject(e: ModelError) -> GenerateError {
    match e {
        ModelError::Input(m) => GenerateError::Rejected(m),
        other => GenerateError::Failed(other.to_string()),
    }
}
