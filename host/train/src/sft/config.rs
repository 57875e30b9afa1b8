//! `skyrl sft`'s configuration tree ([`SftConfig`]): skyrl 0.3.0's `SFTConfig`
//! keys that this trainer honours, with 0.3.0's defaults unless
//! docs/config.md says otherwise, plus a few of this project's own
//! (`model.init`, `bf16`, `gradient_checkpointing`, `log_path`,
//! `dist_timeout_s`). The 0.3.0 keys it cannot honour never reach this type:
//! [`super::unsupported`] accepts them at 0.3.0's default and refuses them by
//! name otherwise.

use serde::{Deserialize, Serialize};

use crate::config::{LoggerNames, ModelConfig, OptimizerConfig};

/// Which tokens the loss covers (skyrl 0.3.0's `TrainOnWhat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrainOnWhat {
    /// Only the final assistant message (and what the template writes after it).
    #[default]
    LastAssistantMessage,
    /// Every assistant message, each from its first generated token to its EOS.
    AllAssistantMessages,
}

impl TrainOnWhat {
    /// The name as written in the config.
    pub fn name(self) -> &'static str {
        match self {
            Self::LastAssistantMessage => "last_assistant_message",
            Self::AllAssistantMessages => "all_assistant_messages",
        }
    }
}

/// `placement.*`: the ranks of the run (skyrl 0.3.0's `SFTPlacementConfig`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftPlacementConfig {
    pub num_nodes: usize,
    /// Ranks per node; 0.3.0's default is 4, here 1 (one process).
    pub num_gpus_per_node: usize,
}

impl Default for SftPlacementConfig {
    fn default() -> Self {
        Self {
            num_nodes: 1,
            num_gpus_per_node: 1,
        }
    }
}

/// The root of an SFT config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftConfig {
    /// `path` (a model directory or a hub name in the local cache) or `init`.
    pub model: ModelConfig,
    pub optimizer_config: OptimizerConfig,
    pub placement: SftPlacementConfig,
    /// `fsdp` (`fsdp2` accepted with a warning, as 0.3.0) or `ddp`; `megatron` is refused.
    pub strategy: String,
    /// A data file, glob, folder or Hugging Face data set (as `data.train_data` entries).
    pub dataset_name: String,
    /// `NAME` or `NAME[start:end]` (rows `start..end` of the split).
    pub dataset_split: String,
    pub messages_key: String,
    /// Column of per-row tool schemas (`""` or null: none).
    pub tools_key: Option<String>,
    /// Column of a per-row system prompt (`""` or null: none).
    pub system_key: Option<String>,
    pub eval_dataset_name: Option<String>,
    pub eval_dataset_split: String,
    /// Evaluate every N steps; 0 disables the periodic evaluation.
    pub eval_interval: i64,
    pub eval_before_train: bool,
    /// Truncate tokenised conversations to this many tokens (null: none).
    pub max_length: Option<usize>,
    pub num_steps: Option<usize>,
    pub num_epochs: Option<usize>,
    /// Conversations per optimizer step (all ranks together).
    pub batch_size: usize,
    /// Conversations per forward/backward on one rank.
    pub micro_train_batch_size_per_gpu: usize,
    pub logger: LoggerNames,
    pub project_name: String,
    pub run_name: String,
    /// Checkpoint root; `""` disables checkpoints.
    pub ckpt_path: String,
    /// Save every N steps (<= 0: only at the end, when `ckpt_path` is set).
    pub ckpt_interval: i64,
    /// Log this rank's training-state memory (`memory/*`) every step.
    pub enable_ray_gpu_monitor: bool,
    pub max_ckpts_to_keep: i64,
    /// `""`: start fresh; `latest`; or a `global_step_N` checkpoint directory.
    pub resume_from: String,
    /// Export in Hugging Face layout every N steps and at the end (<= 0: never).
    pub hf_save_interval: i64,
    /// Export root; `""`: `ckpt_path/hf_exports`, else `~/exports/`.
    pub export_path: String,
    pub seed: u64,
    /// Threads tokenising the data set (0: the calling thread).
    pub num_workers: usize,
    /// `random` (reshuffled every epoch) or `sequential`.
    pub sampler: String,
    /// Where tokenised data sets are cached.
    pub cache_dir: String,
    pub force_recache: bool,
    pub disable_cache: bool,
    pub train_on_what: TrainOnWhat,
    /// Pad each micro-batch only to its own longest conversation.
    pub remove_microbatch_padding: bool,
    /// Stop after this many steps whatever `num_steps` / `num_epochs` say.
    pub max_training_steps: Option<usize>,
    /// bf16 parameters and activations (fp32 optimizer state); `false`: fp32.
    pub bf16: bool,
    /// Recompute each decoder layer in the backward.
    pub gradient_checkpointing: bool,
    /// `metrics.jsonl`, TensorBoard files and tracker run ids.
    pub log_path: String,
    /// Seconds a collective or the rendezvous may wait for another rank.
    pub dist_timeout_s: f64,
}

