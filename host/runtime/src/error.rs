//! Typed errors for everything a plugin can do wrong.

use std::path::PathBuf;

/// Result alias for plugin operations.
pub type Result<T, E = PluginError> = std::result::Result<T, E>;

/// The kind of error a plugin reported itself (not a trap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestErrorKind {
    InvalidConfig,
    InvalidInput,
    Failed,
}

/// Everything that can go wrong loading or calling a plugin.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("cannot read plugin file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin} is not a valid WebAssembly component: {reason}")]
    Malformed { origin: String, reason: String },
    #[error("plugin {plugin} does not implement the {world} world (it exports: {exports})")]
    WrongWorld {
        plugin: String,
        world: String,
        exports: String,
    },
    #[error("plugin {plugin} cannot be linked: {reason}")]
    Link { plugin: String, reason: String },
    #[error(
        "plugin {plugin} ran out of fuel ({fuel} units) during {call}: likely an infinite loop"
    )]
    OutOfFuel {
        plugin: String,
        call: String,
        fuel: u64,
    },
    #[error("plugin {plugin} exceeded its {timeout_ms} ms deadline during {call}")]
    Timeout {
        plugin: String,
        call: String,
        timeout_ms: u64,
    },
    #[error("plugin {plugin} exceeded its memory limit of {limit_bytes} bytes during {call}")]
    MemoryLimit {
        plugin: String,
        call: String,
        limit_bytes: usize,
    },
    #[error("plugin {plugin} overflowed its stack during {call}")]
    StackOverflow { plugin: String, call: String },
    #[error("plugin {plugin} trapped during {call}: {reason}")]
    Trap {
        plugin: String,
        call: String,
        reason: String,
    },
    #[error(
        "no free sandbox for plugin {plugin}: {reason}; more sandboxes are live at once than \
         the engine's pool_size (EngineOptions::pool_size; skyrl train sizes it from the batch)"
    )]
    PoolExhausted { plugin: String, reason: String },
    #[error("plugin {plugin} is unusable after an earlier trap; create a new instance")]
    Poisoned { plugin: String },
    #[error("plugin {plugin} reported {kind:?} during {call}: {message}")]
    Guest {
        plugin: String,
        call: String,
        kind: GuestErrorKind,
        message: String,
    },
    #[error("plugin {plugin} returned invalid JSON from {call}: {reason}")]
    BadJson {
        plugin: String,
        call: String,
        reason: String,
    },
    #[error("plugin {plugin} returned an unusable result from {call}: {reason}")]
    BadOutput {
        plugin: String,
        call: String,
        reason: String,
    },
    #[error("tool {0:?} is not provided by any loaded tool plugin")]
    UnknownTool(String),
    #[error("{0}")]
    Host(String),
}

impl PluginError {
    /// True for errors that leave the instance unusable (traps of any kind).
    pub fn is_trap(&self) -> bool {
        matches!(
            self,
            Self::OutOfFuel { .. }
                | Self::Timeout { .. }
                | Self::MemoryLimit { .. }
                | Self::StackOverflow { .. }
                | Self::Trap { .. }
        )
    }
}
