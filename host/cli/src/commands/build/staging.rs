//! The staging folder every non-Rust build works in: writing the embedded
//! SDK files, copying the author's sources, and writing the component
//! atomically.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// Writes `text` to `path`, creating its parent folders.
pub fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Copies the plugin folder `from` into `to`, leaving out hidden entries,
/// symlinked folders, built components, the output being written and the
/// names in `skip` (e.g. `node_modules`).
pub fn copy_sources(from: &Path, to: &Path, output: &Path, skip: &[&str]) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    let entries =
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", from.display()))?;
        let name = entry.file_name();
        let name_text = name.to_string_lossy();
        let source = entry.path();
        if name_text.starts_with('.')
            || name_text.ends_with(".wasm")
            || name_text.ends_with(".wasm.partial")
            || name_text.ends_with(".wasm.unverified")
            || skip.contains(&name_text.as_ref())
            || source == output
        {
            continue;
        }
        let kind = entry
            .file_type()
            .with_context(|| format!("cannot read {}", source.display()))?;
        if kind.is_dir() {
            copy_sources(&source, &to.join(&name), output, skip)?;
        } else if kind.is_file() || (kind.is_symlink() && source.is_file()) {
            std::fs::copy(&source, to.join(&name))
                .with_context(|| format!("cannot copy {}", source.display()))?;
        }
    }
    Ok(())
}

/// Where a tool writes the component before [`publish`] moves it to `output`.
pub fn partial_path(output: &Path) -> PathBuf {
    output.with_extension("wasm.partial")
}

/// Moves a finished `partial` component to `output` in one step, so a failed
/// build never leaves a half-written component behind.
pub fn publish(partial: &Path, output: &Path) -> anyhow::Result<()> {
    std::fs::rename(partial, output).with_context(|| format!("cannot write {}", output.display()))
}

/// Writes `component` to `output` atomically.
pub fn write_output(output: &Path, component: &[u8]) -> anyhow::Result<()> {
    let partial = partial_path(output);
    std::fs::write(&partial, component)
        .with_context(|| format!("cannot write {}", partial.display()))?;
    publish(&partial, output)
}
