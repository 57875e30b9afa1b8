//! Typed configuration tree mirroring skyrl-train's (`data`, `trainer`,
//! `generator`, `environment`), with skyrl's defaults. Every struct rejects
//! unknown keys so typos fail loudly. The `generator` and `environment`
//! sections are owned by skyrl-rollout (and `generator.inference_engine` by
//! skyrl-inference) and re-exported here, so the tree reads as one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use skyrl_inference::InferenceEngineConfig;
pub use skyrl_rollout::config::{
    ChatTemplateConfig, CustomGeneratorConfig, DirGrant, EnvironmentConfig, GeneratorConfig,
    PluginSandboxConfig, RubricComponent, RubricConfig, SamplingParams, SkyrlGymConfig,
};

/// Root of the configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct SkyrlConfig {
    pub data: DataConfig,
    pub trainer: TrainerConfig,
    pub generator: GeneratorConfig,
    pub environment: EnvironmentConfig,
}

/// `data.*`: dataset files (JSONL or Parquet in skyrl's schema), globs,
/// directories or Hugging Face data sets (`dataset::sources`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataConfig {
    pub train_data: Vec<String>,
    pub val_data: Vec<String>,
}

impl Default for DataConfig {
    fn default() -> Self {
        Self {
            train_data: vec!["~/data/gsm8k/train.parquet".into()],
            val_data: vec!["~/data/gsm8k/validation.parquet".into()],
        }
    }
}

/// `trainer.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainerConfig {
    pub placement: PlacementConfig,
    /// `fsdp2` / `fsdp` (optimizer state and gradients sharded over the
    /// ranks, ZeRO-2), `ddp` (replicated, gradients all-reduced); `tch` is
    /// the old name of `ddp`. One process: the same update either way.
    pub strategy: String,
    /// Seconds a collective or the rendezvous may wait for another rank.
    pub dist_timeout_s: f64,
    pub policy: PolicyConfig,
    #[serde(rename = "ref")]
    pub reference: RefConfig,
    pub critic: CriticConfig,
    pub algorithm: AlgorithmConfig,
    /// `sync`, `one_step_off` or `fully_async` (see `trainer.fully_async`).
    pub training_mode: TrainingMode,
    pub fully_async: FullyAsyncConfig,
    pub gradient_checkpointing: bool,
    pub seed: u64,
    /// `none`, `latest` or `from_path`.
    pub resume_mode: Option<String>,
    pub resume_path: Option<String>,
    pub log_path: String,
    pub ckpt_path: String,
    /// -1 keeps all checkpoints.
    pub max_ckpts_to_keep: i64,
    pub ckpt_interval: i64,
    pub hf_save_interval: i64,
    pub export_path: String,
    pub bf16: bool,
    pub epochs: usize,
    pub update_epochs_per_batch: usize,
    pub train_batch_size: usize,
    pub policy_mini_batch_size: usize,
    pub critic_mini_batch_size: usize,
    pub micro_train_batch_size_per_gpu: usize,
    pub micro_forward_batch_size_per_gpu: usize,
    /// Sequence positions per chunk of the LM head's log-softmax (skyrl
    /// 0.3.0); null: chosen by memory.
    pub logprobs_chunk_size: Option<usize>,
    pub update_ref_every_epoch: bool,
    pub use_sample_packing: bool,
    pub eval_batch_size: usize,
    pub eval_before_train: bool,
    /// -1 disables evaluation.
    pub eval_interval: i64,
    pub max_prompt_length: usize,
    pub flash_attn: bool,
    pub project_name: String,
    pub run_name: String,
    /// Experiment trackers: one name or a list of `console`, `tensorboard`,
    /// `mlflow`, `wandb` (`metrics.jsonl` is always written).
    pub logger: LoggerNames,
    pub dump_data_batch: bool,
    pub dump_eval_results: bool,
}

