//! Getting trained weights into the inference engines after each step:
//! an in-process copy (colocated), a safetensors checkpoint every server
//! reloads ([`checkpoint`]), or an NCCL broadcast ([`nccl`]), each in the
//! servers' control protocol (SGLang-style or vLLM).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use skyrl_model::{CausalLm, Tokenizer};
use tokio::runtime::Handle;

use crate::placement::WeightSyncBackend;
use crate::{EngineBackend, RolloutEngine};

pub mod checkpoint;
pub mod nccl;

pub use checkpoint::CheckpointSync;
pub use nccl::NcclSender;

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
