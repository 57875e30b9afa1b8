//! The Hugging Face side: runs bench/rollout_hf.py on the same model and prompts.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::{Args, Sizes, Subject};

/// What the Python side reports.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct HfResult {
    pub tokens_per_s: f64,
    pub seconds: f64,
    /// CPU seconds the Python process got / (seconds x threads).
    #[serde(default)]
    pub cpu_share: f64,
    pub torch: String,
    pub transformers: String,
    pub threads: i64,
}

/// The interpreter: `--python`, `$SKYRL_PYTHON`, the project venv, then `python3`.
fn python(args: &Args) -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/python");
    args.python
        .clone()
        .or_else(|| std::env::var_os("SKYRL_PYTHON").map(PathBuf::from))
        .or_else(|| venv.exists().then_some(venv))
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// Samples `n` completions of `gen_tokens` for every prompt in `prompts_json`
/// with `model.generate`, at most `max_rows` rows per call.
pub fn run(
    args: &Args,
    sizes: &Sizes,
    subject: &Subject,
    prompts_json: &Path,
    max_rows: usize,
) -> Result<HfResult> {
    let python = python(args);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/rollout_hf.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg("--model-dir")
        .arg(&subject.dir)
        .arg("--prompts")
        .arg(prompts_json)
        .args(["--n", &sizes.n.to_string()])
        .args(["--gen-tokens", &sizes.gen_tokens.to_string()])
        .args(["--max-rows", &max_rows.to_string()])
        .args(["--threads", &args.threads.to_string()])
        .args(["--device", &args.device])
        .args(["--dtype", subject.dtype])
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if !out.status.success() {
        bail!(
            "{} {} failed:\n{}",
            python.display(),
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().context("python printed nothing")?;
    serde_json::from_str(line).with_context(|| format!("parsing python output {line:?}"))
}