impl TrainerConfig {
    /// Whether the run trains a critic: always with `advantage_estimator:
    /// gae` (its own model, or the policy's backbone with a value head), and
    /// with an algorithm plugin's estimator (`plugin:NAME`) when
    /// `critic.model` is set (skyrl: a critic exists iff its model is given),
    /// which then receives the values.
    pub fn trains_critic(&self) -> bool {
        let estimator = &self.algorithm.advantage_estimator;
        let critic_model = self.critic.model.path.is_some() || self.critic.model.init.is_some();
        estimator == "gae" || (estimator.starts_with("plugin:") && critic_model)
    }
}

impl Default for TrainerConfig {
    fn default() -> Self {
        Self {
            placement: PlacementConfig::default(),
            strategy: "fsdp2".into(),
            dist_timeout_s: 1800.0,
            policy: PolicyConfig::default(),
            reference: RefConfig::default(),
            critic: CriticConfig::default(),
            algorithm: AlgorithmConfig::default(),
            training_mode: TrainingMode::Sync,
            fully_async: FullyAsyncConfig::default(),
            gradient_checkpointing: true,
            seed: 42,
            resume_mode: Some("latest".into()),
            resume_path: None,
            log_path: "/tmp/skyrl-logs".into(),
            ckpt_path: "~/ckpts/".into(),
            max_ckpts_to_keep: -1,
            ckpt_interval: 10,
            hf_save_interval: -1,
            export_path: "~/exports/".into(),
            bf16: true,
            epochs: 1,
            update_epochs_per_batch: 1,
            train_batch_size: 1024,
            policy_mini_batch_size: 256,
            critic_mini_batch_size: 256,
            micro_train_batch_size_per_gpu: 1,
            micro_forward_batch_size_per_gpu: 1,
            logprobs_chunk_size: None,
            update_ref_every_epoch: false,
            use_sample_packing: true,
            eval_batch_size: 1024,
            eval_before_train: true,
            eval_interval: 5,
            max_prompt_length: 512,
            flash_attn: true,
            project_name: "skyrl".into(),
            run_name: "test_run".into(),
            logger: LoggerNames(vec!["console".into()]),
            dump_data_batch: false,
            dump_eval_results: true,
        }
    }
}

/// `trainer.logger`: one tracker name or a list of them (SkyRL accepts both).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(transparent)]
pub struct LoggerNames(pub Vec<String>);

impl<'de> Deserialize<'de> for LoggerNames {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        Ok(match OneOrMany::deserialize(d)? {
            OneOrMany::One(s) => LoggerNames(vec![s]),
            OneOrMany::Many(v) => LoggerNames(v),
        })
    }
}

/// `trainer.placement.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlacementConfig {
    pub colocate_all: bool,
    pub colocate_policy_ref: bool,
    pub policy_num_nodes: usize,
    pub policy_num_gpus_per_node: usize,
    pub critic_num_nodes: usize,
    pub critic_num_gpus_per_node: usize,
    pub ref_num_nodes: usize,
    pub ref_num_gpus_per_node: usize,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        Self {
            colocate_all: true,
            colocate_policy_ref: true,
            policy_num_nodes: 1,
            policy_num_gpus_per_node: 1,
            critic_num_nodes: 1,
            critic_num_gpus_per_node: 1,
            ref_num_nodes: 1,
            ref_num_gpus_per_node: 1,
        }
    }
}

/// A model: a local path (HF-style directory / safetensors) or a Hugging Face
/// name `org/name[@revision]` in the local hub cache, or a tiny random init.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    pub path: Option<String>,
    /// Random initialisation from an architecture spec instead of `path`.
    pub init: Option<TinyModelSpec>,
    /// LoRA adapters (`rank` 0: full fine-tuning).
    pub lora: LoraConfig,
}

