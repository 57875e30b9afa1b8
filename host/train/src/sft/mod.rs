//! Supervised fine-tuning on chat data (`skyrl sft`, skyrl 0.3.0's
//! `main_sft`), built from the RL side's pieces: the policy worker (model,
//! AdamW with the lr schedule, gradient sync over the ranks by `strategy`),
//! checkpoints, Hugging Face export and trackers.
//!
//! Submodules: [`config`] (the `SftConfig` tree), `load` (loading it with
//! the RL config's loader), [`unsupported`] (0.3.0 keys accepted only at
//! their defaults), [`split`] (`dataset_split`), [`tokenize`] (loss masks
//! as 0.3.0's `tokenize_chat_example`), `data` and `cache` (reading and
//! caching tokenised data sets), [`collate`] (batches as training tensors),
//! `schedule` (which rows each step trains on), `setup` and `run` (the loop).

mod cache;
pub mod collate;
pub mod config;
mod data;
mod load;
mod run;
mod schedule;
mod setup;
pub mod split;
pub mod tokenize;
pub mod unsupported;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use skyrl_model::{CausalLm, Tokenizer};

pub use config::{SftConfig, SftPlacementConfig, TrainOnWhat};
pub use data::load_examples;
pub use load::{load_sft_config, load_sft_config_str};
pub use schedule::StepSchedule;
pub use tokenize::{tokenize_row, SftExample, TokenizeOptions};

use crate::dist::Dist;
use crate::metrics::StepMetrics;
use crate::workers::PolicyWorker;

/// Options outside the config.
#[derive(Debug, Clone, Default)]
pub struct SftOptions {
    /// Stop after this many steps in this invocation (the run can resume).
    pub max_steps: Option<u64>,
}

/// What a run did (on this rank; rank 0 wrote the files).
#[derive(Debug, Clone)]
pub struct SftSummary {
    pub rank: usize,
    pub start_step: u64,
    pub final_step: u64,
    pub resumed_from: Option<PathBuf>,
    /// `(step, metrics)` of every step of this invocation.
    pub steps: Vec<(u64, StepMetrics)>,
    /// `(step, eval loss)` of every evaluation.
    pub evals: Vec<(u64, f64)>,
    pub metrics_path: PathBuf,
    pub last_checkpoint: Option<PathBuf>,
    /// The last Hugging Face export (`.../global_step_N/policy`).
    pub last_export: Option<PathBuf>,
    pub wall_seconds: f64,
}

impl SftSummary {
    /// `train/loss` of every step, in order.
    pub fn losses(&self) -> Vec<f64> {
        self.steps.iter().map(|(_, m)| m["train/loss"]).collect()
    }
}

/// The trainer: the policy worker, the tokenised data and where it is.
pub struct SftTrainer {
    cfg: SftConfig,
    dist: Arc<Dist>,
    policy: PolicyWorker,
    tokenizer: Tokenizer,
    train: Vec<SftExample>,
    eval: Option<Vec<SftExample>>,
    schedule: StepSchedule,
    global_step: u64,
    resumed_from: Option<PathBuf>,
    /// Tokens trained on in this invocation.
    total_tokens: f64,
}

impl SftTrainer {
    /// The model being trained.
    pub fn model(&self) -> &CausalLm {
        self.policy.model()
    }

    /// Steps completed.
    pub fn global_step(&self) -> u64 {
        self.global_step
    }

    /// The run's steps and their rows.
    pub fn schedule(&self) -> &StepSchedule {
        &self.schedule
    }

    /// The tokenised training conversations.
    pub fn train_examples(&self) -> &[SftExample] {
        &self.train
    }
}

/// Sets up and runs SFT; with several ranks an error names the rank.
pub fn train_sft(cfg: SftConfig, opts: &SftOptions) -> Result<SftSummary> {
    let run = || SftTrainer::new(cfg)?.run(opts);
    match Dist::launch_label() {
        Some(label) => run().context(label),
        None => run(),
    }
}
