//! The GRPO/PPO trainer (skyrl's `RayPPOTrainer.train`). A step reads as
//! the RL step itself: generate rollouts → filter and score → old and
//! reference logprobs → advantages → policy update → weight sync. Each line
//! is a call into a role's worker ([`crate::workers`]), the generator
//! (skyrl-rollout) or the engines (skyrl-inference).
//!
//! Submodules: [`setup`](self) builds a trainer, `work` hands out batches of
//! prompts, `advantages` turns rollouts into advantages, `step_metrics`
//! names what a step measured, `eval` evaluates, `pipeline` runs the
//! one-step-off and fully-async modes, and `run` is the outer loop.

mod advantages;
mod dumps;
mod dynamic_sampling;
mod eval;
mod eval_metrics;
mod pipeline;
mod progress;
mod run;
mod setup;
mod step_metrics;
mod work;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use skyrl_inference::weight_sync::WeightSync;
use skyrl_inference::RolloutEngine;
use skyrl_model::{CausalLm, EngineStats, Tokenizer};
use skyrl_rollout::{step_wise, Generator, GeneratorOutput, PluginSet};

use crate::algorithms::{AdvantageEstimatorRegistry, KlController};
use crate::batch::{pad_id, TrainingBatch};
use crate::checkpoint::TrainerState;
use crate::config::SkyrlConfig;
use crate::dataset::{expand_home, DataPosition, EpochSampler, PromptDataset};
use crate::dist::Dist;
use crate::metrics::StepMetrics;
use crate::workers::{
    CriticSettings, CriticWorker, PolicyWorker, PpoBatch, PpoSettings, RefWorker,
};
use advantages::{apply_output_filters, compute_advantages, AdvantageJob, RankRows, StepRows};
use dynamic_sampling::{DynamicSampler, Sampled};
use progress::{Phase, Progress};
use step_metrics::{step_metrics, StepFacts};
pub use work::request_for_row;
use work::{Rollout, Work};

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
    /// Evaluation only ([`evaluate_only`]): the training data is not loaded.
    pub eval_only: bool,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunSummary {
    /// This process's rank (0 wrote the metrics, plot, checkpoints and export).
    pub rank: usize,
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

/// Everything the loop holds.
pub struct Trainer {
    cfg: SkyrlConfig,
    /// This process's rank among the policy ranks.
    dist: Arc<Dist>,
    policy: PolicyWorker,
    reference: Option<RefWorker>,
    /// The critic, with `advantage_estimator: gae`.
    critic: Option<CriticWorker>,
    rollout: Arc<RolloutEngine>,
    weight_sync: WeightSync,
    tokenizer: Arc<Tokenizer>,
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
    global_step: u64,
    resumed_from: Option<PathBuf>,
    /// In-reward KL coefficient controller (`use_kl_in_reward`).
    kl_ctrl: Option<KlController>,
    /// The in-process engine's counters at the previous step's metrics.
    engine_stats_seen: EngineStats,
    /// The progress display (set up by the run loop).
    progress: Progress,
    /// An evaluation-only run ([`evaluate_only`]): dumps go to `eval_only`.
    eval_only: bool,
}

impl Trainer {
    /// The engines rollouts are sampled from.
    pub fn rollout_engine(&self) -> &RolloutEngine {
        &self.rollout
    }

    /// The policy being trained.
    pub fn policy(&self) -> &CausalLm {
        self.policy.model()
    }

    /// The reference model, when the config uses one.
    pub fn reference(&self) -> Option<&CausalLm> {
        self.reference.as_ref().map(RefWorker::model)
    }

    /// Current global step (steps completed).
    pub fn global_step(&self) -> u64 {
        self.global_step
    }

    /// Total steps of the run (epochs x batches per epoch).
    pub fn total_steps(&self) -> u64 {
        self.sampler.total_batches() as u64
    }

    fn ckpt_root(&self) -> PathBuf {
        expand_home(&self.cfg.trainer.ckpt_path)
    }

    /// One training step on the next batch (rollouts, then training, then
    /// weight sync); `None` when the data is exhausted.
    pub fn train_step(&mut self) -> Result<Option<StepMetrics>> {
        let seed = work::derive_seed(self.cfg.trainer.seed, self.global_step, 2);
        let mut sampler = DynamicSampler::from_config(&self.cfg, seed)?;
        let mut sampling_metrics = StepMetrics::new();
        let mut gen_secs = 0.0;
        // One generated batch, or with dynamic sampling as many as it takes.
        loop {
            let Some(work) = self.take_work() else {
                return Ok(None);
            };
            let gen_start = Instant::now();
            let phase = self.progress.begin(Phase::Generate, self.global_step + 1);
            let params = self.rollout_params(work.seed);
            let out =
                self.generator
                    .generate(&self.rollout, &self.tokenizer, &work.requests, &params)?;
            gen_secs += gen_start.elapsed().as_secs_f64();
            self.progress.end(phase, out.len() as f64, "samples");
            let Work {
                after,
                group_ids,
                rows,
                epoch,
                ..
            } = work;
            self.trained_pos = after;
            let (out, group_ids, rows) = match sampler.as_mut() {
                None => (out, group_ids, rows),
                Some(s) => {
                    // Every rank judges the whole batch alike, then takes its share.
                    let n = self.cfg.generator.n_samples_per_prompt;
                    let whole = dynamic_sampling::whole_batch(&self.dist, &rows, out)?;
                    match s.push(whole, group_ids, n, &mut sampling_metrics)? {
                        Sampled::Again => continue,
                        Sampled::Ready(out, uids) => {
                            let mini = self.cfg.trainer.policy_mini_batch_size * n;
                            let (out, rows) = dynamic_sampling::rank_share(&self.dist, *out, mini);
                            (out, uids, rows)
                        }
                    }
                }
            };
            let mut m = self.train_on(Rollout {
                out,
                group_ids,
                rows,
                epoch,
                gen_secs,
                wait_secs: gen_secs,
            })?;
            m.extend(sampling_metrics);
            self.finish_step(&mut m)?;
            return Ok(Some(m));
        }
    }

    /// Trains on one batch of rollouts (filters, advantages, policy update);
    /// the caller syncs weights afterwards.
    fn train_on(&mut self, rollout: Rollout) -> Result<StepMetrics> {
        let step_start = Instant::now();
        let Rollout {
            mut out,
            group_ids,
            rows,
            epoch,
            gen_secs,
            wait_secs,
        } = rollout;
        let (cfg, dist) = (self.cfg.clone(), self.dist.clone());
        let mut facts = StepFacts::of_rollouts(&out, self.global_step);
        let mut extra = StepMetrics::new();
        let zero_var = apply_output_filters(&cfg, &dist, &rows, &mut out, &group_ids)?;
        let steps = expand_step_wise(&cfg, &mut out);
        if cfg.trainer.algorithm.zero_variance_filter {
            let trained = if steps.is_some() {
                out.len()
            } else {
                rows.total
            };
            let frac = zero_var as f64 / trained.max(1) as f64;
            extra.insert("filter/zero_variance_masked_frac".into(), frac);
        }

        let train_start = Instant::now();
        let phase = self.progress.begin(Phase::Train, self.global_step + 1);
        let model = self.policy.model();
        let pad = pad_id(&self.tokenizer, model);
        let batch = TrainingBatch::from_output(&out, pad, model.device());
        let temperature = logit_temperature(&cfg);
        let micro_fwd = cfg.trainer.micro_forward_batch_size_per_gpu.max(1) as i64;
        let old_lp = self.policy.logprobs(&batch, micro_fwd, temperature)?;
        let ref_lp = match &self.reference {
            Some(r) => Some(r.logprobs(&batch, micro_fwd, temperature)?),
            None => None,
        };
        let values = match &self.critic {
            Some(c) => Some(c.values(&batch, micro_fwd)?),
            None => None,
        };
        let job = AdvantageJob {
            batch: &batch,
            old_logprobs: &old_lp,
            ref_logprobs: ref_lp.as_ref(),
            group_ids: &group_ids,
            rows: &rows,
            steps: steps.as_ref(),
            values: values.as_ref(),
        };
        let kl_ctrl = self.kl_ctrl.as_mut();
        let computed =
            compute_advantages(&cfg, &dist, &self.adv_registry, kl_ctrl, &job, &mut extra)?;
        let advantages = computed.advantages;
        if cfg.trainer.dump_data_batch {
            // Step-wise training splits trajectories into turns: no uid then.
            let uids: Vec<String> = match out.len() == rows.mine().len() {
                true => rows.mine().iter().map(|&g| group_ids[g].clone()).collect(),
                false => Vec::new(),
            };
            let dump = dumps::BatchDump {
                out: &out,
                group_ids: &uids,
                advantages: &advantages,
                old_logprobs: &old_lp,
                ref_logprobs: ref_lp.as_ref(),
            };
            let export = expand_home(&cfg.trainer.export_path);
            dumps::write_batch_dump(&export, self.global_step + 1, dist.rank(), &dump)?;
        }
        let prompts = row_prompts(&group_ids, &rows, steps.as_ref());
        let data = PpoBatch {
            batch: &batch,
            advantages: &advantages,
            old_logprobs: &old_lp,
            ref_logprobs: ref_lp.as_ref(),
            prompts: &prompts,
        };
        let update = self
            .policy
            .ppo_update(&data, &ppo_settings(&cfg, dist.world(), temperature))?;
        if let (Some(critic), Some(values), Some(returns)) = (
            self.critic.as_mut(),
            values.as_ref(),
            computed.returns.as_ref(),
        ) {
            let t = &cfg.trainer;
            let n = cfg.generator.n_samples_per_prompt;
            let settings = CriticSettings {
                epochs: t.update_epochs_per_batch,
                mini_batch_rows: (t.critic_mini_batch_size * n / dist.world()).max(1) as i64,
                micro_batch_rows: t.micro_train_batch_size_per_gpu.max(1) as i64,
                value_clip: t.algorithm.value_clip.filter(|c| *c > 0.0),
                max_grad_norm: t.critic.optimizer_config.max_grad_norm,
            };
            let r = critic.update(&batch, values, returns, &settings)?;
            extra.insert("critic/loss".into(), r.loss);
            extra.insert("critic/grad_norm".into(), r.grad_norm);
            extra.insert("critic/lr".into(), r.lr);
            if let Some(f) = r.clipfrac {
                extra.insert("critic/vf_clipfrac".into(), f);
            }
            // Means over the response tokens of every rank.
            let mask = &batch.response_mask;
            let masked_sum = |x: &tch::Tensor| (x * mask).sum(tch::Kind::Float).double_value(&[]);
            let sums = dist.sum_f64(&[
                masked_sum(values),
                masked_sum(returns),
                mask.sum(tch::Kind::Float).double_value(&[]),
            ])?;
            let tokens = sums[2].max(1.0);
            extra.insert("critic/values_mean".into(), sums[0] / tokens);
            extra.insert("critic/returns_mean".into(), sums[1] / tokens);
        }
        self.global_step += 1;
        self.progress.end(phase, out.len() as f64, "samples");

        facts.add_training(&out, &update);
        self.memory_metrics(&update, &mut extra);
        self.engine_metrics(&mut extra);
        facts.generate_secs = gen_secs;
        facts.wait_secs = wait_secs;
        facts.train_secs = train_start.elapsed().as_secs_f64();
        let facts = StepFacts::merge(dist.all_gather_json(&facts)?);
        let step_secs = step_start.elapsed().as_secs_f64();
        Ok(step_metrics(&facts, epoch, step_secs, extra))
    }

    /// The in-process engine since the previous step's metrics: the share of
    /// prompt tokens whose KV was shared by a sibling sample or found in the
    /// prefix cache, and preemptions; and the most of the KV pool in use at
    /// once so far.
    fn engine_metrics(&mut self, m: &mut StepMetrics) {
        let Some(now) = self.rollout.engine_stats() else {
            return;
        };
        let seen = std::mem::replace(&mut self.engine_stats_seen, now.clone());
        let reused = now
            .prefill_tokens_reused
            .saturating_sub(seen.prefill_tokens_reused);
        let computed = now
            .prefill_tokens_computed
            .saturating_sub(seen.prefill_tokens_computed);
        if reused + computed > 0 {
            m.insert(
                "engine/prefill_reused_frac".into(),
                reused as f64 / (reused + computed) as f64,
            );
        }
        m.insert(
            "engine/preemptions".into(),
            now.preemptions.saturating_sub(seen.preemptions) as f64,
        );
        if now.kv_blocks_total > 0 {
            m.insert(
                "engine/kv_peak_usage".into(),
                now.kv_blocks_peak_used as f64 / now.kv_blocks_total as f64,
            );
        }
    }

    /// This rank's training-state memory, in MiB: parameters, gradients
    /// (most held during the step, and between steps) and optimizer state.
    fn memory_metrics(&self, update: &crate::workers::PpoReport, m: &mut StepMetrics) {
        let now = self.policy.memory();
        for (k, v) in now.step_metrics_mib(update.peak_gradient_bytes) {
            m.insert(k.into(), v);
        }
        m.insert(
            "memory/gradients_at_rest_mib".into(),
            now.gradients_at_rest_mib(),
        );
    }

    /// Syncs weights after a step and records the sync metrics.
    fn finish_step(&mut self, m: &mut StepMetrics) -> Result<()> {
        let phase = self.progress.begin(Phase::WeightSync, self.global_step);
        let sync = self.sync_weights()?;
        self.progress.end(phase, sync.bytes as f64 / 1e6, "MB");
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

    /// Writes a resumable checkpoint of the current step: rank 0 writes the
    /// weights, the trainer state and a whole optimizer state; with a sharded
    /// optimizer every rank writes its shard into the same staging directory.
    pub fn save_checkpoint(&self, metrics: &StepMetrics) -> Result<PathBuf> {
        let state = TrainerState {
            global_step: self.global_step,
            data_position: self.trained_pos,
            seed: self.cfg.trainer.seed,
            kl_ctrl_value: self.kl_ctrl.as_ref().map(KlController::value),
            metrics: metrics.clone(),
            extra: serde_json::to_value(&self.cfg)?,
        };
        // An updated reference (`update_ref_every_epoch`) is no longer
        // the initial model: it goes into the checkpoint.
        let reference = match (&self.reference, self.cfg.trainer.update_ref_every_epoch) {
            (Some(r), true) => Some(r.weights()),
            _ => None,
        };
        let critic = self.critic.as_ref().map(CriticWorker::checkpoint_state);
        let mut extra: Vec<(&str, &[(String, tch::Tensor)])> = reference
            .as_deref()
            .map(|w| (REF_GROUP, w))
            .into_iter()
            .collect();
        if let Some((w, o)) = &critic {
            extra.push((CRITIC_GROUP, w));
            extra.push((CRITIC_OPTIMIZER_GROUP, o));
        }
        let keep = self.cfg.trainer.max_ckpts_to_keep;
        self.policy
            .save_checkpoint(&self.ckpt_root(), &state, &extra, keep)
    }
}

/// Checkpoint group of the reference weights (`update_ref_every_epoch`).
const REF_GROUP: &str = "ref";
/// Checkpoint groups of the critic (`gae`).
const CRITIC_GROUP: &str = "critic";
const CRITIC_OPTIMIZER_GROUP: &str = "critic_optimizer";

/// Step-wise trajectories: one sample per turn (advantages come from last
/// steps); `None` when `generator.step_wise_trajectories` is off.
fn expand_step_wise(cfg: &SkyrlConfig, out: &mut GeneratorOutput) -> Option<StepRows> {
    if !cfg.generator.step_wise_trajectories {
        return None;
    }
    let sw = step_wise::expand(out);
    *out = sw.out;
    Some(StepRows {
        trajectory: sw.trajectory,
        is_last: sw.is_last,
    })
}

/// The logit temperature of training forwards: `trainer.algorithm.temperature`,
/// else the sampling temperature; greedy sampling (0) trains at 1.
fn logit_temperature(cfg: &SkyrlConfig) -> f64 {
    let sampling = cfg.generator.sampling_params.temperature;
    match cfg.trainer.algorithm.temperature.unwrap_or(sampling) {
        x if x > 0.0 => x,
        _ => 1.0,
    }
}

/// How one PPO update runs on a rank holding `1/world` of every mini-batch.
fn ppo_settings(cfg: &SkyrlConfig, world: usize, temperature: f64) -> PpoSettings<'_> {
    let t = &cfg.trainer;
    PpoSettings {
        algorithm: &t.algorithm,
        temperature,
        mini_batch_rows: (t.policy_mini_batch_size * cfg.generator.n_samples_per_prompt / world)
            as i64,
        micro_batch_rows: t.micro_train_batch_size_per_gpu.max(1) as i64,
        epochs: t.update_epochs_per_batch,
        max_grad_norm: t.policy.optimizer_config.max_grad_norm,
        rollout_logprobs: cfg.generator.sampling_params.logprobs.is_some(),
    }
}

/// The prompt of each of this rank's training rows, as a number shared by
/// the rows of one prompt (step-wise rows take their trajectory's).
fn row_prompts(group_ids: &[String], rows: &RankRows, steps: Option<&StepRows>) -> Vec<u64> {
    let mut ids: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for g in group_ids {
        let next = ids.len() as u64;
        ids.entry(g.as_str()).or_insert(next);
    }
    let of_row = |i: usize| ids[group_ids[rows.mine()[i]].as_str()];
    match steps {
        Some(s) => s.trajectory.iter().map(|&t| of_row(t)).collect(),
        None => (0..rows.mine().len()).map(of_row).collect(),
    }
}

/// Builds a [`Trainer`] and runs it. With several ranks an error names the
/// rank that reports it.
pub fn train(cfg: SkyrlConfig, envs: PluginSet, opts: &TrainOptions) -> Result<RunSummary> {
    let run = || Trainer::with_options(cfg, envs, opts)?.run(opts);
    match Dist::launch_label() {
        Some(label) => run().context(label),
        None => run(),
    }
}

/// Evaluation alone (skyrl-train's main_generate): sets up the trainer (model,
/// or the checkpoint `trainer.resume_*` selects; engines; validation data) and
/// evaluates once. Returns this rank and the metrics; with
/// `trainer.dump_eval_results` rank 0 writes the trajectories under
/// `export_path/dumped_evals/eval_only`.
pub fn evaluate_only(
    cfg: SkyrlConfig,
    envs: PluginSet,
    opts: &TrainOptions,
) -> Result<(usize, StepMetrics)> {
    let opts = TrainOptions {
        eval_only: true,
        ..opts.clone()
    };
    let mut t = Trainer::with_options(cfg, envs, &opts)?;
    t.eval_only = true;
    t.progress = Progress::new(opts.progress && t.dist.is_main(), 0, 0);
    let m = t.evaluate()?;
    t.progress.finish();
    Ok((t.dist.rank(), m))
}

/// Ensures a directory exists (helper for callers preparing a run dir).
pub fn ensure_dir(p: &Path) -> Result<()> {
    std::fs::create_dir_all(p).with_context(|| format!("cannot create {}", p.display()))
}