/// `*.model.lora.*`: PEFT-style LoRA (skyrl's `SkyRLLoraConfig`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoraConfig {
    /// Adapter rank; 0 trains every weight.
    pub rank: usize,
    pub alpha: f64,
    pub dropout: f64,
    /// skyrl hands adapters to vLLM through files here; engines here get
    /// merged weights, so only the default is accepted.
    pub lora_sync_path: String,
    /// `all-linear`, a regex the whole module name matches, or a list of names.
    pub target_modules: ModuleNames,
    pub exclude_modules: Option<ModuleNames>,
    /// `kaiming` (PEFT's default) or `gaussian`.
    pub init_method: String,
    /// vLLM multi-LoRA serving (only 1 / null: one adapter, merged).
    pub max_loras: usize,
    pub max_cpu_loras: Option<usize>,
}

/// skyrl's default `lora_sync_path`.
pub const DEFAULT_LORA_SYNC_PATH: &str = "/tmp/skyrl_lora_sync";

impl Default for LoraConfig {
    fn default() -> Self {
        Self {
            rank: 0,
            alpha: 16.0,
            dropout: 0.0,
            lora_sync_path: DEFAULT_LORA_SYNC_PATH.into(),
            target_modules: ModuleNames::One("all-linear".into()),
            exclude_modules: None,
            init_method: "kaiming".into(),
            max_loras: 1,
            max_cpu_loras: None,
        }
    }
}

/// A module selector as PEFT takes it: one string (`all-linear` or a regex)
/// or a list of names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ModuleNames {
    One(String),
    Many(Vec<String>),
}

impl ModuleNames {
    /// The model crate's selector.
    pub fn selector(&self) -> skyrl_model::ModuleSelector {
        use skyrl_model::ModuleSelector;
        match self {
            Self::One(s) if s == "all-linear" => ModuleSelector::AllLinear,
            Self::One(s) => ModuleSelector::Regex(s.clone()),
            Self::Many(v) => ModuleSelector::Names(v.clone()),
        }
    }
}

impl LoraConfig {
    /// Whether adapters are trained instead of every weight.
    pub fn enabled(&self) -> bool {
        self.rank > 0
    }

    /// The adapters' spec for a model at `base` (written into the PEFT
    /// config), drawn from `seed`; `None` without LoRA.
    pub fn spec(
        &self,
        base: Option<&str>,
        seed: u64,
    ) -> anyhow::Result<Option<skyrl_model::LoraSpec>> {
        if !self.enabled() {
            return Ok(None);
        }
        Ok(Some(skyrl_model::LoraSpec {
            rank: self.rank as i64,
            alpha: self.alpha,
            dropout: self.dropout,
            target_modules: self.target_modules.selector(),
            exclude_modules: self.exclude_modules.as_ref().map(ModuleNames::selector),
            init: skyrl_model::LoraInit::parse(&self.init_method)?,
            seed,
            base_model_name_or_path: base.map(str::to_string),
        }))
    }

    /// Problems with these keys under `section` (`trainer.policy.model.lora`),
    /// whether or not LoRA is on (a bad value is a mistake either way).
    pub fn problems(&self, section: &str) -> Vec<String> {
        let mut e: Vec<String> = skyrl_model::lora::scale_problems(self.alpha, self.dropout)
            .into_iter()
            .map(|(key, message)| format!("{section}.{key} {message}"))
            .collect();
        if let Err(err) = skyrl_model::LoraInit::parse(&self.init_method) {
            e.push(format!("{section}.init_method: {err}"));
        }
        if self.lora_sync_path != DEFAULT_LORA_SYNC_PATH {
            e.push(format!(
                "{section}.lora_sync_path is not used: inference engines receive the merged weights \
                 (W + alpha/r·BA) through the weight sync, not adapter files; remove the key"
            ));
        }
        if self.max_loras != 1 || self.max_cpu_loras.is_some() {
            e.push(format!(
                "{section}.max_loras / max_cpu_loras: multi-LoRA serving is not supported \
                 (engines serve the one merged adapter); keep max_loras 1 and max_cpu_loras null"
            ));
        }
        e
    }
}