/// 0.3.0's default `cache_dir`: `$XDG_CACHE_HOME/skyrl/tokenized_datasets`,
/// else `~/.cache/skyrl/tokenized_datasets`.
fn default_cache_dir() -> String {
    match std::env::var("XDG_CACHE_HOME") {
        Ok(x) if !x.is_empty() => format!("{x}/skyrl/tokenized_datasets"),
        _ => "~/.cache/skyrl/tokenized_datasets".into(),
    }
}

impl Default for SftConfig {
    fn default() -> Self {
        Self {
            model: ModelConfig {
                path: Some("Qwen/Qwen3-0.6B".into()),
                ..ModelConfig::default()
            },
            optimizer_config: OptimizerConfig::default(),
            placement: SftPlacementConfig::default(),
            strategy: "fsdp".into(),
            dataset_name: "yahma/alpaca-cleaned".into(),
            dataset_split: "train[:100]".into(),
            messages_key: "messages".into(),
            tools_key: Some("tools".into()),
            system_key: Some("system".into()),
            eval_dataset_name: None,
            eval_dataset_split: "validation".into(),
            eval_interval: 0,
            eval_before_train: false,
            max_length: None,
            num_steps: None,
            num_epochs: Some(1),
            batch_size: 4,
            micro_train_batch_size_per_gpu: 2,
            logger: LoggerNames(vec!["console".into()]),
            project_name: "skyrl_sft".into(),
            run_name: "skyrl_sft_run".into(),
            ckpt_path: String::new(),
            ckpt_interval: 0,
            enable_ray_gpu_monitor: true,
            max_ckpts_to_keep: -1,
            resume_from: String::new(),
            hf_save_interval: 0,
            export_path: String::new(),
            seed: 42,
            num_workers: 8,
            sampler: "random".into(),
            cache_dir: default_cache_dir(),
            force_recache: false,
            disable_cache: false,
            train_on_what: TrainOnWhat::LastAssistantMessage,
            remove_microbatch_padding: true,
            max_training_steps: None,
            bf16: true,
            gradient_checkpointing: true,
            log_path: "/tmp/skyrl-logs".into(),
            dist_timeout_s: 1800.0,
        }
    }
}

impl SftConfig {
    /// The column of per-row tool schemas, if any.
    pub fn tools_column(&self) -> Option<&str> {
        self.tools_key.as_deref().filter(|k| !k.is_empty())
    }

    /// The column of a per-row system prompt, if any.
    pub fn system_column(&self) -> Option<&str> {
        self.system_key.as_deref().filter(|k| !k.is_empty())
    }

    /// Ranks the placement plans for.
    pub fn planned_ranks(&self) -> usize {
        self.placement.num_nodes * self.placement.num_gpus_per_node
    }
}
