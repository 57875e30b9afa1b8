//! Derived defaults and consistency checks (after skyrl-train's `validate_cfg`
//! and `validate_batch_sizes`).

use super::types::{OptimizerConfig, SamplingParams, SkyrlConfig};

impl OptimizerConfig {
    /// What is wrong with these settings, each naming its key under `section`.
    pub fn problems(&self, section: &str) -> Vec<String> {
        let (k, mut e) = (section, Vec::new());
        if self.lr < 0.0 {
            e.push(format!("{k}.lr must be >= 0"));
        }
        if self.adam_betas.iter().any(|b| !(0.0..1.0).contains(b)) {
            e.push(format!("{k}.adam_betas must be in [0, 1)"));
        }
        if self.weight_decay < 0.0 || self.adam_eps <= 0.0 {
            e.push(format!("{k}.weight_decay must be >= 0 and adam_eps > 0"));
        }
        if let Some(msg) = crate::optim::scheduler_error(&self.scheduler) {
            e.push(format!("{k}.{msg}"));
        }
        e
    }
}

impl SkyrlConfig {
    /// Fills keys whose defaults depend on other keys (skyrl's `__post_init__`s
    /// and YAML interpolations) and migrates deprecated TIS keys.
    pub fn resolve_defaults(&mut self) {
        let t = &mut self.trainer;
        let g = &mut self.generator;
        // Setting only some policy model keys (`model.lora.rank`) keeps skyrl's default path.
        if t.policy.model.path.is_none() && t.policy.model.init.is_none() {
            t.policy.model.path = Some(super::DEFAULT_POLICY_MODEL.into());
        }
        if t.reference.model.path.is_none() && t.reference.model.init.is_none() {
            // The base model: the policy's LoRA adapters are not the reference's.
            t.reference.model.path = t.policy.model.path.clone();
            t.reference.model.init = t.policy.model.init.clone();
        }
        if g.max_input_length.is_none() {
            g.max_input_length = Some(t.max_prompt_length);
        }
        if g.eval_sampling_params.is_none() {
            g.eval_sampling_params = Some(SamplingParams {
                temperature: 0.0,
                max_generate_length: g.sampling_params.max_generate_length,
                ..SamplingParams::default()
            });
        }
        let a = &mut t.algorithm;
        if a.temperature.is_none() {
            a.temperature = Some(g.sampling_params.temperature);
        }
        if a.max_seq_len.is_none() {
            a.max_seq_len = Some(
                (g.max_input_length.unwrap_or(t.max_prompt_length)
                    + g.sampling_params.max_generate_length) as i64,
            );
        }
        if a.use_tis && a.off_policy_correction.tis_ratio_type.is_none() {
            a.off_policy_correction.tis_ratio_type = Some("token".into());
            if a.tis_imp_ratio_cap > 0.0 {
                a.off_policy_correction.token_tis_ratio_clip_high = a.tis_imp_ratio_cap;
            }
        }
    }

    /// Static checks; every problem is reported, each naming its key.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut e = Vec::new();
        let t = &self.trainer;
        let a = &t.algorithm;
        let g = &self.generator;
        let dp = t.placement.policy_num_nodes * t.placement.policy_num_gpus_per_node;

        if let Err(msg) = crate::tracking::parse_trackers(&t.logger.0) {
            e.push(msg);
        }

