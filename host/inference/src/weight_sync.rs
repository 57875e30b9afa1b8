//! Getting trained weights into the inference engines after each step:
//! an in-process copy (colocated), a safetensors checkpoint every server
//! reloads (`/update_weights_from_disk`), or an NCCL broadcast.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use skyrl_model::{CausalLm, Tokenizer};
use tokio::runtime::Handle;
use tracing::{info, warn};

use crate::nccl::NcclSender;
use crate::placement::WeightSyncBackend;
use crate::remote::RemoteEngines;
use crate::{EngineBackend, RolloutEngine};

/// What one sync did.
#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    pub seconds: f64,
    /// Bytes written or sent (0 for the in-process copy).
    pub bytes: u64,
    /// The engines' weight versions afterwards (remote engines).
    pub versions: Vec<Option<u64>>,
}

/// The configured strategy with its state.
pub enum WeightSync {
    Colocated,
    Checkpoint(CheckpointSync),
    Nccl(Option<NcclSender>),
}

impl WeightSync {
    /// The strategy for `backend`; checkpoints go under `dir`.
    pub fn new(backend: WeightSyncBackend, dir: PathBuf) -> Self {
        match backend {
            WeightSyncBackend::Colocated => WeightSync::Colocated,
            WeightSyncBackend::Checkpoint => WeightSync::Checkpoint(CheckpointSync::new(dir)),
            WeightSyncBackend::Nccl => WeightSync::Nccl(None),
        }
    }

    /// Makes `engine` serve `policy`'s current weights, as policy `version`.
    pub fn sync(
        &mut self,
        policy: &CausalLm,
        tokenizer: &Tokenizer,
        engine: &RolloutEngine,
        version: u64,
        rt: &Handle,
    ) -> Result<SyncReport> {
        let start = Instant::now();
        let mut report = match (self, engine.backend()) {
            (WeightSync::Colocated, EngineBackend::Local(e)) => {
                // Waits for the current batch, if any; the version changes with the weights.
                let mut guard = e.blocking_lock();
                guard.model_mut().copy_weights_from(policy)?;
                engine.set_version(version);
                SyncReport::default()
            }
            (WeightSync::Checkpoint(c), EngineBackend::Remote { client, .. }) => {
                c.sync(policy, tokenizer, client, rt)?
            }
            (WeightSync::Nccl(sender), EngineBackend::Remote { client, .. }) => {
                if sender.is_none() {
                    *sender = Some(rt.block_on(NcclSender::connect(client, policy))?);
                }
                let s = sender.as_ref().expect("connected above");
                rt.block_on(s.sync(client, policy))?
            }
            _ => bail!("this weight sync backend does not fit the engine placement"),
        };
        // Remote servers may already serve the new weights: the recorded
        // version stays a lower bound until here.
        engine.set_version(version);
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }
}

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

    fn sync(
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
