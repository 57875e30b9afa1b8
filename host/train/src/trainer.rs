//! The GRPO/PPO training loop (skyrl's `RayPPOTrainer.train`, single process):
//! sample a batch, roll out `n_samples_per_prompt` trajectories per prompt,
//! compute advantages, old / reference logprobs, then mini-batched policy updates
//! with gradient accumulation, AdamW, grad clipping and warmup; sync the weights
//! into the inference engine; evaluate, checkpoint and log metrics.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use skyrl_model::{CausalLm, InferenceEngine, LoadOptions, LogprobOptions, Tokenizer};
use tch::{Device, Kind, Tensor};
use tracing::info;

use crate::algorithms::kl::apply_kl_penalty_to_rewards;
use crate::algorithms::loss::{actor_loss, ActorBatch};
use crate::algorithms::masked::masked_mean;
use crate::algorithms::{
    filters, AdvantageEstimatorRegistry, AdvantageInput, AdvantageParams, KlController,
    KlEstimator, LossReduction, PolicyLossRegistry,
};
use crate::checkpoint::{self, CheckpointData, TrainerState};
use crate::config::{SkyrlConfig, TrainingMode};
use crate::dataset::{expand_home, DataPosition, EpochSampler, PromptDataset};
use crate::generator::{
    EnvRegistry, Generator, GeneratorOutput, GeneratorRequest, RolloutParams, ENV_ERROR,
};
use crate::inference::launcher::{LocalServers, ServerLaunch};
use crate::inference::placement::{self, Placement};
use crate::inference::remote::{RemoteEngines, RemoteEnginesConfig};
use crate::inference::weight_sync::{SyncReport, WeightSync};
use crate::inference::RolloutEngine;
use crate::metrics::{plot_reward_curve, MetricsLog, StepMetrics};
use crate::model_setup::resolve_model_dir;

mod pipeline;

/// Options outside the config tree.
#[derive(Debug, Clone, Default)]
pub struct TrainOptions {
    /// Show an indicatif progress bar on stderr.
    pub progress: bool,
    /// Stop after this many steps in this invocation (for tests and resume checks).
    pub max_steps: Option<u64>,
    /// The `skyrl` executable whose `serve` runs the engines of disaggregated
    /// local placement (default: this process's executable when it is `skyrl`).
    pub engine_program: Option<PathBuf>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub start_step: u64,
    pub final_step: u64,
    pub resumed_from: Option<PathBuf>,
    /// Metrics of every step trained in this invocation, in order.
    pub steps: Vec<StepMetrics>,
    /// Eval metrics `(step, metrics)` of this invocation.
    pub evals: Vec<(u64, StepMetrics)>,
    pub metrics_path: PathBuf,
    pub plot_path: Option<PathBuf>,
    pub last_checkpoint: Option<PathBuf>,
    pub wall_seconds: f64,
}

/// Rollout work for one batch of prompts.
struct Work {
    /// Index of the batch in this run's data order (from the run's start).
    batch: u64,
    epoch: usize,
    /// Data position after this batch.
    after: DataPosition,
    requests: Vec<GeneratorRequest>,
    group_ids: Vec<String>,
    seed: u64,
}

/// Generated trajectories ready for a training step.
struct Rollout {
    out: GeneratorOutput,
    group_ids: Vec<String>,
    epoch: usize,
    /// Generation time of this batch (sum over its units when split).
    gen_secs: f64,
    /// How long the trainer waited for these rollouts.
    wait_secs: f64,
}

/// Padded training tensors of one generated batch (rows = trajectories).
struct Batch {
    input_ids: Tensor,
    attention_mask: Tensor,
    /// Prompt width (responses start at this column).
    prompt_len: i64,
    response_mask: Tensor,
    token_rewards: Tensor,
    rollout_logprobs: Tensor,
}

fn pad_id(tokenizer: &Tokenizer, model: &CausalLm) -> i64 {
    tokenizer
        .pad_token_id()
        .or(model.config().pad_token_id)
        .unwrap_or(0)
}

