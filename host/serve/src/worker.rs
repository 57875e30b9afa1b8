//! The engine thread: owns the model, runs generation and weight updates in
//! arrival order, and holds generation while paused.
//!
//! Generation requests that arrive together (within the batching window) with
//! the same sampling settings are decoded as one batch; every prompt samples
//! from its own stream, so a request's output does not depend on its company.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use skyrl_model::{
    BatchRequest, CausalLm, Completion, InferenceEngine, LoadOptions, SampleStream, SamplingParams,
};
use tokio::sync::oneshot;

/// Reply to a generation request: completions and the weight version that made them.
pub type GenerateReply = oneshot::Sender<Result<(Vec<Completion>, u64), String>>;

/// What the engine thread can be asked to do.
pub enum EngineCommand {
    /// Generate one completion per prompt, prompt `i` sampling from `streams[i]`.
    Generate {
        prompts: Vec<Vec<i64>>,
        streams: Vec<SampleStream>,
        params: SamplingParams,
        reply: GenerateReply,
    },
    /// Stop starting new generations (queued ones wait).
    Pause { reply: oneshot::Sender<()> },
    /// Start generating again.
    Resume { reply: oneshot::Sender<()> },
    /// Replace the weights with a Hugging Face checkpoint directory; replies with the new version.
    LoadWeights {
        path: PathBuf,
        reply: oneshot::Sender<Result<u64, String>>,
    },
    /// Run `job` on the engine thread with the engine (weight transfers that
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
}

/// How long the engine thread waits for more requests to join a batch.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(3);

impl EngineWorker {
    /// Moves `engine` onto its own thread with the default batching window.
    pub fn spawn(engine: InferenceEngine) -> Self {
        Self::spawn_with_window(engine, DEFAULT_BATCH_WINDOW)
    }

    /// Moves `engine` onto its own thread; generation requests arriving within
    /// `window` of the first one join its batch.
    pub fn spawn_with_window(engine: InferenceEngine, window: Duration) -> Self {
        let (tx, rx) = mpsc::channel();
        let version = Arc::new(AtomicU64::new(0));
        let paused = Arc::new(AtomicBool::new(false));
        let mut state = WorkerState {
            engine,
            rx,
            held: VecDeque::new(),
            version: version.clone(),
            paused: paused.clone(),
            window,
        };
        std::thread::Builder::new()
            .name("skyrl-engine".into())
            .spawn(move || state.run())
            .expect("spawning the engine thread");
        Self {
            tx,
            version,
            paused,
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
}

/// One generation request waiting in a batch.
struct Pending {
    prompts: Vec<Vec<i64>>,
    streams: Vec<SampleStream>,
    reply: GenerateReply,
}

struct WorkerState {
    engine: InferenceEngine,
    rx: mpsc::Receiver<EngineCommand>,
    /// Commands taken off the channel but not run yet, in arrival order.
    held: VecDeque<EngineCommand>,
    version: Arc<AtomicU64>,
    paused: Arc<AtomicBool>,
    window: Duration,
}

impl WorkerState {
    fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }

    /// The next command to run: held ones first unless paused.
    fn next(&mut self) -> Option<EngineCommand> {
        if !self.paused() {
            if let Some(c) = self.held.pop_front() {
                return Some(c);
            }
        }
        self.rx.recv().ok()
    }

    fn run(&mut self) {
        while let Some(cmd) = self.next() {
            match cmd {
                EngineCommand::Generate { .. } if self.paused() => self.held.push_back(cmd),
                EngineCommand::Generate {
                    prompts,
                    streams,
                    params,
                    reply,
                } => {
                    let first = Pending {
                        prompts,
                        streams,
                        reply,
                    };
                    let batch = self.gather(first, &params);
                    self.generate(batch, &params);
                }
                EngineCommand::Pause { reply } => {
                    self.paused.store(true, Ordering::SeqCst);
                    let _ = reply.send(());
                }
                EngineCommand::Resume { reply } => {
                    self.paused.store(false, Ordering::SeqCst);
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
    }

    /// Collects generation requests with the same settings that are already
    /// held or arrive within the window, up to the engine's batch size; the
    /// first other command ends the batch and runs next.
    fn gather(&mut self, first: Pending, key: &SamplingParams) -> Vec<Pending> {
        let limit = self.engine.max_batch();
        let mut size = first.prompts.len();
        let mut batch = vec![first];
        let deadline = Instant::now() + self.window;
        while size < limit {
            let next = match self.held.pop_front() {
                Some(c) => c,
                None => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match self.rx.recv_timeout(left) {
                        Ok(c) => c,
                        Err(_) => break,
                    }
                }
            };
            match next {
                EngineCommand::Generate {
                    prompts,
                    streams,
                    params,
                    reply,
                } if params.batches_with(key) && size + prompts.len() <= limit => {
                    size += prompts.len();
                    batch.push(Pending {
                        prompts,
                        streams,
                        reply,
                    });
                }
                other => {
                    self.held.push_front(other);
                    break;
                }
            }
        }
        batch
    }

    fn generate(&mut self, batch: Vec<Pending>, params: &SamplingParams) {
        let version = self.version.load(Ordering::SeqCst);
        let requests: Vec<BatchRequest<'_>> = batch
            .iter()
            .map(|p| (p.prompts.as_slice(), p.streams.as_slice()))
            .collect();
        let outs = self.engine.generate_coalesced(&requests, params);
        for (p, out) in batch.into_iter().zip(outs) {
            let _ = p
                .reply
                .send(out.map(|c| (c, version)).map_err(|e| e.to_string()));
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
