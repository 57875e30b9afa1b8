//! Loading an SFT config with the RL config's machinery (YAML file, dotted
//! overrides, unknown keys refused by full path): then skyrl 0.3.0's
//! `num_epochs` / `num_steps` exclusion and `use_sample_packing` alias, the
//! unsupported keys ([`super::unsupported`]) and validation.

use std::path::Path;

use super::config::SftConfig;
use super::split::SplitSpec;
use super::unsupported::{get_path, set_path, take_path, take_unsupported};
use crate::config::{parse_tree, read_config_file, ConfigError, ConfigTree, Strategy};

/// Loads `path` (YAML) and applies `overrides` (`key.sub=value`); validates.
pub fn load_sft_config(
    path: Option<&Path>,
    overrides: &[String],
) -> Result<SftConfig, ConfigError> {
    let (text, origin) = read_config_file(path)?;
    load_sft_config_str(&text, &origin, overrides)
}

/// Like [`load_sft_config`] from YAML text; `origin` names it in errors.
pub fn load_sft_config_str(
    yaml: &str,
    origin: &str,
    overrides: &[String],
) -> Result<SftConfig, ConfigError> {
    let mut tree = parse_tree(yaml, origin, overrides)?;
    refuse_epochs_and_steps(&tree)?;
    rename_sample_packing(&mut tree)?;
    take_unsupported(&mut tree)?;
    let mut cfg: SftConfig = tree.deserialize()?;
    if cfg.model.path.is_none() && cfg.model.init.is_none() {
        // Only some model keys given (`model.lora.rank`): keep 0.3.0's default model.
        cfg.model.path = SftConfig::default().model.path;
    }
    cfg.validate().map_err(ConfigError::Invalid)?;
    Ok(cfg)
}

/// 0.3.0: "Cannot specify both num_epochs and num_steps".
fn refuse_epochs_and_steps(tree: &ConfigTree) -> Result<(), ConfigError> {
    let set = |k: &str| get_path(&tree.root, k).is_some_and(|v| !v.is_null());
    if set("num_epochs") && set("num_steps") {
        return Err(ConfigError::Key {
            path: "num_steps".into(),
            origin: tree.origin_of("num_steps"),
            message: format!(
                "cannot specify both num_epochs{} and num_steps (as skyrl 0.3.0)",
                tree.origin_of("num_epochs")
            ),
        });
    }
    Ok(())
}

/// 0.3.0's deprecated `use_sample_packing` is `remove_microbatch_padding`.
fn rename_sample_packing(tree: &mut ConfigTree) -> Result<(), ConfigError> {
    let Some(v) = take_path(&mut tree.root, "use_sample_packing") else {
        return Ok(());
    };
    if get_path(&tree.root, "remove_microbatch_padding").is_some() {
        return Err(ConfigError::Key {
            path: "use_sample_packing".into(),
            origin: tree.origin_of("use_sample_packing"),
            message: "specify only one of use_sample_packing (deprecated) and \
                      remove_microbatch_padding"
                .into(),
        });
    }
    tracing::warn!("use_sample_packing has been renamed to remove_microbatch_padding");
    set_path(&mut tree.root, "remove_microbatch_padding", v);
    Ok(())
}

impl SftConfig {
    /// The strategy; `fsdp2` is 0.3.0's deprecated name of `fsdp`.
    pub fn parsed_strategy(&self) -> Result<Strategy, String> {
        match self.strategy.as_str() {
            "megatron" => Err(
                "strategy=megatron is not supported: use fsdp (optimizer state and \
                               gradients sharded over the ranks) or ddp (replicated)"
                    .into(),
            ),
            "fsdp2" => {
                tracing::warn!("strategy `fsdp2` has been renamed to `fsdp`");
                Ok(Strategy::Sharded)
            }
            other => Strategy::parse(other).map_err(|m| m.replace("trainer.strategy", "strategy")),
        }
    }

