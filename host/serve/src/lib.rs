//! `skyrl serve`: the built-in engine behind an OpenAI-compatible API.
//!
//! One worker thread owns the [`skyrl_model::InferenceEngine`]; HTTP handlers
//! send it commands (generate, pause, resume, load weights) over a channel,
//! so weight updates are serialized with generation without locks.

pub mod server;
mod worker;

pub use worker::{EngineCommand, EngineJob, EngineWorker, DEFAULT_BATCH_WINDOW};

pub use skyrl_inference::launcher::LISTENING_PREFIX;