/// Architecture for a randomly initialised Qwen2-style model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TinyModelSpec {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub max_position_embeddings: usize,
    pub rope_theta: f64,
    pub rms_norm_eps: f64,
    pub tie_word_embeddings: bool,
    /// Tokenizer (a `tokenizer.json` path, or a built-in name understood by the model crate).
    pub tokenizer: Option<String>,
    /// Seed for the weight init (defaults to `trainer.seed` when null).
    pub seed: Option<u64>,
}

impl Default for TinyModelSpec {
    fn default() -> Self {
        Self {
            vocab_size: 256,
            hidden_size: 64,
            intermediate_size: 128,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            max_position_embeddings: 512,
            rope_theta: 10000.0,
            rms_norm_eps: 1e-6,
            tie_word_embeddings: true,
            tokenizer: None,
            seed: None,
        }
    }
}

/// skyrl's default `trainer.policy.model.path`.
pub const DEFAULT_POLICY_MODEL: &str = "Qwen/Qwen2.5-1.5B-Instruct";

/// `trainer.policy.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    pub model: ModelConfig,
    pub optimizer_config: OptimizerConfig,
    pub sequence_parallel_size: usize,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            model: ModelConfig {
                path: Some(DEFAULT_POLICY_MODEL.into()),
                ..ModelConfig::default()
            },
            optimizer_config: OptimizerConfig::default(),
            sequence_parallel_size: 1,
        }
    }
}

/// `trainer.ref.*` (the model path defaults to the policy's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct RefConfig {
    pub model: ModelConfig,
    pub sequence_parallel_size: Option<usize>,
}

/// `trainer.critic.*` (used by `gae`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CriticConfig {
    pub model: ModelConfig,
    pub optimizer_config: OptimizerConfig,
    pub sequence_parallel_size: usize,
}

impl Default for CriticConfig {
    fn default() -> Self {
        Self {
            model: ModelConfig::default(),
            optimizer_config: OptimizerConfig {
                lr: 5e-6,
                ..OptimizerConfig::default()
            },
            sequence_parallel_size: 1,
        }
    }
}

/// `*.optimizer_config.*` — AdamW with a warmup schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OptimizerConfig {
    pub lr: f64,
    pub adam_betas: [f64; 2],
    pub weight_decay: f64,
    pub max_grad_norm: f64,
    pub offload_after_step: bool,
    pub num_warmup_steps: usize,
    /// `constant_with_warmup` or `constant`.
    pub scheduler: String,
    pub adam_eps: f64,
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        Self {
            lr: 1e-6,
            adam_betas: [0.9, 0.999],
            weight_decay: 1e-2,
            max_grad_norm: 1.0,
            offload_after_step: true,
            num_warmup_steps: 0,
            scheduler: "constant_with_warmup".into(),
            adam_eps: 1e-8,
        }
    }
}