    /// Static checks (skyrl 0.3.0's `validate_sft_cfg` and its batch checks);
    /// every problem is reported, each naming its key.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut e = Vec::new();
        if let Err(m) = self.parsed_strategy() {
            e.push(m);
        }
        if let Err(m) = crate::tracking::parse_trackers(&self.logger.0) {
            e.push(m.replace("trainer.logger", "logger"));
        }
        let m = &self.model;
        match (&m.path, &m.init) {
            (None, None) => e.push("model: set `path` (or `init`)".into()),
            (Some(_), Some(_)) => e.push("model: set only one of `path` and `init`".into()),
            _ => {}
        }
        e.extend(self.optimizer_config.problems("optimizer_config"));
        e.extend(m.lora.problems("model.lora"));
        if m.lora.enabled() && m.lora.dropout > 0.0 && self.gradient_checkpointing {
            e.push(format!(
                "model.lora.dropout ({}) with gradient_checkpointing=true: the recomputed layers \
                 would draw other dropout masks; set dropout to 0 or gradient_checkpointing to false",
                m.lora.dropout
            ));
        }
        for (k, v) in [
            ("batch_size", self.batch_size),
            (
                "micro_train_batch_size_per_gpu",
                self.micro_train_batch_size_per_gpu,
            ),
            ("placement.num_nodes", self.placement.num_nodes),
            (
                "placement.num_gpus_per_node",
                self.placement.num_gpus_per_node,
            ),
        ] {
            if v == 0 {
                e.push(format!("{k} must be > 0"));
            }
        }
        for (k, v) in [
            ("num_steps", self.num_steps),
            ("num_epochs", self.num_epochs),
            ("max_training_steps", self.max_training_steps),
            ("max_length", self.max_length),
        ] {
            if v == Some(0) {
                e.push(format!("{k} must be > 0"));
            }
        }
        if self.num_steps.is_none() && self.num_epochs.is_none() {
            e.push("one of num_steps or num_epochs must be set".into());
        }
        let dp = self.planned_ranks();
        if dp > 0 && self.micro_train_batch_size_per_gpu > 0 {
            if !self.batch_size.is_multiple_of(dp) {
                e.push(format!(
                    "batch_size ({}) must be divisible by the data-parallel size ({dp}: \
                     placement.num_nodes x placement.num_gpus_per_node)",
                    self.batch_size
                ));
            } else if !(self.batch_size / dp).is_multiple_of(self.micro_train_batch_size_per_gpu) {
                e.push(format!(
                    "batch_size ({}) / data-parallel size ({dp}: placement.num_nodes x \
                     placement.num_gpus_per_node) must be divisible by \
                     micro_train_batch_size_per_gpu ({})",
                    self.batch_size, self.micro_train_batch_size_per_gpu
                ));
            }
        }
        match self.sampler.as_str() {
            "random" | "sequential" => {}
            "custom" => e.push(
                "sampler=custom is not supported (custom Python samplers); use random or sequential"
                    .into(),
            ),
            other => e.push(format!(
                "sampler `{other}` is unknown; use random or sequential"
            )),
        }
        if let Err(m) = SplitSpec::parse(&self.dataset_split) {
            e.push(format!("dataset_split {m}"));
        }
        if let Err(m) = SplitSpec::parse(&self.eval_dataset_split) {
            e.push(format!("eval_dataset_split {m}"));
        }
        if self.messages_key.is_empty() {
            e.push("messages_key must not be empty".into());
        }
        if self.eval_interval < 0 {
            e.push(format!(
                "eval_interval must be >= 0, got {}",
                self.eval_interval
            ));
        }
        let has_eval = self
            .eval_dataset_name
            .as_deref()
            .is_some_and(|n| !n.is_empty());
        if self.eval_interval > 0 && !has_eval {
            e.push("eval_interval > 0 requires eval_dataset_name to be set".into());
        }
        if self.eval_before_train && !has_eval {
            e.push("eval_before_train=true requires eval_dataset_name to be set".into());
        }
        if self.max_ckpts_to_keep == 0 || self.max_ckpts_to_keep < -1 {
            e.push("max_ckpts_to_keep must be positive or -1 (keep all)".into());
        }
        if self.dist_timeout_s.is_nan() || self.dist_timeout_s <= 0.0 {
            e.push("dist_timeout_s must be > 0".into());
        }
        match e.is_empty() {
            true => Ok(()),
            false => Err(e),
        }
    }
}
