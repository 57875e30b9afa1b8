//! Finding and running the external compilers a build needs.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context};

/// The tool named by `$env_var`, else `program` on `PATH`; a missing tool is
/// an error that says how to install it.
pub fn find(env_var: &str, program: &str, install_hint: &str) -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(env_var).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        bail!(
            "${env_var} points at {}, which does not exist",
            path.display()
        );
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .with_context(|| format!("{program} not found (set ${env_var} or {install_hint})"))
}

/// Runs `command`; a failure carries the tool's stderr.
pub fn run(command: &mut Command, what: &str) -> anyhow::Result<String> {
    tracing::debug!(?command, "running {what}");
    let out = command
        .output()
        .with_context(|| format!("cannot start {what}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("{what} failed ({}):\n{}", out.status, tail.join("\n"));
    }
    Ok(stdout)
}
