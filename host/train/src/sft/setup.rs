//! Building an [`SftTrainer`]: join the ranks, resolve the model, tokenise
//! the data sets, load the policy worker with its optimizer (the RL side's,
//! distributed by `strategy`), and resume from a checkpoint when
//! `resume_from` names one.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use skyrl_model::{LoadOptions, Tokenizer};
use tch::Kind;
use tracing::info;

use super::data::load_examples;
use super::schedule::StepSchedule;
use super::{SftConfig, SftTrainer};
use crate::checkpoint;
use crate::dataset::expand_home;
use crate::dist::{Dist, RankPlan};
use crate::model_setup::resolve_model_dir;
use crate::workers::{PolicySettings, PolicyWorker};

impl SftConfig {
    /// Where Hugging Face exports go: `export_path`, else
    /// `ckpt_path/hf_exports`, else `~/exports/` (as skyrl 0.3.0).
    pub fn export_root(&self) -> PathBuf {
        match (self.export_path.is_empty(), self.ckpt_path.is_empty()) {
            (false, _) => expand_home(&self.export_path),
            (true, false) => expand_home(&self.ckpt_path).join("hf_exports"),
            (true, true) => expand_home("~/exports/"),
        }
    }

    /// The checkpoint root, when checkpoints are on (`ckpt_path` set).
    pub fn ckpt_root(&self) -> Option<PathBuf> {
        (!self.ckpt_path.is_empty()).then(|| expand_home(&self.ckpt_path))
    }

    /// The model's name in cache keys: its path, or its random-init spec.
    fn model_id(&self) -> String {
        match (&self.model.path, &self.model.init) {
            (Some(p), _) => p.clone(),
            (None, init) => format!("init:{}", serde_json::to_string(init).unwrap_or_default()),
        }
    }
}

impl SftTrainer {
    /// Sets up the run on this rank (every rank of a launched run calls it).
    pub fn new(cfg: SftConfig) -> Result<Self> {
        let strategy = cfg.parsed_strategy().map_err(anyhow::Error::msg)?;
        let dist = Arc::new(Dist::join(&RankPlan {
            nodes: cfg.placement.num_nodes,
            gpus_per_node: cfg.placement.num_gpus_per_node,
            nodes_key: "placement.num_nodes",
            gpus_key: "placement.num_gpus_per_node",
            timeout_s: cfg.dist_timeout_s,
        })?);
        let init_dir = cfg.export_root().join("init_model");
        let model_dir = dist.main_first(|| resolve_model_dir(&cfg.model, &init_dir, cfg.seed))?;
        let tokenizer = Tokenizer::from_dir(&model_dir)?;
        if !tokenizer.has_chat_template() {
            bail!(
                "the model's tokenizer ({}) has no chat template, which SFT on chat data needs",
                model_dir.display()
            );
        }
        let model_id = cfg.model_id();
        // Rank 0 tokenises first (and fills the cache the others then read).
        let train = dist.main_first(|| {
            load_examples(
                &cfg,
                &cfg.dataset_name,
                &cfg.dataset_split,
                &tokenizer,
                &model_id,
            )
        })?;
        if train.is_empty() {
            bail!(
                "dataset_name `{}` split `{}` has no trainable conversation (each needs an \
                 assistant message last and a loss token left after max_length)",
                cfg.dataset_name,
                cfg.dataset_split
            );
        }
        let eval = match cfg.eval_dataset_name.as_deref().filter(|n| !n.is_empty()) {
            None => None,
            Some(name) => Some(dist.main_first(|| {
                load_examples(&cfg, name, &cfg.eval_dataset_split, &tokenizer, &model_id)
            })?),
        };
        let schedule = StepSchedule::new(&cfg, train.len());
        info!(
            examples = train.len(),
            steps_per_epoch = schedule.steps_per_epoch,
            num_steps = schedule.num_steps,
            "SFT schedule"
        );
        let options = LoadOptions {
            device: dist.device(),
            kind: if cfg.bf16 {
                Kind::BFloat16
            } else {
                Kind::Float
            },
        };
        let settings = PolicySettings {
            strategy,
            gradient_checkpointing: cfg.gradient_checkpointing,
            offload_optimizer: cfg.optimizer_config.offload_after_step,
            total_steps: schedule.num_steps as usize,
            logprob_chunk_positions: None,
        };
        let policy = PolicyWorker::load(
            &model_dir,
            &options,
            &cfg.optimizer_config,
            settings,
            dist.clone(),
            cfg.model.lora.spec(cfg.model.path.as_deref(), cfg.seed)?,
        )?;
        let mut trainer = Self {
            cfg,
            dist,
            policy,
            tokenizer,
            train,
            eval,
            schedule,
            global_step: 0,
            resumed_from: None,
            total_tokens: 0.0,
        };
        trainer.maybe_resume()?;
        Ok(trainer)
    }

    /// Restores the checkpoint `resume_from` selects: `""` none, `latest`
    /// (under `ckpt_path`, none when there is none yet) or a directory.
    fn maybe_resume(&mut self) -> Result<()> {
        let from = self.cfg.resume_from.as_str();
        let dir = match (from, self.cfg.ckpt_root()) {
            ("", _) | ("latest", None) => None,
            ("latest", Some(root)) => checkpoint::resolve_resume(&root, Some("latest"), None)?,
            (path, root) => {
                let root = root.unwrap_or_default();
                let path = expand_home(path).display().to_string();
                checkpoint::resolve_resume(&root, Some("from_path"), Some(&path))?
            }
        };
        let Some(dir) = dir else {
            return Ok(());
        };
        let ck = checkpoint::load_checkpoint(&dir)?;
        self.policy
            .restore(ck.model, ck.optimizer)
            .with_context(|| format!("cannot restore the policy from {}", dir.display()))?;
        self.global_step = ck.state.global_step;
        info!(dir = %dir.display(), step = self.global_step, "resumed");
        self.resumed_from = Some(dir);
        Ok(())
    }
}
