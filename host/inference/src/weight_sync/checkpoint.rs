//! Checkpoint-and-load weight sync: safetensors written where every server
//! can read them, then pause, a reload from that directory
//! (`/update_weights_from_disk`, or vLLM's `/collective_rpc reload_weights`),
//! resume.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use skyrl_model::{CausalLm, Tokenizer};
use tokio::runtime::Handle;
use tracing::{info, warn};

use super::SyncReport;
use crate::remote::RemoteEngines;

/// Checkpoint-and-load: each sync writes `dir/v<N>` (safetensors + config +
/// tokenizer, atomically), pauses every server, has it reload, resumes, and
/// removes the previous version.
pub struct CheckpointSync {
    dir: PathBuf,
    version: u64,
    previous: Option<PathBuf>,
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

impl CheckpointSync {
    /// Syncs through `dir` (every server must be able to read it).
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            version: 0,
            previous: None,
        }
    }

    pub(super) fn sync(
        &mut self,
        policy: &CausalLm,
        tokenizer: &Tokenizer,
        client: &RemoteEngines,
        rt: &Handle,
    ) -> Result<SyncReport> {
        self.version += 1;
        let path = self.dir.join(format!("v{}", self.version));
        skyrl_model::save_checkpoint(policy, Some(tokenizer), &path).with_context(|| {
            format!("cannot write the weight-sync checkpoint {}", path.display())
        })?;
        let bytes = dir_bytes(&path);
        let versions = rt.block_on(async {
            client.pause().await?;
            let updated = client.update_weights_from_disk(&path).await;
            // Resume even when the update failed, so the servers stay usable.
            let resumed = client.resume().await;
            let versions = updated?;
            resumed?;
            anyhow::Ok(versions)
        });
        let versions = versions.with_context(|| {
            format!(
                "servers could not load the weights from {} (the path must be readable by every \
                 server: set generator.inference_engine.weight_sync_path to a shared directory)",
                path.display()
            )
        })?;
        if let Some(old) = self.previous.replace(path.clone()) {
            if let Err(e) = std::fs::remove_dir_all(&old) {
                warn!(
                    "cannot remove the old weight-sync checkpoint {}: {e}",
                    old.display()
                );
            }
        }
        info!(path = %path.display(), bytes, "weights synced through a checkpoint");
        Ok(SyncReport {
            seconds: 0.0,
            bytes,
            versions,
        })
    }
}
