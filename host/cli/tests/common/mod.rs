//! Helpers shared by the CLI tests: the repo, built plugins, running the
//! binary and checking its output.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The project venv's Python (setup installs tinker, the trackers and
/// skyrl-gym there), or `$SKYRL_PYTHON`.
pub fn python() -> PathBuf {
    std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".deps/venv/bin/python"))
}

/// A built plugin's path as text; panics naming the build script when missing.
pub fn plugin(name: &str) -> String {
    let path = repo().join(format!("artifacts/plugins/{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run scripts/build-plugins first",
        path.display()
    );
    path.display().to_string()
}

/// Runs `skyrl` in the repo with a component cache shared by the CLI tests.
pub fn skyrl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skyrl"))
        .args(args)
        .current_dir(repo())
        .env(
            "SKYRL_CACHE_DIR",
            std::env::temp_dir().join("skyrl-cli-test-cache"),
        )
        .output()
        .expect("running skyrl")
}

/// stdout followed by stderr.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts that `out` failed and says `needle`.
pub fn assert_fails_with(out: &Output, needle: &str) {
    assert!(!out.status.success(), "expected a failure: {}", text(out));
    assert!(
        text(out).contains(needle),
        "expected `{needle}` in: {}",
        text(out)
    );
}
