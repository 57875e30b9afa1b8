//! Building a [`Trainer`]: refuse what it cannot do, load data, the policy
//! and reference workers, start the rollout engines the placement asks for,
//! wire the generator (rubric, custom generator plugin) and resume from a
//! checkpoint when `trainer.resume_mode` selects one.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use skyrl_inference::placement::{self, InferencePlan, Placement};
use skyrl_inference::startup::{seconds, start_engines, PolicySource};
use skyrl_inference::weight_sync::{SyncReport, WeightSync};
use skyrl_inference::RolloutEngine;
use skyrl_model::{LoadOptions, Tokenizer};
use skyrl_rollout::custom_generator::CustomGenerator;
use skyrl_rollout::rubric::Rubric;
use skyrl_rollout::{Generator, PluginSet};
use tch::Kind;
use tracing::{info, warn};

use super::{TrainOptions, Trainer, CRITIC_GROUP, CRITIC_OPTIMIZER_GROUP, REF_GROUP};
use crate::algorithms::{
    register_algorithm_plugins, AdvantageEstimatorRegistry, KlController, PolicyLossRegistry,
};
use crate::checkpoint;
use crate::config::{SkyrlConfig, TrainingMode};
use crate::dataset::{expand_home, DataPosition, EpochSampler, PromptDataset};
use crate::dist::Dist;
use crate::model_setup::resolve_model_dir;
use crate::workers::{CriticSpec, CriticWorker, PolicySettings, PolicyWorker, RefWorker, Strategy};

/// Fails clearly on configuration this trainer does not implement with
/// `world` ranks (rather than silently ignoring it), before any work. Batch
/// sizes that do not split evenly over the ranks are refused when the config
/// is loaded (`validate`, with the data-parallel size).
fn reject_unsupported(cfg: &SkyrlConfig, world: usize) -> Result<()> {
    let t = &cfg.trainer;
    let g = &cfg.generator;
    let mut e: Vec<&str> = Vec::new();
    if t.trains_critic() {
        let p = &t.placement;
        if (p.critic_num_nodes, p.critic_num_gpus_per_node)
            != (p.policy_num_nodes, p.policy_num_gpus_per_node)
        {
            e.push("trainer.placement.critic_num_nodes / critic_num_gpus_per_node must equal policy_num_nodes / policy_num_gpus_per_node: the critic runs on the policy's ranks");
        }
        if g.step_wise_trajectories {
            e.push("a critic (trainer.algorithm.advantage_estimator=gae, or plugin:NAME with trainer.critic.model) is not supported with generator.step_wise_trajectories");
        }
    }
    if t.algorithm.dynamic_sampling.kind.is_some() {
        if t.training_mode != TrainingMode::Sync {
            e.push("trainer.algorithm.dynamic_sampling needs trainer.training_mode=sync");
        }
        if g.step_wise_trajectories {
            e.push("trainer.algorithm.dynamic_sampling is not supported with generator.step_wise_trajectories");
        }
        if g.n_samples_per_prompt < 2 {
            e.push("trainer.algorithm.dynamic_sampling needs generator.n_samples_per_prompt >= 2: it keeps or replaces prompt groups by their reward variance");
        }
    }
    if g.step_wise_trajectories && t.algorithm.use_kl_in_reward {
        e.push("generator.step_wise_trajectories with trainer.algorithm.use_kl_in_reward is not supported (use use_kl_loss)");
    }
    let p = &t.placement;
    let uses_ref = t.algorithm.use_kl_loss || t.algorithm.use_kl_in_reward;
    if uses_ref && !p.colocate_policy_ref {
        e.push("trainer.placement.colocate_policy_ref=false is not supported: the reference runs on the policy's ranks");
    }
    if uses_ref
        && (p.ref_num_nodes, p.ref_num_gpus_per_node)
            != (p.policy_num_nodes, p.policy_num_gpus_per_node)
    {
        e.push("trainer.placement.ref_num_nodes / ref_num_gpus_per_node must equal policy_num_nodes / policy_num_gpus_per_node: the reference runs on the policy's ranks");
    }
    if world > 1 && g.step_wise_trajectories {
        e.push("generator.step_wise_trajectories is not supported with several ranks yet (each rank would train a different number of steps); run it on one process");
    }
    if world > 1 && t.training_mode == TrainingMode::FullyAsync {
        e.push("trainer.training_mode=fully_async is not supported with several ranks yet (ranks would train on different groups); use sync or one_step_off");
    }
    if e.is_empty() {
        Ok(())
    } else {
        bail!("unsupported configuration:\n  - {}", e.join("\n  - "))
    }
}

