//! Shared test helpers: locating built plugins and a per-test engine.

#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

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

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The project venv's Python, where setup installs skyrl-gym, or `$SKYRL_PYTHON`.
pub fn python() -> PathBuf {
    std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".deps/venv/bin/python"))
}

/// Runs `script` (Python that reads JSON on stdin and prints JSON) with
/// skyrl-gym 0.4.0's Python on `input`, under `PYTHONHASHSEED=0`; fails the test naming the
/// interpreter when it is missing or the script fails.
pub fn skyrl_gym_reference(script: &str, input: &serde_json::Value) -> serde_json::Value {
    let python = python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup or set SKYRL_PYTHON to a Python with skyrl-gym==0.4.0",
        python.display()
    );
    let mut child = Command::new(&python)
        .args(["-c", script])
        // String hashes (set order) as the plugins reproduce them.
        .env("PYTHONHASHSEED", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", python.display()));
    let bytes = serde_json::to_vec(input).unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "skyrl-gym reference failed (is skyrl-gym==0.4.0 installed in {}?):\n{}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