/// Left-pads prompts and right-pads responses (skyrl's layout).
fn build_batch(out: &GeneratorOutput, pad: i64, device: Device) -> Batch {
    let n = out.prompt_token_ids.len();
    let p = out
        .prompt_token_ids
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(1)
        .max(1);
    let r = out
        .response_ids
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(1)
        .max(1);
    let mut ids = Vec::with_capacity(n * (p + r));
    let mut attn = Vec::with_capacity(n * (p + r));
    let mut mask = Vec::with_capacity(n * r);
    let mut rew = Vec::with_capacity(n * r);
    let mut lps = Vec::with_capacity(n * r);
    for i in 0..n {
        let prompt = &out.prompt_token_ids[i];
        let resp = &out.response_ids[i];
        ids.extend(std::iter::repeat_n(pad, p - prompt.len()));
        attn.extend(std::iter::repeat_n(0i64, p - prompt.len()));
        ids.extend_from_slice(prompt);
        attn.extend(std::iter::repeat_n(1i64, prompt.len()));
        ids.extend_from_slice(resp);
        attn.extend(std::iter::repeat_n(1i64, resp.len()));
        ids.extend(std::iter::repeat_n(pad, r - resp.len()));
        attn.extend(std::iter::repeat_n(0i64, r - resp.len()));
        let fill = r - resp.len();
        mask.extend_from_slice(&out.loss_masks[i]);
        mask.extend(std::iter::repeat_n(0f32, fill));
        rew.extend_from_slice(&out.rewards[i]);
        rew.extend(std::iter::repeat_n(0f32, fill));
        lps.extend_from_slice(&out.rollout_logprobs[i]);
        lps.extend(std::iter::repeat_n(0f32, fill));
    }
    let (n, p, r) = (n as i64, p as i64, r as i64);
    let t = |v: &[f32]| Tensor::from_slice(v).view([n, r]).to_device(device);
    Batch {
        input_ids: Tensor::from_slice(&ids).view([n, p + r]).to_device(device),
        attention_mask: Tensor::from_slice(&attn).view([n, p + r]).to_device(device),
        prompt_len: p,
        response_mask: t(&mask),
        token_rewards: t(&rew),
        rollout_logprobs: t(&lps),
    }
}

/// Response-token logprobs `[rows, R]` (and entropy) of `model` on rows `start..start+len`.
fn response_logprobs(
    model: &CausalLm,
    batch: &Batch,
    start: i64,
    len: i64,
    temperature: f64,
    with_entropy: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    let ids = batch.input_ids.narrow(0, start, len);
    let attn = batch.attention_mask.narrow(0, start, len);
    let out = model.forward_logprobs_with(
        &ids,
        &attn,
        &LogprobOptions {
            temperature,
            with_entropy,
        },
    )?;
    let r = batch.response_mask.size()[1];
    let lp = out.logprobs.narrow(1, batch.prompt_len - 1, r);
    let ent = out.entropy.map(|e| e.narrow(1, batch.prompt_len - 1, r));
    Ok((lp, ent))
}

/// No-grad logprobs of all rows in chunks of `micro`.
fn forward_all(model: &CausalLm, batch: &Batch, micro: i64, temperature: f64) -> Result<Tensor> {
    let _g = tch::no_grad_guard();
    let n = batch.input_ids.size()[0];
    let mut parts = Vec::new();
    let mut s = 0;
    while s < n {
        let len = micro.min(n - s);
        parts.push(response_logprobs(model, batch, s, len, temperature, false)?.0);
        s += len;
    }
    Ok(Tensor::cat(&parts, 0))
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// The model's parameters sorted by name.
pub(crate) fn named_params(model: &CausalLm) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = model.var_store().variables().into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn load_params(model: &CausalLm, saved: Vec<(String, Tensor)>) -> Result<()> {
    let vars = model.var_store().variables();
    let _g = tch::no_grad_guard();
    let mut seen = 0;
    for (name, t) in saved {
        let var = vars
            .get(&name)
            .with_context(|| format!("checkpoint has unknown parameter `{name}`"))?;
        if var.size() != t.size() {
            bail!(
                "checkpoint parameter `{name}` has shape {:?}, model has {:?}",
                t.size(),
                var.size()
            );
        }
        var.shallow_clone().f_copy_(&t)?;
        seen += 1;
    }
    if seen != vars.len() {
        bail!(
            "checkpoint holds {seen} parameters, the model has {}",
            vars.len()
        );
    }
    Ok(())
}

/// A reproducible seed for (run seed, step, purpose).
fn derive_seed(seed: u64, step: u64, salt: u64) -> u64 {
    seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xD1B5_4A32_D192_ED03)
}

/// Fails clearly on configuration this single-process trainer does not implement
/// (rather than silently ignoring it).
fn reject_unsupported(cfg: &SkyrlConfig) -> Result<()> {
    let t = &cfg.trainer;
    let g = &cfg.generator;
    let mut e = Vec::new();
    if t.algorithm.advantage_estimator == "gae" {
        e.push("trainer.algorithm.advantage_estimator=gae (a critic) is not supported by this trainer yet");
    }
    if t.algorithm.dynamic_sampling.kind.is_some() {
        e.push("trainer.algorithm.dynamic_sampling.type is not supported by this trainer yet; set it to null");
    }
    if g.step_wise_trajectories && t.algorithm.use_kl_in_reward {
        e.push("generator.step_wise_trajectories with trainer.algorithm.use_kl_in_reward is not supported (use use_kl_loss)");
    }
    if !g.use_conversation_multi_turn {
        e.push("generator.use_conversation_multi_turn=false is not supported yet");
    }
    if t.update_ref_every_epoch {
        e.push("trainer.update_ref_every_epoch is not supported yet");
    }
    if e.is_empty() {
        Ok(())
    } else {
        bail!("unsupported configuration:\n  - {}", e.join("\n  - "))
    }
}

fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// The `skyrl` executable for engine servers.
fn engine_program(opts: &TrainOptions) -> Result<PathBuf> {
    if let Some(p) = &opts.engine_program {
        return Ok(p.clone());
    }
    let exe = std::env::current_exe().context("cannot locate this executable")?;
    if exe.file_stem().is_some_and(|n| n == "skyrl") {
        Ok(exe)
    } else {
        bail!(
            "disaggregated local placement starts `skyrl serve` processes, but this program is \
             {}; run through the `skyrl` CLI or set TrainOptions::engine_program",
            exe.display()
        )
    }
}

/// Builds the rollout engine(s) for `placement`.
fn start_engines(
    cfg: &SkyrlConfig,
    placement: &Placement,
    policy: &CausalLm,
    policy_dir: &Path,
    opts: &TrainOptions,
) -> Result<RolloutEngine> {
    let ie = &cfg.generator.inference_engine;
    let client_config = |urls: Vec<String>, model: Option<String>| RemoteEnginesConfig {
        model,
        request_timeout: seconds(ie.request_timeout_s),
        max_retries: ie.max_retries,
        retry_backoff: seconds(ie.retry_backoff_s),
        api_key: ie.api_key.clone(),
        ..RemoteEnginesConfig::new(urls)
    };
    Ok(match placement {
        Placement::Colocated => {
            let options = LoadOptions {
                device: policy.device(),
                kind: policy.kind(),
            };
            let engine = InferenceEngine::new(
                policy.try_clone(&options)?,
                Some(Tokenizer::from_dir(policy_dir)?),
            )
            .with_max_batch(ie.max_num_seqs.max(1));
            RolloutEngine::local(engine)
        }
        Placement::LocalServers { num_engines } => {
            let name = ie
                .served_model_name
                .clone()
                .unwrap_or_else(|| "skyrl-policy".into());
            let launch = ServerLaunch {
                program: engine_program(opts)?,
                model: policy_dir.to_path_buf(),
                max_num_seqs: ie.max_num_seqs.max(1),
                served_model_name: name.clone(),
                startup_timeout: seconds(ie.engine_startup_timeout_s),
            };
            let servers = LocalServers::start(&launch, *num_engines)?;
            let client = RemoteEngines::new(client_config(servers.urls().to_vec(), Some(name)))?;
            RolloutEngine::remote(client, Some(servers))
        }
        Placement::External { urls } => RolloutEngine::remote(
            RemoteEngines::new(client_config(urls.clone(), ie.served_model_name.clone()))?,
            None,
        ),
    })
}

/// Everything the loop holds.
pub struct Trainer {
    cfg: SkyrlConfig,
    policy: CausalLm,
    reference: Option<CausalLm>,
    rollout: Arc<RolloutEngine>,
    weight_sync: WeightSync,
    tokenizer: Arc<Tokenizer>,
    optimizer: crate::optim::AdamW,
    generator: Arc<Generator>,
    /// Batches handed to rollout generation so far (seeds rollouts).
    batches_taken: u64,
    /// Data position after the last batch whose rollouts were all trained on
    /// (what a checkpoint resumes from).
    trained_pos: DataPosition,
    train_data: PromptDataset,
    val_data: PromptDataset,
    sampler: EpochSampler,
    adv_registry: AdvantageEstimatorRegistry,
    loss_registry: PolicyLossRegistry,
    global_step: u64,
    resumed_from: Option<PathBuf>,
    /// In-reward KL coefficient controller (`use_kl_in_reward`).
    kl_ctrl: Option<KlController>,
}

impl Trainer {
    /// Loads data and models, creates the optimiser, and resumes when a
    /// checkpoint is selected by `trainer.resume_mode`.
    pub fn new(cfg: SkyrlConfig, envs: EnvRegistry) -> Result<Self> {
        Self::with_options(cfg, envs, &TrainOptions::default())
    }

