//! The engine thread: owns the model, runs generation and weight updates in
//! arrival order, and holds generation while paused.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use skyrl_model::{CausalLm, Completion, InferenceEngine, LoadOptions, SamplingParams};
use tokio::sync::oneshot;

/// What the engine thread can be asked to do.
pub enum EngineCommand {
    /// Generate one completion per prompt.
    Generate {
        prompts: Vec<Vec<i64>>,
        params: SamplingParams,
        reply: oneshot::Sender<Result<(Vec<Completion>, u64), String>>,
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
}

/// A handle to the engine thread.
#[derive(Clone)]
pub struct EngineWorker {
    tx: mpsc::Sender<EngineCommand>,
    version: Arc<AtomicU64>,
    paused: Arc<AtomicBool>,
}

impl EngineWorker {
    /// Moves `engine` onto its own thread.
    pub fn spawn(engine: InferenceEngine) -> Self {
        let (tx, rx) = mpsc::channel();
        let version = Arc::new(AtomicU64::new(0));
        let paused = Arc::new(AtomicBool::new(false));
        let (v, p) = (version.clone(), paused.clone());
        std::thread::Builder::new()
            .name("skyrl-engine".into())
            .spawn(move || run(engine, rx, v, p))
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

fn run(
    mut engine: InferenceEngine,
    rx: mpsc::Receiver<EngineCommand>,
    version: Arc<AtomicU64>,
    paused: Arc<AtomicBool>,
) {
    let mut held: VecDeque<EngineCommand> = VecDeque::new();
    loop {
        let cmd = if !paused.load(Ordering::SeqCst) && !held.is_empty() {
            held.pop_front().expect("non-empty")
        } else {
            match rx.recv() {
                Ok(c) => c,
                Err(_) => return,
            }
        };
        match cmd {
            EngineCommand::Generate { .. } if paused.load(Ordering::SeqCst) => held.push_back(cmd),
            EngineCommand::Generate {
                prompts,
                params,
                reply,
            } => {
                let out = engine
                    .generate(&prompts, &params)
                    .map(|c| (c, version.load(Ordering::SeqCst)))
                    .map_err(|e| e.to_string());
                let _ = reply.send(out);
            }
            EngineCommand::Pause { reply } => {
                paused.store(true, Ordering::SeqCst);
                let _ = reply.send(());
            }
            EngineCommand::Resume { reply } => {
                paused.store(false, Ordering::SeqCst);
                let _ = reply.send(());
            }
            EngineCommand::LoadWeights { path, reply } => {
                let options = LoadOptions {
                    device: engine.model().device(),
                    kind: engine.model().kind(),
                };
                let result = CausalLm::from_pretrained(&path, &options)
                    .and_then(|m| engine.model_mut().copy_weights_from(&m))
                    .map(|()| version.fetch_add(1, Ordering::SeqCst) + 1)
                    .map_err(|e| format!("cannot load weights from {}: {e}", path.display()));
                let _ = reply.send(result);
            }
        }
    }
}
