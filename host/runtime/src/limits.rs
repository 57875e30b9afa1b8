//! Per-instance sandbox limits and capability grants.

use std::path::PathBuf;
use std::time::Duration;

use crate::network::NetworkPolicy;

/// Resource limits applied to every plugin instance.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxLimits {
    /// Maximum linear memory per instance, in bytes.
    pub memory_bytes: usize,
    /// Fuel (≈ WebAssembly instructions) per call; `None` (the default)
    /// meters nothing and leaves the wall-clock deadline to stop endless
    /// loops. Fuel makes limits deterministic but costs every guest loop a
    /// counter update, so it needs an engine built with metering
    /// ([`crate::PluginEngine::shared_metered`], or an engine whose default
    /// limits set fuel).
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
            fuel_per_call: None,
            call_timeout_ms: 10_000,
            max_stack_bytes: 1 << 20,
        }
    }
}

/// Fuel per call of metered engines' default limits (≈ 2·10¹⁰ instructions).
pub const DEFAULT_FUEL_PER_CALL: u64 = 20_000_000_000;

impl SandboxLimits {
    /// The default limits with fuel metering at [`DEFAULT_FUEL_PER_CALL`].
    pub fn metered() -> Self {
        Self {
            fuel_per_call: Some(DEFAULT_FUEL_PER_CALL),
            ..Self::default()
        }
    }

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
    /// Outbound HTTP grants (`wasi:http`); none by default.
    pub network: NetworkPolicy,
}