/// `trainer.algorithm.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlgorithmConfig {
    /// Registry name: `grpo`, `rloo`, `reinforce++`, `gae`, `maxrl`, or a custom one.
    pub advantage_estimator: String,
    pub kl_ctrl: KlCtrlConfig,
    /// `k1`, `k2`, `k3` or `abs`.
    pub kl_estimator_type: String,
    pub use_kl_in_reward: bool,
    pub use_kl_loss: bool,
    pub kl_loss_coef: f64,
    pub use_entropy_loss: bool,
    pub entropy_loss_coef: f64,
    /// Logit temperature for the policy forward; null = `generator.sampling_params.temperature`.
    pub temperature: Option<f64>,
    pub advantage_batch_normalize: bool,
    /// Name of the critic's value head (skyrl 0.3.0); only `value_head` is supported.
    pub value_head_prefix: String,
    /// Registry name: `regular`, `dual_clip`, `gspo`, `cispo`, `sapo`, `clip_cov`,
    /// `kl_cov`, `cross_entropy`, `rollout_is`, `dppo`, `importance_sampling`, or a custom one.
    pub policy_loss_type: String,
    /// `token_mean`, `token_mean_legacy`, `sequence_mean`, `seq_mean_token_sum_norm`
    /// or `prompt_mean`; applied by scaling the advantages of each mini-batch (skyrl 0.3.0).
    pub loss_reduction: String,
    pub grpo_norm_by_std: bool,
    pub zero_variance_filter: bool,
    /// Rewards within this absolute distance count as equal for `zero_variance_filter`.
    pub zero_variance_filter_tol: f64,
    pub lambd: f64,
    pub gamma: f64,
    pub eps_clip_low: f64,
    pub eps_clip_high: f64,
    pub clip_ratio_c: f64,
    /// Deprecated: use `off_policy_correction.tis_ratio_type: token`.
    pub tis_imp_ratio_cap: f64,
    /// Deprecated: use `off_policy_correction`.
    pub use_tis: bool,
    pub off_policy_correction: OffPolicyCorrectionConfig,
    pub sapo: SapoConfig,
    /// Critic value clip; null disables clipping.
    pub value_clip: Option<f64>,
    pub dynamic_sampling: DynamicSamplingConfig,
    pub clip_cov: ClipCovConfig,
    pub kl_cov: KlCovConfig,
    pub cispo: CispoConfig,
    pub dppo: DppoConfig,
    /// For `seq_mean_token_sum_norm`; null = max_input_length + max_generate_length.
    pub max_seq_len: Option<i64>,
    /// Options for algorithm plugins (`--algorithm NAME=SOURCE`), by NAME:
    /// passed to plugin NAME as `options` in its config JSON.
    pub plugin_options: BTreeMap<String, serde_json::Value>,
}

impl Default for AlgorithmConfig {
    fn default() -> Self {
        Self {
            advantage_estimator: "grpo".into(),
            kl_ctrl: KlCtrlConfig::default(),
            kl_estimator_type: "k3".into(),
            use_kl_in_reward: false,
            use_kl_loss: true,
            kl_loss_coef: 0.001,
            use_entropy_loss: false,
            entropy_loss_coef: 0.01,
            temperature: None,
            advantage_batch_normalize: false,
            value_head_prefix: "value_head".into(),
            policy_loss_type: "regular".into(),
            loss_reduction: "token_mean".into(),
            grpo_norm_by_std: true,
            zero_variance_filter: false,
            zero_variance_filter_tol: 1e-6,
            lambd: 1.0,
            gamma: 1.0,
            eps_clip_low: 0.2,
            eps_clip_high: 0.2,
            clip_ratio_c: 3.0,
            tis_imp_ratio_cap: -1.0,
            use_tis: false,
            off_policy_correction: OffPolicyCorrectionConfig::default(),
            sapo: SapoConfig::default(),
            value_clip: Some(0.2),
            dynamic_sampling: DynamicSamplingConfig::default(),
            clip_cov: ClipCovConfig::default(),
            kl_cov: KlCovConfig::default(),
            cispo: CispoConfig::default(),
            dppo: DppoConfig::default(),
            max_seq_len: None,
            plugin_options: BTreeMap::new(),
        }
    }
}

/// `trainer.algorithm.kl_ctrl.*` (only for `use_kl_in_reward`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KlCtrlConfig {
    /// `fixed` or `adaptive`.
    #[serde(rename = "type")]
    pub kind: String,
    pub kl_target: f64,
    pub horizon: f64,
}

impl Default for KlCtrlConfig {
    fn default() -> Self {
        Self {
            kind: "fixed".into(),
            kl_target: 0.1,
            horizon: 10000.0,
        }
    }
}

/// `trainer.algorithm.off_policy_correction.*` — rollout-vs-trainer mismatch correction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OffPolicyCorrectionConfig {
    /// null, `token` or `sequence`.
    pub tis_ratio_type: Option<String>,
    pub token_tis_ratio_clip_high: f64,
    pub sequence_tis_ratio_clip_high: f64,
    /// null, `product` or `geometric`.
    pub sequence_mask_metric: Option<String>,
    pub geo_mask_high: f64,
    pub geo_mask_low: f64,
    pub product_mask_high: f64,
    pub product_mask_low: f64,
    pub outlier_token_is_threshold_low: Option<f64>,
    pub outlier_token_is_threshold_high: Option<f64>,
    pub token_mask_is_threshold_low: Option<f64>,
    pub token_mask_is_threshold_high: Option<f64>,
}