        // batch sizes
        for (k, v) in [
            ("trainer.train_batch_size", t.train_batch_size),
            ("trainer.policy_mini_batch_size", t.policy_mini_batch_size),
            (
                "trainer.micro_train_batch_size_per_gpu",
                t.micro_train_batch_size_per_gpu,
            ),
            (
                "trainer.micro_forward_batch_size_per_gpu",
                t.micro_forward_batch_size_per_gpu,
            ),
            ("trainer.eval_batch_size", t.eval_batch_size),
            ("trainer.epochs", t.epochs),
            ("trainer.update_epochs_per_batch", t.update_epochs_per_batch),
            ("generator.n_samples_per_prompt", g.n_samples_per_prompt),
            (
                "generator.eval_n_samples_per_prompt",
                g.eval_n_samples_per_prompt,
            ),
            ("generator.max_turns", g.max_turns),
            (
                "generator.sampling_params.max_generate_length",
                g.sampling_params.max_generate_length,
            ),
        ] {
            if v == 0 {
                e.push(format!("{k} must be at least 1"));
            }
        }
        if t.logprobs_chunk_size == Some(0) {
            e.push("trainer.logprobs_chunk_size must be a positive integer or null".into());
        }
        if dp == 0 {
            e.push(
                "trainer.placement.policy_num_nodes * policy_num_gpus_per_node must be at least 1"
                    .into(),
            );
        }
        if t.policy_mini_batch_size > 0 && t.train_batch_size > 0 {
            if t.train_batch_size < t.policy_mini_batch_size {
                e.push(format!(
                    "trainer.train_batch_size ({}) must be >= trainer.policy_mini_batch_size ({})",
                    t.train_batch_size, t.policy_mini_batch_size
                ));
            } else if !t.train_batch_size.is_multiple_of(t.policy_mini_batch_size) {
                e.push(format!(
                    "trainer.train_batch_size ({}) must be divisible by trainer.policy_mini_batch_size ({})",
                    t.train_batch_size, t.policy_mini_batch_size
                ));
            }
        }
        if dp > 0 && t.micro_train_batch_size_per_gpu > 0 {
            let per_gpu = t.policy_mini_batch_size * g.n_samples_per_prompt;
            if !per_gpu.is_multiple_of(dp) {
                e.push(format!(
                    "trainer.policy_mini_batch_size * generator.n_samples_per_prompt ({per_gpu}) must be divisible by the policy data-parallel size ({dp})"
                ));
            } else if !(per_gpu / dp).is_multiple_of(t.micro_train_batch_size_per_gpu) {
                e.push(format!(
                    "policy mini-batch per GPU ({}) must be divisible by trainer.micro_train_batch_size_per_gpu ({})",
                    per_gpu / dp,
                    t.micro_train_batch_size_per_gpu
                ));
            }
        }
        // gae (and a plugin estimator given critic.model) trains a critic.
        let has_critic = t.trains_critic();
        if has_critic
            && t.critic_mini_batch_size > 0
            && !t.train_batch_size.is_multiple_of(t.critic_mini_batch_size)
        {
            e.push(format!(
                "trainer.train_batch_size ({}) must be divisible by trainer.critic_mini_batch_size ({})",
                t.train_batch_size, t.critic_mini_batch_size
            ));
        }
        let critic_rows = t.critic_mini_batch_size * g.n_samples_per_prompt;
        if has_critic && dp > 0 && !critic_rows.is_multiple_of(dp) {
            e.push(format!(
                "trainer.critic_mini_batch_size * generator.n_samples_per_prompt ({critic_rows}) must be divisible by the policy data-parallel size ({dp}): the critic runs on the policy's ranks"
            ));
        }
        if t.policy.model.path.is_some() && t.policy.model.init.is_some() {
            e.push("trainer.policy.model: set only one of `path` and `init`".into());
        }

        // built-in engine arguments
        let ie = &g.inference_engine;
        for (k, v) in [
            ("pipeline_parallel_size", ie.pipeline_parallel_size),
            ("expert_parallel_size", ie.expert_parallel_size),
            ("data_parallel_size", ie.data_parallel_size),
        ] {
            if v != 1 {
                e.push(format!(
                    "generator.inference_engine.{k}={v}: only 1 is supported (more engines: num_engines; \
                     tensor parallelism: tensor_parallel_size)"
                ));
            }
        }
        if ie.enable_http_endpoint {
            e.push("generator.inference_engine.enable_http_endpoint=true is not supported yet: the trainer's engines \
                    are not exposed over HTTP during training (`skyrl serve` serves a model directory)".into());
        }
        if ie.backend == "tch" {
            if !ie.async_engine {
                e.push("generator.inference_engine.async_engine=false: the built-in engine (backend `tch`) is always \
                        asynchronous (continuous batching); remove the key or use backend `vllm`".into());
            }
            if !ie.enforce_eager {
                e.push("generator.inference_engine.enforce_eager=false: the built-in engine (backend `tch`) has no \
                        graph capture; remove the key or use backend `vllm`".into());
            }
            if !matches!(ie.model_dtype.as_str(), "bfloat16" | "auto") {
                e.push(format!(
                    "generator.inference_engine.model_dtype={}: the built-in engine (backend `tch`) runs in the \
                     trainer's dtype (bfloat16 with trainer.bf16, else float32); leave it at bfloat16/auto or use backend `vllm`",
                    ie.model_dtype
                ));
            }
            use skyrl_inference::engine_settings::BUILTIN_ENGINE_KWARGS;
            for k in ie.engine_init_kwargs.keys() {
                if !BUILTIN_ENGINE_KWARGS.contains(&k.as_str()) {
                    e.push(format!(
                        "generator.inference_engine.engine_init_kwargs.{k} is not read by the built-in engine (backend `tch`); it reads {BUILTIN_ENGINE_KWARGS:?}"
                    ));
                }
            }
        }

