//! Shared test helpers: locating built plugins and a per-test engine.

#![allow(dead_code)]

use std::path::PathBuf;

use skyrl_runtime::{EngineOptions, Plugin, PluginEngine, SandboxLimits};

/// `$SKYRL_PLUGIN_DIR`, else `<repo>/artifacts/plugins`.
pub fn plugin_dir() -> PathBuf {
    std::env::var_os("SKYRL_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../artifacts/plugins")
        })
}

/// Path of a built plugin; panics with a clear message when missing.
pub fn plugin_path(name: &str) -> PathBuf {
    let path = plugin_dir().join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run scripts/build-plugins first",
        path.display()
    );
    path
}

/// An engine with small, fast-failing limits and a private cache dir.
pub fn engine(limits: SandboxLimits) -> PluginEngine {
    let cache = tempfile::tempdir().expect("temp dir").keep();
    PluginEngine::new(EngineOptions {
        limits,
        pooling: true,
        pool_size: 64,
        cache_dir: Some(cache),
    })
    .expect("engine")
}

/// Limits tight enough that hostile plugins fail quickly.
pub fn tight_limits() -> SandboxLimits {
    SandboxLimits {
        memory_bytes: 64 << 20,
        fuel_per_call: Some(2_000_000_000),
        call_timeout_ms: 5_000,
        max_stack_bytes: 512 << 10,
    }
}

pub fn load(engine: &PluginEngine, name: &str) -> Plugin {
    Plugin::load(engine, &plugin_path(name)).unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

/// One engine per test binary with a cache that outlives the run, for the
/// large (CPython) components that take seconds to compile.
pub fn shared_engine() -> &'static PluginEngine {
    static ENGINE: std::sync::OnceLock<PluginEngine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(|| {
        PluginEngine::new(EngineOptions {
            limits: SandboxLimits::default(),
            pooling: true,
            pool_size: 64,
            cache_dir: Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache")),
        })
        .expect("engine")
    })
}