/// This rank's part of the engine fleet: launched servers and external
/// urls are split between the ranks; a colocated engine is per rank anyway.
fn rank_placement(placement: Placement, dist: &Dist) -> Result<Placement> {
    let (r, w) = (dist.rank(), dist.world());
    Ok(match placement {
        Placement::LocalServers { num_engines } if w > 1 => {
            if !num_engines.is_multiple_of(w) {
                bail!(
                    "generator.inference_engine.num_engines ({num_engines}) must be a multiple of \
                     the number of ranks ({w}): each rank starts and drives its share"
                );
            }
            Placement::LocalServers {
                num_engines: num_engines / w,
            }
        }
        Placement::External { urls } if w > 1 => {
            if urls.len() < w {
                bail!(
                    "generator.inference_engine.remote_urls lists {} servers for {w} ranks; \
                     each rank needs at least one (servers are split between the ranks)",
                    urls.len()
                );
            }
            Placement::External {
                urls: urls.into_iter().skip(r).step_by(w).collect(),
            }
        }
        p => p,
    })
}

/// Every dataset row's env class must have a plugin.
fn check_env_classes(cfg: &SkyrlConfig, data: &PromptDataset, envs: &PluginSet) -> Result<()> {
    for row in &data.rows {
        let class = row
            .env_class
            .clone()
            .unwrap_or_else(|| cfg.environment.env_class.clone());
        if !envs.classes().contains(&class) {
            bail!(
                "{}: env class `{class}` has no plugin (registered: {:?}); pass --plugin {class}=PATH",
                row.origin,
                envs.classes()
            );
        }
    }
    Ok(())
}

/// Where a random initial model is written when no `model.path` is given.
fn init_dir(cfg: &SkyrlConfig) -> PathBuf {
    expand_home(&cfg.trainer.export_path).join("init_model")
}

/// Drops the rows whose prompt, chat-templated with the generation prompt,
/// is longer than `trainer.max_prompt_length` tokens (skyrl-train's
/// PromptDataset filter), saying how many went.
fn drop_long_prompts(
    mut data: PromptDataset,
    tokenizer: &Tokenizer,
    max_prompt_length: usize,
    split: &str,
) -> Result<PromptDataset> {
    let before = data.len();
    let mut keep = Vec::with_capacity(before);
    for row in data.rows {
        let len = tokenizer
            .encode_chat(&row.prompt, true)
            .with_context(|| format!("{}: cannot apply the chat template", row.origin))?
            .len();
        if len <= max_prompt_length {
            keep.push(row);
        }
    }
    data.rows = keep;
    let dropped = before - data.len();
    if dropped > 0 {
        warn!(
            "{split} data: dropped {dropped} of {before} prompts longer than trainer.max_prompt_length ({max_prompt_length}) tokens"
        );
    }
    Ok(data)
}

/// The role workers and where the policy came from.
struct Roles {
    policy: PolicyWorker,
    reference: Option<RefWorker>,
    critic: Option<CriticWorker>,
    policy_dir: PathBuf,
}

/// Loads the policy (with its optimizer, distributed by `strategy`) and the
/// reference, in bf16 when `trainer.bf16`, on this rank's device.
fn load_roles(
    cfg: &SkyrlConfig,
    strategy: Strategy,
    dist: &Arc<Dist>,
    total_steps: usize,
    policy_dir: PathBuf,
) -> Result<Roles> {
    let t = &cfg.trainer;
    let init_dir = init_dir(cfg);
    let options = LoadOptions {
        device: dist.device(),
        kind: if t.bf16 { Kind::BFloat16 } else { Kind::Float },
    };
    let chunk_positions = t.logprobs_chunk_size.map(|c| c as i64);
    let settings = PolicySettings {
        strategy,
        gradient_checkpointing: t.gradient_checkpointing,
        offload_optimizer: t.policy.optimizer_config.offload_after_step,
        total_steps,
        logprob_chunk_positions: chunk_positions,
    };
    let opt_cfg = &t.policy.optimizer_config;
    let base = t.policy.model.path.as_deref();
    let lora = t.policy.model.lora.spec(base, t.seed)?;
    let policy = PolicyWorker::load(&policy_dir, &options, opt_cfg, settings, dist.clone(), lora)?;
    let reference = if t.algorithm.use_kl_loss || t.algorithm.use_kl_in_reward {
        let ref_dir =
            dist.main_first(|| resolve_model_dir(&t.reference.model, &init_dir, t.seed))?;
        Some(RefWorker::load(&ref_dir, &options, chunk_positions)?)
    } else {
        None
    };
    // The critic (gae, or a plugin estimator with critic.model): its own
    // model, or the policy's with a fresh value head.
    let critic = if t.trains_critic() {
        let c = &t.critic.model;
        let dir = match c.path.is_some() || c.init.is_some() {
            true => dist.main_first(|| {
                resolve_model_dir(c, &init_dir.with_file_name("init_critic"), t.seed)
            })?,
            false => policy_dir.clone(),
        };
        let vocab = policy.model().config().vocab_size;
        let opt = &t.critic.optimizer_config;
        let lora = t
            .critic
            .model
            .lora
            .spec(c.path.as_deref().or(base), t.seed)?;
        Some(CriticWorker::load(
            &dir,
            &options,
            opt,
            total_steps,
            CriticSpec {
                vocab_size: vocab,
                lora,
                seed: t.seed,
            },
            dist.clone(),
        )?)
    } else {
        None
    };
    Ok(Roles {
        policy,
        reference,
        critic,
        policy_dir,
    })
}