        // distribution
        if let Err(msg) = super::Strategy::parse(&t.strategy) {
            e.push(msg);
        }
        if t.dist_timeout_s.is_nan() || t.dist_timeout_s <= 0.0 {
            e.push(format!(
                "trainer.dist_timeout_s must be positive, got {}",
                t.dist_timeout_s
            ));
        }

        // LoRA
        e.extend(t.policy.model.lora.problems("trainer.policy.model.lora"));
        e.extend(t.critic.model.lora.problems("trainer.critic.model.lora"));
        if t.critic.model.lora.enabled() && !has_critic {
            e.push("trainer.critic.model.lora is set but no critic is trained".into());
        }
        if t.reference.model.lora != super::LoraConfig::default() {
            e.push(
                "trainer.ref.model.lora: the reference is the frozen base model and takes no \
                 adapters (with policy LoRA, the KL is measured against the base); remove the key"
                    .into(),
            );
        }
        for (section, lora) in [
            ("trainer.policy.model.lora", &t.policy.model.lora),
            ("trainer.critic.model.lora", &t.critic.model.lora),
        ] {
            if lora.enabled() && lora.dropout > 0.0 && t.gradient_checkpointing {
                e.push(format!(
                    "{section}.dropout ({}) with trainer.gradient_checkpointing=true: the recomputed \
                     layers would draw other dropout masks than the forward; set dropout to 0 or \
                     gradient_checkpointing to false",
                    lora.dropout
                ));
            }
        }

