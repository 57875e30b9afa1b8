//! Replace a directory atomically: write a temporary sibling, then rename it over.

use std::path::{Path, PathBuf};

use crate::error::{ModelError, Result};

/// Files a model save rewrites; everything else in an existing directory is kept.
fn is_model_file(name: &str) -> bool {
    name == "config.json" || (name.starts_with("model") && name.contains(".safetensors"))
}

/// Runs `write` on a fresh temporary directory next to `dir`, then moves it to `dir`.
/// Non-model files already in `dir` (tokenizer, generation config, ...) are copied
/// into the temporary directory first, unless `write` replaces them. On error `dir`
/// is untouched and the temporary directory is removed.
pub fn write_dir_atomically(dir: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| ModelError::io(&parent, e))?;
    let name = dir
        .file_name()
        .ok_or_else(|| ModelError::Input(format!("{}: not a directory name", dir.display())))?
        .to_string_lossy()
        .to_string();
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}.tmp-"))
        .tempdir_in(&parent)
        .map_err(|e| ModelError::io(&parent, e))?;
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir).map_err(|e| ModelError::io(dir, e))? {
            let entry = entry.map_err(|e| ModelError::io(dir, e))?;
            let file_name = entry.file_name().to_string_lossy().to_string();
            if entry.path().is_file() && !is_model_file(&file_name) {
                let dest = tmp.path().join(&file_name);
                std::fs::copy(entry.path(), &dest).map_err(|e| ModelError::io(&dest, e))?;
            }
        }
    }
    write(tmp.path())?;
    let tmp_path = tmp.keep();
    if dir.exists() {
        let old = parent.join(format!(".{name}.old-{}", std::process::id()));
        if old.exists() {
            std::fs::remove_dir_all(&old).map_err(|e| ModelError::io(&old, e))?;
        }
        std::fs::rename(dir, &old).map_err(|e| ModelError::io(dir, e))?;
        if let Err(e) = std::fs::rename(&tmp_path, dir) {
            // Put the previous version back before reporting.
            let _ = std::fs::rename(&old, dir);
            return Err(ModelError::io(dir, e));
        }
        std::fs::remove_dir_all(&old).map_err(|e| ModelError::io(&old, e))?;
    } else {
        std::fs::rename(&tmp_path, dir).map_err(|e| ModelError::io(dir, e))?;
    }
    Ok(())
}