/// The generator (rubric, custom generator plugin) and this rank's engines,
/// started and ready.
fn start_rollouts(
    cfg: &SkyrlConfig,
    envs: PluginSet,
    roles: &Roles,
    plan: &InferencePlan,
    dist: &Dist,
    opts: &TrainOptions,
    tokenizer: &Arc<Tokenizer>,
) -> Result<(Generator, Arc<RolloutEngine>)> {
    let ie = &cfg.generator.inference_engine;
    let mut generator = Generator::new(envs, cfg.environment.skyrl_gym.max_env_workers)?;
    if let Some(r) = &cfg.environment.reward_rubric {
        generator.set_rubric(Rubric::new(r, generator.envs.rewards())?);
    }
    let sync_dir = (ie.weight_sync_backend == "checkpoint").then(|| weight_sync_dir(cfg, dist));
    let source = PolicySource {
        model: roles.policy.model(),
        dir: &roles.policy_dir,
        engine_program: opts.engine_program.as_deref(),
        weight_sync_dir: sync_dir.as_deref(),
    };
    let placement = rank_placement(plan.placement.clone(), dist)?;
    let rollout = Arc::new(start_engines(&placement, ie, &source)?);
    if let Some(plugin) = generator.envs.generator().cloned() {
        let c = &cfg.generator.custom_generator;
        generator.set_custom(CustomGenerator::new(
            plugin,
            c.config.clone(),
            c.timeout_s,
            rollout.clone(),
            tokenizer.clone(),
        )?)?;
    }
    if let Some(source) = cfg
        .generator
        .chat_template
        .resolve()
        .map_err(anyhow::Error::msg)?
    {
        let template = tokenizer
            .compile_chat_template(&source)
            .context("generator.chat_template.name_or_path")?;
        generator.set_chat_template(template)?;
    }
    if let Some(client) = rollout.remote_client() {
        let wait = seconds(ie.engine_startup_timeout_s);
        generator.runtime().block_on(client.wait_ready(wait))?;
    }
    Ok((generator, rollout))
}

/// Where checkpoint weight syncs go (one folder per rank with several).
fn weight_sync_dir(cfg: &SkyrlConfig, dist: &Dist) -> PathBuf {
    let dir = match &cfg.generator.inference_engine.weight_sync_path {
        Some(p) => expand_home(p),
        None => expand_home(&cfg.trainer.export_path).join("weight_sync"),
    };
    if dist.world() > 1 {
        dir.join(format!("rank{}", dist.rank()))
    } else {
        dir
    }
}

impl Trainer {
    /// Loads data and models, creates the optimiser, and resumes when a
    /// checkpoint is selected by `trainer.resume_mode`.
    pub fn new(cfg: SkyrlConfig, envs: PluginSet) -> Result<Self> {
        Self::with_options(cfg, envs, &TrainOptions::default())
    }

