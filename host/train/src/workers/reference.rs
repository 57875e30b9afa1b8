//! The reference role: a frozen copy of the initial policy whose logprobs
//! anchor the KL term (`use_kl_loss`, `use_kl_in_reward`); with
//! `trainer.update_ref_every_epoch` it becomes a copy of the policy after each
//! epoch but the last.

use std::path::Path;

use anyhow::{Context, Result};
use skyrl_model::{CausalLm, LoadOptions};
use tch::Tensor;

use super::forward::logprobs_all;
use crate::batch::TrainingBatch;

/// Owns the frozen reference model.
pub struct RefWorker {
    model: CausalLm,
}

impl RefWorker {
    /// Loads the reference from `dir` and freezes it; its LM head runs in
    /// chunks of `chunk_positions` sequence positions when given.
    pub fn load(dir: &Path, options: &LoadOptions, chunk_positions: Option<i64>) -> Result<Self> {
        let mut model = CausalLm::from_pretrained(dir, options)
            .with_context(|| format!("cannot load the reference model from {}", dir.display()))?;
        model.var_store_mut().freeze();
        model.set_logprob_chunk_positions(chunk_positions);
        Ok(Self { model })
    }

    /// No-grad response logprobs `[N, R]` of every row of `batch`.
    pub fn logprobs(&self, batch: &TrainingBatch, micro: i64, temperature: f64) -> Result<Tensor> {
        logprobs_all(&self.model, batch, micro, temperature)
    }

    /// The reference model.
    pub fn model(&self) -> &CausalLm {
        &self.model
    }

    /// Makes the reference a copy of `policy`'s current weights.
    pub fn copy_from(&mut self, policy: &CausalLm) -> Result<()> {
        self.model
            .copy_weights_from(policy)
            .context("cannot copy the policy into the reference")
    }

    /// The reference weights (for checkpoints), sharing storage with the model.
    pub fn weights(&self) -> Vec<(String, Tensor)> {
        self.model.named_parameters()
    }

    /// Restores weights saved by [`RefWorker::weights`].
    pub fn restore(&mut self, weights: Vec<(String, Tensor)>) -> Result<()> {
        super::policy::load_params(&self.model, weights)
    }
}
