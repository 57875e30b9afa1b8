//! `skyrl serve`: the built-in engine behind an OpenAI-compatible API.
//!
//! One worker thread owns the [`skyrl_model::InferenceEngine`]; HTTP handlers
//! send it commands (generate, pause, resume, load weights) over a channel,
//! so weight updates are serialized with generation without locks.

pub mod nccl;
pub mod openai;
pub mod server;
mod worker;

pub use worker::{EngineCommand, EngineJob, EngineWorker, DEFAULT_BATCH_WINDOW};

/// The line `skyrl serve` prints on stdout once it accepts connections,
/// followed by `host:port` (engine launchers parse it).
pub const LISTENING_PREFIX: &str = "skyrl serve listening on http://";