    /// [`Trainer::new`] with the options that affect setup (the engine program).
    pub fn with_options(cfg: SkyrlConfig, envs: PluginSet, opts: &TrainOptions) -> Result<Self> {
        reject_unsupported(&cfg, Dist::launched_world()?)?;
        let plan = placement::plan(
            cfg.trainer.placement.colocate_all,
            &cfg.generator.inference_engine,
        )?;
        let mut adv_registry = AdvantageEstimatorRegistry::with_defaults();
        let mut loss_registry = PolicyLossRegistry::with_defaults();
        register_algorithm_plugins(
            envs.algorithms(),
            &cfg.trainer.algorithm,
            &mut adv_registry,
            &mut loss_registry,
        )?;
        cfg.validate_names(&adv_registry, &loss_registry)?;
        let t = &cfg.trainer;
        let strategy = Strategy::parse(&t.strategy).map_err(anyhow::Error::msg)?;
        let dist = Arc::new(Dist::from_env(&cfg)?);
        // Rank 0 writes a random init first; the others then find it.
        let policy_dir =
            dist.main_first(|| resolve_model_dir(&t.policy.model, &init_dir(&cfg), t.seed))?;
        let tokenizer = Arc::new(Tokenizer::from_dir(&policy_dir)?);
        let max_len = t.max_prompt_length;
        let train_data = match opts.eval_only {
            true => PromptDataset::default(),
            false => drop_long_prompts(
                PromptDataset::load(&cfg.data.train_data)?,
                &tokenizer,
                max_len,
                "train",
            )?,
        };
        let val_data = drop_long_prompts(
            PromptDataset::load(&cfg.data.val_data)?,
            &tokenizer,
            max_len,
            "validation",
        )?;
        // An evaluation-only run never draws a batch.
        let rows = match opts.eval_only {
            true => t.train_batch_size,
            false => train_data.len(),
        };
        let sampler = EpochSampler::new(rows, t.train_batch_size, t.seed, t.epochs, true)?;
        check_env_classes(&cfg, &train_data, &envs)?;
        let mut roles = load_roles(&cfg, strategy, &dist, sampler.total_batches(), policy_dir)?;
        roles.policy.set_losses(loss_registry);
        let (generator, rollout) =
            start_rollouts(&cfg, envs, &roles, &plan, &dist, opts, &tokenizer)?;
        let weight_sync = WeightSync::new(plan.weight_sync, weight_sync_dir(&cfg, &dist));
        let kl_ctrl = if t.algorithm.use_kl_in_reward {
            Some(KlController::from_config(&t.algorithm)?)
        } else {
            None
        };
        let mut trainer = Self {
            cfg,
            dist,
            policy: roles.policy,
            reference: roles.reference,
            critic: roles.critic,
            rollout,
            weight_sync,
            tokenizer,
            batches_taken: 0,
            trained_pos: DataPosition::default(),
            generator: Arc::new(generator),
            train_data,
            val_data,
            sampler,
            adv_registry,
            global_step: 0,
            resumed_from: None,
            kl_ctrl,
            engine_stats_seen: Default::default(),
            progress: super::Progress::hidden(),
            eval_only: false,
        };
        trainer.maybe_resume()?;
        trainer.trained_pos = trainer.sampler.position();
        trainer.batches_taken = trainer.global_step;
        // A resumed policy, or separate engines (which may serve other
        // weights), need the policy's weights before the first rollout.
        if trainer.resumed_from.is_some() || trainer.rollout.remote_client().is_some() {
            trainer.sync_weights()?;
        }
        Ok(trainer)
    }

    /// Restores the checkpoint `trainer.resume_mode` selects, if any.
    fn maybe_resume(&mut self) -> Result<()> {
        let t = &self.cfg.trainer;
        let Some(dir) = checkpoint::resolve_resume(
            &self.ckpt_root(),
            t.resume_mode.as_deref(),
            t.resume_path.as_deref(),
        )?
        else {
            return Ok(());
        };
        let mut ck = checkpoint::load_checkpoint(&dir)?;
        self.policy
            .restore(ck.model, ck.optimizer)
            .with_context(|| format!("cannot restore the policy from {}", dir.display()))?;
        self.sampler.restore(ck.state.data_position)?;
        if let Some(c) = self.critic.as_mut() {
            let weights = ck.extra.remove(CRITIC_GROUP);
            let optimizer = ck.extra.remove(CRITIC_OPTIMIZER_GROUP);
            let (Some(w), Some(o)) = (weights, optimizer) else {
                bail!("checkpoint {} has no critic (extra/{CRITIC_GROUP}.safetensors); it was not saved by a gae run", dir.display());
            };
            c.restore(w, o)
                .with_context(|| format!("cannot restore the critic from {}", dir.display()))?;
        }
        if let (Some(r), Some(weights)) = (self.reference.as_mut(), ck.extra.remove(REF_GROUP)) {
            r.restore(weights)
                .with_context(|| format!("cannot restore the reference from {}", dir.display()))?;
            info!("restored the reference updated at the last epoch end");
        }
        self.global_step = ck.state.global_step;
        if let (Some(ctrl), Some(v)) = (self.kl_ctrl.as_mut(), ck.state.kl_ctrl_value) {
            match ctrl {
                KlController::Fixed { value } | KlController::Adaptive { value, .. } => *value = v,
            }
        }
        info!(dir = %dir.display(), step = self.global_step, "resumed");
        self.resumed_from = Some(dir);
        Ok(())
    }

    /// Makes the inference engines serve the policy's current weights.
    pub(super) fn sync_weights(&mut self) -> Result<SyncReport> {
        let rt = self.generator.runtime();
        self.weight_sync
            .sync(
                self.policy.model(),
                &self.tokenizer,
                &self.rollout,
                self.global_step,
                &rt,
            )
            .context("weight sync to the inference engines failed")
    }
}
