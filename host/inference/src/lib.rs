//! skyrl-inference: where rollouts are sampled.
//!
//! It owns the [`RolloutEngine`] the generator samples from and its backends:
//! the in-process engine ([`local`]), OpenAI/vLLM-compatible servers behind a
//! load-balancing client ([`remote`]), and the `skyrl serve` processes a
//! trainer starts itself ([`launcher`]). It also owns where engines run
//! ([`placement`]), how trained weights reach them ([`weight_sync`]: in-memory
//! copy, checkpoint-and-reload, NCCL broadcast over the [`nccl`] group) and
//! the OpenAI wire types both the client and `skyrl serve` speak ([`openai`]),
//! and vLLM as an engine ([`vllm`]: its control protocol and launching it).
//!
//! It builds on `skyrl-model` only. It knows nothing about plugins,
//! environments, optimizers or ranks: the rollout crate drives it, the
//! trainer syncs weights through it, and `skyrl-serve` puts it behind HTTP.

pub mod config;
mod engine;
pub mod engine_settings;
pub mod keys;
pub mod launcher;
pub mod local;
pub mod nccl;
pub mod openai;
pub mod placement;
pub mod remote;
pub mod startup;
pub mod vllm;
pub mod weight_sync;

pub use config::InferenceEngineConfig;
pub use engine::{EngineBackend, RolloutEngine};
