//! Helpers shared by the runtime benchmarks.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `$SKYRL_PLUGIN_DIR/<name>.wasm`, else `<repo>/artifacts/plugins/<name>.wasm`;
/// exits with a message naming the build script when it is missing.
pub fn plugin_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("SKYRL_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("artifacts/plugins"));
    let path = dir.join(format!("{name}.wasm"));
    if !path.exists() {
        eprintln!(
            "error: {} is missing: run scripts/build-plugins first",
            path.display()
        );
        std::process::exit(1);
    }
    path
}

/// Median of `runs` timings of `f`, after one warm-up call.
pub fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    samples.sort();
    samples[runs / 2]
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first row of the text2sql sample dataset (`envs/text2sql/data`).
pub fn first_sql_row() -> serde_json::Value {
    let text = std::fs::read_to_string(repo().join("envs/text2sql/data/train.jsonl"))
        .expect("text2sql dataset");
    serde_json::from_str(text.lines().next().expect("a row")).expect("json row")
}

/// Milliseconds as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
