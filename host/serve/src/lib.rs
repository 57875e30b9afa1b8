//! `skyrl serve`: the built-in engine behind an OpenAI-compatible API.
//!
//! One worker thread owns the [`skyrl_model::InferenceEngine`] and runs it as
//! a continuous-batching step loop; HTTP handlers send it commands (generate,
//! pause, resume, load weights) over a channel, so weight updates run between
//! engine steps without locks.

pub mod auth;
mod generate;
pub mod limits;
pub mod server;
mod sse;
mod text;
mod token_generate;
pub mod vllm_routes;
pub mod weights_root;
mod worker;

pub use worker::{
    EngineCommand, EngineJob, EngineWorker, EventSender, GenerateError, GenerateReply, SeqEvent,
};

pub use skyrl_inference::launcher::LISTENING_PREFIX;
