//! Sandboxed WebAssembly plugin host for skyrl.
//!
//! Environments, tools, reward functions, rollout generators and algorithms
//! (advantage estimators, policy losses) are WebAssembly components that
//! implement the `skyrl:plugin@0.1` WIT worlds (see `wit/plugin.wit`). This
//! crate loads them into a shared [`PluginEngine`], caches compiled code on
//! disk, and runs every instance inside its own sandbox: a memory cap, a fuel
//! budget and a wall-clock deadline per call, and no filesystem or network
//! unless a [`SandboxPolicy`] grants a read-only directory or HTTP hosts
//! ([`NetworkPolicy`], served over `wasi:http`).
//!
//! A plugin that traps, loops or runs out of memory produces a typed
//! [`PluginError`] for that call; the host and all other instances go on.

mod algorithm;
mod bindings;
mod cache;
mod engine;
mod env;
mod error;
mod generator;
mod limits;
mod metadata;
mod network;
mod plugin;
mod reward;
mod sandbox;
mod state;
mod stdio;
mod tool;
mod warm;

pub use algorithm::{
    AdvantageCall, AdvantageInstance, AdvantageResult, LossCall, LossResult, Matrix,
    PolicyLossInstance,
};
pub use cache::{CacheOutcome, ComponentCache};
pub use engine::{EngineOptions, PluginEngine, DEFAULT_POOL_SIZE};
pub use env::{EnvInstance, InitOutput, StepOutput};
pub use error::{GuestErrorKind, PluginError, Result};
pub use generator::{
    EnvHandle, GeneratedTrajectory, GeneratorHost, GeneratorInstance, GeneratorPrompt,
    LlmCompletion, LlmParams,
};
pub use limits::{ReadOnlyDir, SandboxLimits, SandboxPolicy, DEFAULT_FUEL_PER_CALL};
pub use metadata::{PluginInfo, PluginKind, PluginMetadata, World};
pub use network::{HostPattern, NetworkPolicy};
pub use plugin::Plugin;
pub use reward::RewardInstance;
pub use tool::{ToolInstance, ToolRouter, ToolSpec};

/// An OpenAI-style chat message, as exchanged with plugins.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    /// A message with the given role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A `user` message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new("user", content)
    }
}