impl Default for OffPolicyCorrectionConfig {
    fn default() -> Self {
        Self {
            tis_ratio_type: None,
            token_tis_ratio_clip_high: 2.0,
            sequence_tis_ratio_clip_high: 5.0,
            sequence_mask_metric: None,
            geo_mask_high: 1.01,
            geo_mask_low: 0.99,
            product_mask_high: 2.0,
            product_mask_low: 0.5,
            outlier_token_is_threshold_low: None,
            outlier_token_is_threshold_high: None,
            token_mask_is_threshold_low: None,
            token_mask_is_threshold_high: None,
        }
    }
}

/// `trainer.algorithm.sapo.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SapoConfig {
    pub tau_pos: f64,
    pub tau_neg: f64,
}

impl Default for SapoConfig {
    fn default() -> Self {
        Self {
            tau_pos: 1.0,
            tau_neg: 1.05,
        }
    }
}

/// `trainer.algorithm.dynamic_sampling.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DynamicSamplingConfig {
    /// null, `filter` or `replace`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// -1 samples forever.
    pub max_sample_batches: i64,
    pub min_replace_ratio: f64,
}

impl Default for DynamicSamplingConfig {
    fn default() -> Self {
        Self {
            kind: None,
            max_sample_batches: 30,
            min_replace_ratio: 0.3,
        }
    }
}

/// `trainer.algorithm.clip_cov.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClipCovConfig {
    pub clip_ratio: f64,
    pub clip_cov_lb: f64,
    pub clip_cov_ub: f64,
}

impl Default for ClipCovConfig {
    fn default() -> Self {
        Self {
            clip_ratio: 0.0002,
            clip_cov_lb: 1.0,
            clip_cov_ub: 5.0,
        }
    }
}

/// `trainer.algorithm.kl_cov.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KlCovConfig {
    pub kl_cov_frac: f64,
    pub ppo_kl_coef: f64,
}

impl Default for KlCovConfig {
    fn default() -> Self {
        Self {
            kl_cov_frac: 0.2,
            ppo_kl_coef: 1.0,
        }
    }
}

/// `trainer.algorithm.cispo.*`: the IS weight is clipped to `[1 - low, 1 + high]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CispoConfig {
    pub cispo_eps_clip_low: f64,
    pub cispo_eps_clip_high: f64,
}

impl Default for CispoConfig {
    fn default() -> Self {
        Self {
            cispo_eps_clip_low: 1.0,
            cispo_eps_clip_high: 4.0,
        }
    }
}

/// `trainer.algorithm.dppo.*` (policy_loss_type `dppo`, arXiv 2602.04879).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DppoConfig {
    /// `binary_tv` (total variation) or `binary_kl` (Bernoulli KL).
    pub dppo_type: String,
    /// Divergence threshold for tokens with negative advantages.
    pub delta_low: f64,
    /// Divergence threshold for tokens with positive advantages.
    pub delta_high: f64,
}

impl Default for DppoConfig {
    fn default() -> Self {
        Self {
            dppo_type: "binary_tv".into(),
            delta_low: 0.2,
            delta_high: 0.2,
        }
    }
}

/// How generation and training interleave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrainingMode {
    /// Generate a batch, train on it, sync weights, repeat.
    #[default]
    Sync,
    /// Generate batch k+1 while training on batch k (one step stale).
    OneStepOff,
    /// Independent prompt groups generated continuously; bounded staleness,
    /// in-flight weight updates.
    FullyAsync,
}

/// `trainer.fully_async.*`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FullyAsyncConfig {
    pub max_staleness_steps: usize,
    pub num_parallel_generation_workers: usize,
}

impl Default for FullyAsyncConfig {
    fn default() -> Self {
        Self {
            max_staleness_steps: 4,
            num_parallel_generation_workers: 768,
        }
    }
}
