//! Per-instance sandbox limits and capability grants.

use std::path::PathBuf;
use std::time::Duration;

/// Resource limits applied to every plugin instance.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxLimits {
    /// Maximum linear memory per instance, in bytes.
    pub memory_bytes: usize,
    /// Fuel (≈ WebAssembly instructions) per call; `None` disables the check.
    pub fuel_per_call: Option<u64>,
    /// Wall-clock deadline per call, in milliseconds.
    pub call_timeout_ms: u64,
    /// Maximum WebAssembly stack per call, in bytes (engine-wide).
    pub max_stack_bytes: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 256 << 20,
            fuel_per_call: Some(20_000_000_000),
            call_timeout_ms: 10_000,
            max_stack_bytes: 1 << 20,
        }
    }
}

impl SandboxLimits {
    /// The per-call deadline as a [`Duration`].
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }
}

/// A host directory exposed read-only to the guest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadOnlyDir {
    /// Directory on the host.
    pub host: PathBuf,
    /// Path the guest sees, e.g. `/data`.
    pub guest: String,
}

/// Capabilities granted to an instance. The default grants nothing: no
/// filesystem, no network, no environment variables, no arguments.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxPolicy {
    /// Read-only directory grants.
    pub read_only_dirs: Vec<ReadOnlyDir>,
}