        // algorithm
        let critic_model = t.critic.model.path.is_some() || t.critic.model.init.is_some();
        if critic_model && !has_critic {
            e.push(format!(
                "trainer.critic.model is set but trainer.algorithm.advantage_estimator={} trains no critic (use gae, or an algorithm plugin: plugin:NAME)",
                a.advantage_estimator
            ));
        }
        if a.use_kl_loss && a.use_kl_in_reward {
            e.push(
                "trainer.algorithm.use_kl_loss and use_kl_in_reward are mutually exclusive".into(),
            );
        }
        if !matches!(a.kl_estimator_type.as_str(), "k1" | "k2" | "k3" | "abs") {
            e.push(format!(
                "trainer.algorithm.kl_estimator_type `{}` must be k1, k2, k3 or abs",
                a.kl_estimator_type
            ));
        }
        match a.kl_ctrl.kind.as_str() {
            "fixed" => {}
            "adaptive" if a.kl_ctrl.horizon > 0.0 => {}
            "adaptive" => e.push("trainer.algorithm.kl_ctrl.horizon must be > 0".into()),
            other => e.push(format!(
                "trainer.algorithm.kl_ctrl.type `{other}` must be fixed or adaptive"
            )),
        }
        if a.loss_reduction
            .parse::<crate::algorithms::LossReduction>()
            .is_err()
        {
            e.push(format!(
                "trainer.algorithm.loss_reduction `{}` must be token_mean, token_mean_legacy, sequence_mean, seq_mean_token_sum_norm or prompt_mean",
                a.loss_reduction
            ));
        }
        if a.value_head_prefix != "value_head" {
            e.push(format!(
                "trainer.algorithm.value_head_prefix `{}` is not supported: the critic's head is saved as `value_head`",
                a.value_head_prefix
            ));
        }
        if a.zero_variance_filter_tol < 0.0 {
            e.push("trainer.algorithm.zero_variance_filter_tol must be >= 0".into());
        }
        if !matches!(a.dppo.dppo_type.as_str(), "binary_tv" | "binary_kl") {
            e.push(format!(
                "trainer.algorithm.dppo.dppo_type `{}` must be binary_tv or binary_kl",
                a.dppo.dppo_type
            ));
        }
        if a.dppo.delta_low < 0.0 || a.dppo.delta_high < 0.0 {
            e.push("trainer.algorithm.dppo.delta_low and delta_high must be >= 0".into());
        }
        if a.max_seq_len.is_some_and(|m| m <= 0) {
            e.push("trainer.algorithm.max_seq_len must be positive".into());
        }
        for (k, v) in [
            ("eps_clip_low", a.eps_clip_low),
            ("eps_clip_high", a.eps_clip_high),
            ("kl_loss_coef", a.kl_loss_coef),
            ("entropy_loss_coef", a.entropy_loss_coef),
        ] {
            if v < 0.0 {
                e.push(format!("trainer.algorithm.{k} must be >= 0"));
            }
        }
        if a.policy_loss_type == "dual_clip" && a.clip_ratio_c <= 1.0 {
            e.push(format!(
                "trainer.algorithm.clip_ratio_c ({}) must be > 1 for dual_clip",
                a.clip_ratio_c
            ));
        }
        if !(0.0..=1.0).contains(&a.gamma) || !(0.0..=1.0).contains(&a.lambd) {
            e.push("trainer.algorithm.gamma and lambd must be in [0, 1]".into());
        }
        let opc = &a.off_policy_correction;
        if let Some(k) = &opc.tis_ratio_type {
            if !matches!(k.as_str(), "token" | "sequence") {
                e.push(format!(
                    "trainer.algorithm.off_policy_correction.tis_ratio_type `{k}` must be token, sequence or null"
                ));
            }
        }
        if let Some(k) = &opc.sequence_mask_metric {
            if !matches!(k.as_str(), "product" | "geometric") {
                e.push(format!(
                    "trainer.algorithm.off_policy_correction.sequence_mask_metric `{k}` must be product, geometric or null"
                ));
            }
        }
        if opc.token_mask_is_threshold_low.is_some() != opc.token_mask_is_threshold_high.is_some() {
            e.push("trainer.algorithm.off_policy_correction.token_mask_is_threshold_low and token_mask_is_threshold_high must be set together (skyrl applies the token mask only with both)".into());
        }
        let needs_rollout_lp = opc.tis_ratio_type.is_some()
            || opc.sequence_mask_metric.is_some()
            || opc.outlier_token_is_threshold_low.is_some()
            || opc.outlier_token_is_threshold_high.is_some()
            || opc.token_mask_is_threshold_low.is_some()
            || a.policy_loss_type == "rollout_is";
        let correction_on = needs_rollout_lp || a.use_tis;
        if a.policy_loss_type.starts_with("plugin:") && correction_on {
            e.push(format!("trainer.algorithm.off_policy_correction (or use_tis) cannot be combined with policy_loss_type={}: a plugin loss gets the rollout logprobs and applies its own correction", a.policy_loss_type));
        }
        for (key, name) in [
            ("advantage_estimator", &a.advantage_estimator),
            ("policy_loss_type", &a.policy_loss_type),
        ] {
            if name
                .strip_prefix("plugin:")
                .is_some_and(|n| n.trim().is_empty())
            {
                e.push(format!("trainer.algorithm.{key}=plugin: needs a plugin name (plugin:NAME, with --algorithm NAME=SOURCE)"));
            }
        }
        if needs_rollout_lp && g.sampling_params.logprobs.is_none() {
            e.push("rollout correction needs rollout logprobs: set generator.sampling_params.logprobs (e.g. 1)".into());
        }
        if let Some(k) = &a.dynamic_sampling.kind {
            if !matches!(k.as_str(), "filter" | "replace") {
                e.push(format!(
                    "trainer.algorithm.dynamic_sampling.type `{k}` must be filter, replace or null"
                ));
            }
            if !(0.0..=1.0).contains(&a.dynamic_sampling.min_replace_ratio) {
                e.push(
                    "trainer.algorithm.dynamic_sampling.min_replace_ratio must be in [0, 1]".into(),
                );
            }
        }

        // optimizer
        for (k, o) in [
            (
                "trainer.policy.optimizer_config",
                &t.policy.optimizer_config,
            ),
            (
                "trainer.critic.optimizer_config",
                &t.critic.optimizer_config,
            ),
        ] {
            e.extend(o.problems(k));
        }

