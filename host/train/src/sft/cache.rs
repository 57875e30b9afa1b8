//! The tokenised-data-set cache (`cache_dir`, `force_recache`,
//! `disable_cache`): one JSON file per data set, keyed like skyrl 0.3.0's
//! (data set, split, model, `max_length`, `messages_key`, `train_on_what`,
//! `tools_key`, `system_key`) plus the size and modification time of every
//! data file read, so an edited file is tokenised again.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::tokenize::SftExample;

/// What a cached data set depends on.
pub struct CacheKey<'a> {
    pub dataset: &'a str,
    pub split: &'a str,
    pub model: &'a str,
    pub max_length: Option<usize>,
    pub messages_key: &'a str,
    pub train_on_what: &'a str,
    pub tools_key: Option<&'a str>,
    pub system_key: Option<&'a str>,
    pub files: &'a [PathBuf],
}

impl CacheKey<'_> {
    /// The cache file of this key under `dir`.
    pub fn path(&self, dir: &Path) -> Result<PathBuf> {
        let mut files = Vec::new();
        for f in self.files {
            let meta =
                std::fs::metadata(f).with_context(|| format!("cannot stat {}", f.display()))?;
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos().to_string());
            files.push(json!([f.display().to_string(), meta.len(), mtime]));
        }
        let key = json!({
            "dataset": self.dataset,
            "split": self.split,
            "model": self.model,
            "max_length": self.max_length,
            "messages_key": self.messages_key,
            "train_on_what": self.train_on_what,
            "tools_key": self.tools_key,
            "system_key": self.system_key,
            "files": files,
        });
        let digest = Sha256::digest(key.to_string().as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        Ok(dir.join(format!("{hex}.json")))
    }
}

/// The cached examples at `path`, if a readable cache file is there.
pub fn load(path: &Path) -> Option<Vec<SftExample>> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(path = %path.display(), "ignoring an unreadable tokenised cache: {e}");
            None
        }
    }
}

/// Writes `examples` to `path` (atomically: a temporary file renamed).
pub fn save(path: &Path, examples: &[SftExample]) -> Result<()> {
    let dir = path.parent().context("a cache file has a folder")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec(examples)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
