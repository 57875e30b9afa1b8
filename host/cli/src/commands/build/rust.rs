//! Rust plugins: cargo for wasm32-wasip2, the component taken from cargo's
//! artifact list.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

use super::toolchain;

/// Builds the crate in `dir` and copies its component to `output`.
pub fn build(dir: &Path, output: &Path) -> anyhow::Result<()> {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    command
        .current_dir(dir)
        .args(["build", "--release", "--target", "wasm32-wasip2", "--lib"])
        .args(["--message-format", "json-render-diagnostics"])
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"));
    let stdout = toolchain::run(
        &mut command,
        "cargo build (rustup target add wasm32-wasip2 if the target is missing)",
    )?;
    let wasm = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact")
        .filter(|msg| {
            msg["manifest_path"].as_str().map(Path::new) == Some(dir.join("Cargo.toml").as_path())
        })
        .flat_map(|msg| {
            msg["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(str::to_string))
        })
        .find(|f| f.ends_with(".wasm"));
    let Some(wasm) = wasm else {
        bail!(
            "cargo built no .wasm for {} (is it a `crate-type = [\"cdylib\"]` library?)",
            dir.display()
        );
    };
    std::fs::copy(&wasm, output)
        .with_context(|| format!("cannot copy {wasm} to {}", output.display()))?;
    Ok(())
}
