//! The policy's part in writing a resumable checkpoint, on every rank
//! together: rank 0 prepares the staging directory, writes the weights, the
//! trainer state, a whole optimizer state and the caller's extra groups (and,
//! with LoRA, the adapter in PEFT's format under `lora_adapter/`), and
//! commits; with a sharded optimizer every rank writes its shard in between.

use std::path::{Path, PathBuf};

use anyhow::Result;
use tch::Tensor;

use super::{OptimizerState, PolicyWorker};
use crate::checkpoint::{self, CheckpointData, TrainerState};

impl PolicyWorker {
    /// Writes checkpoint `state.global_step` under `root` (collective: every
    /// rank calls it), keeping the newest `keep` (`-1`: all). `extra` groups
    /// (e.g. a critic) are written by rank 0. Returns the checkpoint directory.
    pub fn save_checkpoint(
        &self,
        root: &Path,
        state: &TrainerState,
        extra: &[(&str, &[(String, Tensor)])],
        keep: i64,
    ) -> Result<PathBuf> {
        let step = state.global_step;
        let staging = checkpoint::staging_dir(root, step);
        if self.dist.is_main() {
            checkpoint::prepare_staging(root, step)?;
        }
        self.dist.barrier()?;
        let (model, optimizer) = self.checkpoint_state();
        let full = match optimizer {
            OptimizerState::Full(state) => state,
            OptimizerState::Shard { layout, shard } => {
                checkpoint::write_optimizer_shard(&staging, self.dist.rank(), &layout, &shard)?;
                Vec::new()
            }
        };
        self.dist.barrier()?;
        if self.dist.is_main() {
            let data = CheckpointData {
                model: &model,
                optimizer: &full,
                extra,
                state,
            };
            checkpoint::write_staged(&staging, &data)?;
            if let Some(lora) = self.model.lora() {
                // The adapter alone, in PEFT's format, where skyrl-train puts it.
                lora.save_peft(&staging.join(skyrl_model::LORA_ADAPTER_DIR))?;
            }
            checkpoint::commit_staged(root, &staging, step, keep)?;
        }
        self.dist.barrier()?;
        Ok(checkpoint::step_dir(root, step))
    }
}