        // trainer bookkeeping
        match t.resume_mode.as_deref() {
            None | Some("none") | Some("latest") => {}
            Some("from_path") if t.resume_path.is_some() => {}
            Some("from_path") => {
                e.push("trainer.resume_mode=from_path needs trainer.resume_path".into())
            }
            Some(other) => e.push(format!(
                "trainer.resume_mode `{other}` must be none, latest or from_path"
            )),
        }
        if t.eval_interval == 0 || t.eval_interval < -1 {
            e.push("trainer.eval_interval must be positive or -1 (disabled)".into());
        }
        if t.ckpt_interval == 0 || t.ckpt_interval < -1 {
            e.push("trainer.ckpt_interval must be positive or -1 (disabled)".into());
        }
        if t.max_ckpts_to_keep == 0 || t.max_ckpts_to_keep < -1 {
            e.push("trainer.max_ckpts_to_keep must be positive or -1 (keep all)".into());
        }

        // generator
        for (k, s) in [
            ("generator.sampling_params", Some(&g.sampling_params)),
            (
                "generator.eval_sampling_params",
                g.eval_sampling_params.as_ref(),
            ),
        ] {
            let Some(s) = s else { continue };
            if s.temperature < 0.0 {
                e.push(format!("{k}.temperature must be >= 0"));
            }
            if !(0.0 < s.top_p && s.top_p <= 1.0) {
                e.push(format!("{k}.top_p must be in (0, 1]"));
            }
            if !(0.0..=1.0).contains(&s.min_p) {
                e.push(format!("{k}.min_p must be in [0, 1]"));
            }
            if s.top_k == 0 || s.top_k < -1 {
                e.push(format!("{k}.top_k must be positive or -1 (disabled)"));
            }
            if !(s.repetition_penalty > 0.0 && s.repetition_penalty.is_finite()) {
                e.push(format!("{k}.repetition_penalty must be > 0 (1 disables)"));
            }
        }
        match g.chat_template.resolve() {
            Err(err) => e.push(err),
            Ok(None) => {}
            Ok(Some(_)) => {
                // skyrl-train's retokenizing path: the same combinations refused
                let key = "generator.chat_template.name_or_path";
                if !g.use_conversation_multi_turn {
                    e.push(format!("{key} is used only with generator.use_conversation_multi_turn=true (as in skyrl-train, which ignores it otherwise)"));
                }
                if g.step_wise_trajectories {
                    e.push(format!("{key} does not support generator.step_wise_trajectories (as in skyrl-train)"));
                }
                if g.batched {
                    e.push(format!("{key} does not support generator.batched=true (skyrl-train's batched mode uses the model's template)"));
                }
                if g.sampling_params.logprobs.is_some() {
                    e.push(format!("{key} re-tokenizes the chat every turn, so rollout log-probs do not line up with the trained tokens (skyrl-train raises the same): set generator.sampling_params.logprobs=null"));
                }
            }
        }
        if !g.use_conversation_multi_turn && g.step_wise_trajectories {
            e.push("generator.step_wise_trajectories does not support generator.use_conversation_multi_turn=false (as in skyrl-train)".into());
        }
        // skyrl-train's batched mode is single-turn generation in one engine call.
        if g.batched {
            if g.max_turns > 1 {
                e.push("generator.batched=true generates one turn; set generator.max_turns=1 or batched=false".into());
            }
            if !g.chat_template_kwargs.is_empty() {
                e.push("generator.chat_template_kwargs is not compatible with generator.batched=true (as in skyrl-train)".into());
            }
            if g.step_wise_trajectories {
                e.push("generator.step_wise_trajectories does not support generator.batched=true (as in skyrl-train)".into());
            }
            if t.training_mode == crate::config::TrainingMode::FullyAsync {
                e.push("trainer.training_mode=fully_async does not support generator.batched=true (as in skyrl-train)".into());
            }
        }
        if g.sampling_params.temperature == 0.0 {
            e.push("generator.sampling_params.temperature must be > 0 for training (logprobs are temperature-scaled)".into());
        }
        if a.advantage_estimator != "gae"
            && g.n_samples_per_prompt == 1
            && a.advantage_estimator != "reinforce++"
        {
            tracing::warn!(
                "generator.n_samples_per_prompt=1 with {}: group baselines degenerate",
                a.advantage_estimator
            );
        }
        if e.is_empty() {
            Ok(())
        } else {
            Err(e)
        }
    }
}