    /// [`Trainer::new`] with the options that affect setup (the engine program).
    pub fn with_options(cfg: SkyrlConfig, envs: EnvRegistry, opts: &TrainOptions) -> Result<Self> {
        reject_unsupported(&cfg)?;
        let plan = placement::plan(&cfg)?;
        let adv_registry = AdvantageEstimatorRegistry::with_defaults();
        let loss_registry = PolicyLossRegistry::with_defaults();
        cfg.validate_names(&adv_registry, &loss_registry)?;
        let t = &cfg.trainer;
        let train_data = PromptDataset::load(&cfg.data.train_data)?;
        let val_data = PromptDataset::load(&cfg.data.val_data)?;
        let sampler =
            EpochSampler::new(train_data.len(), t.train_batch_size, t.seed, t.epochs, true)?;
        for row in &train_data.rows {
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
        let export = expand_home(&t.export_path);
        let policy_dir = resolve_model_dir(&t.policy.model, &export.join("init_model"), t.seed)?;
        let options = LoadOptions {
            device: Device::cuda_if_available(),
            kind: Kind::Float,
        };
        let policy = CausalLm::from_pretrained(&policy_dir, &options)
            .with_context(|| format!("cannot load the policy from {}", policy_dir.display()))?;
        let tokenizer = Tokenizer::from_dir(&policy_dir)?;
        let reference = if t.algorithm.use_kl_loss || t.algorithm.use_kl_in_reward {
            let ref_dir =
                resolve_model_dir(&t.reference.model, &export.join("init_model"), t.seed)?;
            let mut r = CausalLm::from_pretrained(&ref_dir, &options)?;
            r.var_store_mut().freeze();
            Some(r)
        } else {
            None
        };
        let optimizer =
            crate::optim::AdamW::from_config(named_params(&policy), &t.policy.optimizer_config)?;
        let rubric = match &cfg.environment.reward_rubric {
            Some(r) => Some(crate::rubric::Rubric::new(r, envs.rewards())?),
            None => None,
        };
        let mut generator = Generator::new(envs, cfg.environment.skyrl_gym.max_env_workers)?;
        if let Some(r) = rubric {
            generator.set_rubric(r);
        }
        let rollout = Arc::new(start_engines(
            &cfg,
            &plan.placement,
            &policy,
            &policy_dir,
            opts,
        )?);
        let tokenizer = Arc::new(tokenizer);
        if let Some(plugin) = generator.envs.generator().cloned() {
            let c = &cfg.generator.custom_generator;
            generator.set_custom(crate::custom_generator::CustomGenerator::new(
                plugin,
                c.config.clone(),
                c.timeout_s,
                rollout.clone(),
                tokenizer.clone(),
            )?);
        }
        if let Some(client) = rollout.remote_client() {
            let wait = seconds(cfg.generator.inference_engine.engine_startup_timeout_s);
            generator.runtime().block_on(client.wait_ready(wait))?;
        }
        let sync_dir = match &cfg.generator.inference_engine.weight_sync_path {
            Some(p) => expand_home(p),
            None => export.join("weight_sync"),
        };
        let weight_sync = WeightSync::new(plan.weight_sync, sync_dir);
        let kl_ctrl = if cfg.trainer.algorithm.use_kl_in_reward {
            Some(KlController::from_config(&cfg.trainer.algorithm)?)
        } else {
            None
        };
        let mut trainer = Self {
            cfg,
            policy,
            reference,
            rollout,
            weight_sync,
            tokenizer,
            batches_taken: 0,
            trained_pos: DataPosition::default(),
            optimizer,
            generator: Arc::new(generator),
            train_data,
            val_data,
            sampler,
            adv_registry,
            loss_registry,
            global_step: 0,
            resumed_from: None,
            kl_ctrl,
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

    fn ckpt_root(&self) -> PathBuf {
        expand_home(&self.cfg.trainer.ckpt_path)
    }

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
        let ck = checkpoint::load_checkpoint(&dir)?;
        load_params(&self.policy, ck.model)
            .with_context(|| format!("cannot restore the policy from {}", dir.display()))?;
        self.optimizer.load_state_tensors(ck.optimizer)?;
        self.sampler.restore(ck.state.data_position)?;
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
    fn sync_weights(&mut self) -> Result<SyncReport> {
        let rt = self.generator.runtime();
        self.weight_sync
            .sync(
                &self.policy,
                &self.tokenizer,
                &self.rollout,
                self.global_step,
                &rt,
            )
            .context("weight sync to the inference engines failed")
    }

    /// The engines rollouts are sampled from.
    pub fn rollout_engine(&self) -> &RolloutEngine {
        &self.rollout
    }

    /// The policy being trained.
    pub fn policy(&self) -> &CausalLm {
        &self.policy
    }

    /// Current global step (steps completed).
    pub fn global_step(&self) -> u64 {
        self.global_step
    }

    /// Total steps of the run (epochs x batches per epoch).
    pub fn total_steps(&self) -> u64 {
        self.sampler.total_batches() as u64
    }

    fn requests(&self, rows: &[usize], data: &PromptDataset, n: usize) -> Vec<GeneratorRequest> {
        let mut out = Vec::with_capacity(rows.len() * n);
        for &i in rows {
            let req = GeneratorRequest::from_row(&data.rows[i], &self.cfg.environment.env_class);
            for _ in 0..n {
                out.push(req.clone());
            }
        }
        out
    }

    /// Greedy (per `eval_sampling_params`) evaluation over the validation split.
    pub fn evaluate(&self) -> Result<StepMetrics> {
        let g = &self.cfg.generator;
        let sp = g
            .eval_sampling_params
            .clone()
            .unwrap_or_else(|| g.sampling_params.clone());
        let mut rewards = Vec::new();
        let mut env_sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        let all: Vec<usize> = (0..self.val_data.len()).collect();
        for (k, chunk) in all
            .chunks(self.cfg.trainer.eval_batch_size.max(1))
            .enumerate()
        {
            let reqs = self.requests(chunk, &self.val_data, g.eval_n_samples_per_prompt);
            let params = RolloutParams::from_config(
                g,
                &sp,
                Some(derive_seed(
                    self.cfg.trainer.seed,
                    self.global_step,
                    1000 + k as u64,
                )),
            );
            let out = self
                .generator
                .generate(&self.rollout, &self.tokenizer, &reqs, &params)?;
            let n = reqs.len() as f64;
            for (key, v) in &out.env_metrics {
                let e = env_sums.entry(key.clone()).or_default();
                e.0 += v * n;
                e.1 += n;
            }
            rewards.extend(out.sequence_rewards());
        }
        let mut m = StepMetrics::new();
        m.insert("eval/reward_mean".into(), mean(&rewards));
        m.insert("eval/num_samples".into(), rewards.len() as f64);
        for (k, (s, n)) in env_sums {
            m.insert(format!("eval/env/{k}"), s / n.max(1.0));
        }
        Ok(m)
    }

    /// The next batch of prompts as rollout work, or `None` when the data is exhausted.
    fn take_work(&mut self) -> Option<Work> {
        let (pos, rows) = self.sampler.next_batch()?;
        let n = self.cfg.generator.n_samples_per_prompt;
        let requests = self.requests(&rows, &self.train_data, n);
        let group_ids = rows
            .iter()
            .flat_map(|r| std::iter::repeat_n(format!("{}-{r}", pos.epoch), n))
            .collect();
        let seed = derive_seed(self.cfg.trainer.seed, self.batches_taken, 1);
        self.batches_taken += 1;
        Some(Work {
            batch: self.batches_taken - 1,
            epoch: pos.epoch,
            after: self.sampler.position(),
            requests,
            group_ids,
            seed,
        })
    }

    fn rollout_params(&self, seed: u64) -> RolloutParams {
        let g = &self.cfg.generator;
        RolloutParams::from_config(g, &g.sampling_params, Some(seed))
    }

    /// One training step on the next batch (rollouts, then training, then
    /// weight sync); `None` when the data is exhausted.
    pub fn train_step(&mut self) -> Result<Option<StepMetrics>> {
        let Some(work) = self.take_work() else {
            return Ok(None);
        };
        let gen_start = Instant::now();
        let out = self.generator.generate(
            &self.rollout,
            &self.tokenizer,
            &work.requests,
            &self.rollout_params(work.seed),
        )?;
        let gen_secs = gen_start.elapsed().as_secs_f64();
        let after = work.after;
        let rollout = Rollout {
            out,
            group_ids: work.group_ids,
            epoch: work.epoch,
            gen_secs,
            wait_secs: gen_secs,
        };
        let mut m = self.train_on(rollout)?;
        self.trained_pos = after;
        self.finish_step(&mut m)?;
        Ok(Some(m))
    }

    /// Syncs weights after a step and records the sync metrics.
    fn finish_step(&mut self, m: &mut StepMetrics) -> Result<()> {
        let sync = self.sync_weights()?;
        m.insert("time/weight_sync".into(), sync.seconds);
        m.insert("weight_sync/bytes".into(), sync.bytes as f64);
        if let Some(v) = sync.versions.iter().flatten().min() {
            m.insert("inference/weight_version".into(), *v as f64);
        }
        if let Some(client) = self.rollout.remote_client() {
            for (i, st) in client.stats().iter().enumerate() {
                m.insert(format!("inference/engine{i}/requests"), st.requests as f64);
                m.insert(format!("inference/engine{i}/failures"), st.failures as f64);
            }
        }
        Ok(())
    }

    /// Trains on one batch of rollouts (filters, advantages, policy updates);
    /// the caller syncs weights afterwards.
    fn train_on(&mut self, rollout: Rollout) -> Result<StepMetrics> {
        let step_start = Instant::now();
        let Rollout {
            mut out,
            group_ids,
            epoch,
            gen_secs,
            wait_secs,
        } = rollout;
        let cfg = self.cfg.clone();
        let t = &cfg.trainer;
        let g = &cfg.generator;
        let a = &t.algorithm;
        let n_samples = g.n_samples_per_prompt;
        // Policy version at training time minus the version that generated each trajectory.
        let staleness: Vec<f64> = out
            .policy_versions
            .iter()
            .map(|&v| self.global_step.saturating_sub(v) as f64)
            .collect();
        let raw_rewards = out.sequence_rewards();
        let generated_tokens: f64 = out
            .loss_masks
            .iter()
            .map(|m| m.iter().map(|&x| x as f64).sum::<f64>())
            .sum();
        if g.zero_reward_on_non_stop {
            let mut scalar = raw_rewards.clone();
            filters::zero_reward_on_non_stop(&mut scalar, &out.stop_reasons)?;
            for (r, s) in out.rewards.iter_mut().zip(&scalar) {
                if *s == 0.0 {
                    r.iter_mut().for_each(|x| *x = 0.0);
                }
            }
        }
        if g.apply_overlong_filtering {
            filters::apply_overlong_filtering(&mut out.loss_masks, &out.stop_reasons)?;
        }
        let mut zero_var_masked = 0;
        if a.zero_variance_filter {
            zero_var_masked = filters::apply_zero_variance_filter(
                &out.sequence_rewards(),
                &group_ids,
                &mut out.loss_masks,
            )?;
        }

        // Step-wise: one sample per turn; advantages come from last steps.
        let steps = if g.step_wise_trajectories {
            let sw = crate::step_wise::expand(&out);
            out = sw.out;
            Some((sw.trajectory, sw.is_last))
        } else {
            None
        };

        // 2. Tensors, advantages, old / reference logprobs.
        let train_start = Instant::now();
        let device = self.policy.device();
        let batch = build_batch(&out, pad_id(&self.tokenizer, &self.policy), device);
        let temperature = a.temperature.unwrap_or(g.sampling_params.temperature);
        let temperature = if temperature > 0.0 { temperature } else { 1.0 };
        let micro_fwd = t.micro_forward_batch_size_per_gpu.max(1) as i64;
        let old_lp = forward_all(&self.policy, &batch, micro_fwd, temperature)?;
        let ref_lp = match &self.reference {
            Some(r) => Some(forward_all(r, &batch, micro_fwd, temperature)?),
            None => None,
        };
        let mut kl_metrics = StepMetrics::new();
        let token_rewards = match (&ref_lp, self.kl_ctrl.as_mut()) {
            (Some(ref_lp), Some(ctrl)) if a.use_kl_in_reward => {
                let est: KlEstimator = a.kl_estimator_type.parse()?;
                let p = apply_kl_penalty_to_rewards(
                    &batch.token_rewards,
                    &old_lp,
                    ref_lp,
                    &batch.response_mask,
                    est,
                    ctrl,
                );
                kl_metrics.insert("kl_in_reward/mean_kl".into(), p.mean_kl);
                kl_metrics.insert("kl_in_reward/mean_max_kl".into(), p.mean_max_kl);
                kl_metrics.insert("kl_in_reward/coef".into(), ctrl.value());
                p.token_level_rewards
            }
            _ => batch.token_rewards.shallow_clone(),
        };
        let estimator = self.adv_registry.get(&a.advantage_estimator)?;
        let adv_params = AdvantageParams::from(a);
        let adv = match &steps {
            None => {
                estimator
                    .compute(
                        &AdvantageInput {
                            token_level_rewards: &token_rewards,
                            response_mask: &batch.response_mask,
                            group_ids: &group_ids,
                            values: None,
                        },
                        &adv_params,
                    )?
                    .advantages
            }
            Some((trajectory, is_last)) => crate::step_wise::advantages(
                estimator.as_ref(),
                &adv_params,
                &token_rewards,
                &batch.response_mask,
                &group_ids,
                trajectory,
                is_last,
            )?,
        };
        let advantages = if a.advantage_batch_normalize {
            crate::algorithms::advantage::normalize_advantages(&adv, &batch.response_mask)
        } else {
            adv
        };

        // 3. Policy updates: mini-batches with gradient accumulation over micro-batches.
        let reduction: LossReduction = a.loss_reduction.parse()?;
        let mut loss_cfg = a.clone();
        loss_cfg.use_entropy_loss = false;
        loss_cfg.use_kl_loss = a.use_kl_loss && ref_lp.is_some();
        let n_rows = batch.input_ids.size()[0];
        let mini = (t.policy_mini_batch_size * n_samples) as i64;
        let micro = t.micro_train_batch_size_per_gpu.max(1) as i64;
        let mut acc: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut grad_norms = Vec::new();
        let mut lrs = Vec::new();
        for _epoch in 0..t.update_epochs_per_batch {
            let mut m0 = 0;
            while m0 < n_rows {
                let mlen = mini.min(n_rows - m0);
                let mini_tokens = batch
                    .response_mask
                    .narrow(0, m0, mlen)
                    .sum(Kind::Float)
                    .double_value(&[])
                    .max(1.0);
                self.optimizer.zero_grad();
                let mut s = m0;
                while s < m0 + mlen {
                    let len = micro.min(m0 + mlen - s);
                    let mask = batch.response_mask.narrow(0, s, len);
                    let (lp, ent) =
                        response_logprobs(&self.policy, &batch, s, len, temperature, true)?;
                    let old = old_lp.narrow(0, s, len);
                    let advs = advantages.narrow(0, s, len);
                    let rollout = batch.rollout_logprobs.narrow(0, s, len);
                    let reference = ref_lp.as_ref().map(|r| r.narrow(0, s, len));
                    let out = actor_loss(
                        &self.loss_registry,
                        &loss_cfg,
                        &ActorBatch {
                            log_probs: &lp,
                            old_log_probs: &old,
                            advantages: &advs,
                            loss_mask: &mask,
                            rollout_logprobs: Some(&rollout),
                            ref_log_probs: reference.as_ref(),
                            logits: None,
                        },
                    )?;
                    let mut loss = out.loss;
                    let entropy = ent.map(|e| masked_mean(&e, &mask));
                    if let Some(e) = &entropy {
                        acc.entry("entropy".into())
                            .or_default()
                            .push(e.double_value(&[]));
                        if a.use_entropy_loss {
                            loss -= e * a.entropy_loss_coef;
                        }
                    }
                    let scale = match reduction {
                        LossReduction::TokenMean => {
                            mask.sum(Kind::Float).double_value(&[]) / mini_tokens
                        }
                        _ => len as f64 / mlen as f64,
                    };
                    (loss * scale).backward();
                    let approx_kl = masked_mean(&(&old - lp.detach()), &mask).double_value(&[]);
                    acc.entry("policy/approx_kl".into())
                        .or_default()
                        .push(approx_kl);
                    for (k, v) in out.metrics {
                        acc.entry(format!("policy/{k}")).or_default().push(v);
                    }
                    s += len;
                }
                let (norm, lr) = self.optimizer.step(t.policy.optimizer_config.max_grad_norm);
                grad_norms.push(norm);
                lrs.push(lr);
                m0 += mlen;
            }
        }

        self.global_step += 1;
        let train_secs = train_start.elapsed().as_secs_f64();

        let mut m = StepMetrics::new();
        m.insert("epoch".into(), epoch as f64);
        m.insert("train/samples".into(), out.len() as f64);
        m.insert("async/staleness_mean".into(), mean(&staleness));
        m.insert(
            "async/staleness_max".into(),
            staleness.iter().cloned().fold(0.0, f64::max),
        );
        m.insert("time/wait_for_rollouts".into(), wait_secs);
        m.extend(kl_metrics);
        if a.zero_variance_filter {
            m.insert(
                "filter/zero_variance_masked_frac".into(),
                zero_var_masked as f64 / out.stop_reasons.len().max(1) as f64,
            );
        }
        m.insert("reward/mean".into(), mean(&raw_rewards));
        let final_rewards = out.sequence_rewards();
        m.insert("reward/mean_after_filters".into(), mean(&final_rewards));
        let resp_lens: Vec<f64> = out.response_ids.iter().map(|r| r.len() as f64).collect();
        m.insert("response_length/mean".into(), mean(&resp_lens));
        m.insert(
            "response_length/max".into(),
            resp_lens.iter().cloned().fold(0.0, f64::max),
        );
        m.insert(
            "num_turns/mean".into(),
            mean(&out.num_turns.iter().map(|&x| x as f64).collect::<Vec<_>>()),
        );
        for reason in ["stop", "length", ENV_ERROR] {
            let frac = out.stop_reasons.iter().filter(|s| *s == reason).count() as f64
                / out.stop_reasons.len().max(1) as f64;
            m.insert(format!("stop_reason/{reason}"), frac);
        }
        for (k, v) in &out.env_metrics {
            m.insert(format!("env/{k}"), *v);
        }
        for (k, v) in &out.reward_metrics {
            m.insert(format!("reward/{k}"), *v);
        }
        for (k, v) in &acc {
            m.insert(k.clone(), mean(v));
        }
        let loss = m.get("policy/final_loss").copied().unwrap_or(f64::NAN);
        m.insert("loss".into(), loss);
        let kl = m
            .get("policy/kl_loss")
            .or(m.get("policy/approx_kl"))
            .copied()
            .unwrap_or(0.0);
        m.insert("kl".into(), kl);
        m.insert("grad_norm".into(), mean(&grad_norms));
        m.insert("lr".into(), lrs.last().copied().unwrap_or(0.0));
        m.insert("time/generate".into(), gen_secs);
        m.insert("time/train".into(), train_secs);
        m.insert("time/step".into(), step_start.elapsed().as_secs_f64());
        m.insert("tokens_per_s".into(), generated_tokens / gen_secs.max(1e-9));
        Ok(m)
    }

    /// Writes a resumable checkpoint of the current step.
    pub fn save_checkpoint(&self, metrics: &StepMetrics) -> Result<PathBuf> {
        let model = named_params(&self.policy);
        let optim = self.optimizer.state_tensors();
        let state = TrainerState {
            global_step: self.global_step,
            data_position: self.trained_pos,
            seed: self.cfg.trainer.seed,
            kl_ctrl_value: self.kl_ctrl.as_ref().map(KlController::value),
            metrics: metrics.clone(),
            extra: serde_json::to_value(&self.cfg)?,
        };
        checkpoint::save_checkpoint(
            &self.ckpt_root(),
            &CheckpointData {
                model: &model,
                optimizer: &optim,
                extra: &[],
                state: &state,
            },
            self.cfg.trainer.max_ckpts_to_keep,
        )
    }

    /// Runs the whole loop (or `opts.max_steps` steps of it).
    pub fn run(&mut self, opts: &TrainOptions) -> Result<RunSummary> {
        let start = Instant::now();
        let t = self.cfg.trainer.clone();
        let log_dir = expand_home(&t.log_path);
        let metrics_path = log_dir.join("metrics.jsonl");
        let mut log = MetricsLog::open(&metrics_path, self.resumed_from.is_some())?;
        let start_step = self.global_step;
        let total = self.total_steps();
        let bar = if opts.progress {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} step  {msg}",
                )
                .expect("valid template"),
            );
            b.set_position(start_step);
            b
        } else {
            ProgressBar::hidden()
        };
        let mut summary = RunSummary {
            start_step,
            final_step: start_step,
            resumed_from: self.resumed_from.clone(),
            steps: Vec::new(),
            evals: Vec::new(),
            metrics_path: metrics_path.clone(),
            plot_path: None,
            last_checkpoint: None,
            wall_seconds: 0.0,
        };
        let eval_enabled = t.eval_interval > 0 && !self.val_data.is_empty();
        if eval_enabled && t.eval_before_train && self.resumed_from.is_none() {
            let m = self.evaluate()?;
            log.write(self.global_step, &m)?;
            bar.println(format!(
                "step {} eval reward {:.3}",
                self.global_step, m["eval/reward_mean"]
            ));
            summary.evals.push((self.global_step, m));
        }
        let mut last_eval_step = self.global_step;
        let mut last_ckpt_step = self.global_step;
        let mut last_metrics = StepMetrics::new();
        let mut done_here = 0u64;
        let mode = self.cfg.trainer.training_mode;
        let mut pipeline = match mode {
            TrainingMode::Sync => None,
            _ => Some(pipeline::Pipeline::start(self, mode)?),
        };
        while opts.max_steps.is_none_or(|n| done_here < n) {
            let next = match pipeline.as_mut() {
                Some(p) => p.step(self)?,
                None => self.train_step()?,
            };
            let Some(mut m) = next else {
                break;
            };
            done_here += 1;
            let step = self.global_step;
            if eval_enabled && step.is_multiple_of(t.eval_interval as u64) {
                let e = self.evaluate()?;
                m.extend(e.clone());
                summary.evals.push((step, e));
                last_eval_step = step;
            }
            for (k, v) in &m {
                if !v.is_finite() && !k.starts_with("policy/ratio") {
                    bail!("step {step}: metric {k} is not finite ({v})");
                }
            }
            log.write(step, &m)?;
            bar.set_position(step);
            bar.set_message(format!(
                "reward {:.3} loss {:+.4}{}",
                m["reward/mean"],
                m["loss"],
                m.get("eval/reward_mean")
                    .map(|e| format!(" eval {e:.3}"))
                    .unwrap_or_default()
            ));
            if t.ckpt_interval > 0 && step.is_multiple_of(t.ckpt_interval as u64) {
                summary.last_checkpoint = Some(self.save_checkpoint(&m)?);
                last_ckpt_step = step;
            }
            last_metrics = m.clone();
            summary.steps.push(m);
        }
        // Stop the rollout worker (it finishes what it holds).
        drop(pipeline);
        let finished = self.global_step >= total;
        if finished && eval_enabled && last_eval_step != self.global_step {
            let e = self.evaluate()?;
            log.write(self.global_step, &e)?;
            summary.evals.push((self.global_step, e));
        }
        if t.ckpt_interval > 0 && last_ckpt_step != self.global_step {
            summary.last_checkpoint = Some(self.save_checkpoint(&last_metrics)?);
        }
        bar.finish_and_clear();
        if finished {
            let export = expand_home(&t.export_path).join("final_model");
            skyrl_model::save_checkpoint(&self.policy, Some(&self.tokenizer), &export)?;
            info!(dir = %export.display(), "exported the final policy");
        }
        let png = log_dir.join("reward_curve.png");
        match plot_reward_curve(&metrics_path, &png) {
            Ok(()) => summary.plot_path = Some(png),
            Err(e) => tracing::warn!("cannot draw the reward curve: {e:#}"),
        }
        summary.final_step = self.global_step;
        summary.wall_seconds = start.elapsed().as_secs_f64();
        Ok(summary)
    }
}

/// Builds a [`Trainer`] and runs it.
pub fn train(cfg: SkyrlConfig, envs: EnvRegistry, opts: &TrainOptions) -> Result<RunSummary> {
    let mut trainer = Trainer::with_options(cfg, envs, opts)?;
    trainer.run(opts)
}

/// Ensures a directory exists (helper for callers preparing a run dir).
pub fn ensure_dir(p: &Path) -> Result<()> {
    std::fs::create_dir_all(p).with_context(|| format!("cannot create {}", p.display()))
}
