//! The reference role: a frozen copy of the initial policy whose logprobs
//! anchor the KL term (`use_kl_loss`, `use_kl_in_reward`).

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
    /// Loads the reference from `dir` and freezes it.
    pub fn load(dir: &Path, options: &LoadOptions) -> Result<Self> {
        let mut model = CausalLm::from_pretrained(dir, options)
            .with_context(|| format!("cannot load the reference model from {}", dir.display()))?;
        model.var_store_mut().freeze();
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
}
