//! The metrics one training step reports (names as skyrl logs them where
//! skyrl has them): rewards before and after filters, lengths, turns, stop
//! reasons, env and rubric metrics, loss parts, grad norm, lr and timings.
//!
//! Each rank measures its rows ([`StepFacts`]); the facts of all ranks are
//! gathered and merged, so every rank reports the metrics of the whole batch.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use skyrl_rollout::{GeneratorOutput, ENV_ERROR};

use crate::metrics::{MeanSums, StepMetrics};
use crate::workers::PpoReport;

/// Mean of `xs` (0 when empty).
pub(super) fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// What one rank measured in a step, mergeable over ranks.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct StepFacts {
    /// Per trajectory, before the filters: policy version at training time
    /// minus the version that generated it, and the reward.
    pub staleness: Vec<f64>,
    pub raw_rewards: Vec<f64>,
    pub generated_tokens: f64,
    /// Tokens (prompt and response) the update trained on.
    pub trained_tokens: f64,
    /// Per trained row (after filters and step-wise expansion).
    pub final_rewards: Vec<f64>,
    pub response_lens: Vec<f64>,
    pub turns: Vec<f64>,
    pub stop_reasons: Vec<String>,
    /// Means over this rank's trajectories, and how many there were.
    pub env_metrics: BTreeMap<String, f64>,
    pub reward_metrics: BTreeMap<String, f64>,
    pub trajectories: f64,
    /// Per-micro-batch values of the update's metrics.
    pub update: BTreeMap<String, Vec<f64>>,
    pub grad_norms: Vec<f64>,
    pub lrs: Vec<f64>,
    /// Seconds (the slowest rank's after a merge).
    pub generate_secs: f64,
    pub wait_secs: f64,
    pub train_secs: f64,
}

impl StepFacts {
    /// Facts of the generated `out` trained at policy version `global_step`
    /// (before the filters change it).
    pub fn of_rollouts(out: &GeneratorOutput, global_step: u64) -> Self {
        Self {
            staleness: out
                .policy_versions
                .iter()
                .map(|&v| global_step.saturating_sub(v) as f64)
                .collect(),
            raw_rewards: out.sequence_rewards(),
            generated_tokens: out
                .loss_masks
                .iter()
                .map(|m| m.iter().map(|&x| x as f64).sum::<f64>())
                .sum(),
            env_metrics: out.env_metrics.clone(),
            reward_metrics: out.reward_metrics.clone(),
            trajectories: out.len() as f64,
            ..Self::default()
        }
    }

    /// Adds the facts of the trained rows and of the update.
    pub fn add_training(&mut self, trained: &GeneratorOutput, update: &PpoReport) {
        self.trained_tokens = trained
            .prompt_token_ids
            .iter()
            .zip(&trained.response_ids)
            .map(|(p, r)| (p.len() + r.len()) as f64)
            .sum();
        self.final_rewards = trained.sequence_rewards();
        self.response_lens = trained
            .response_ids
            .iter()
            .map(|r| r.len() as f64)
            .collect();
        self.turns = trained.num_turns.iter().map(|&x| x as f64).collect();
        self.stop_reasons = trained.stop_reasons.clone();
        self.update = update.metrics.clone();
        self.grad_norms = update.grad_norms.clone();
        self.lrs = update.lrs.clone();
    }

    /// The facts of every rank as one: rows concatenated, means weighted by
    /// trajectories, times of the slowest rank. Grad norms and learning
    /// rates are the same on every rank after the gradient sync.
    pub fn merge(mut parts: Vec<StepFacts>) -> StepFacts {
        if parts.len() == 1 {
            return parts.remove(0);
        }
        let mut all = StepFacts::default();
        let (mut env, mut rew) = (MeanSums::default(), MeanSums::default());
        for (k, p) in parts.into_iter().enumerate() {
            all.staleness.extend(p.staleness);
            all.raw_rewards.extend(p.raw_rewards);
            all.generated_tokens += p.generated_tokens;
            all.trained_tokens += p.trained_tokens;
            all.final_rewards.extend(p.final_rewards);
            all.response_lens.extend(p.response_lens);
            all.turns.extend(p.turns);
            all.stop_reasons.extend(p.stop_reasons);
            env.add_means(&p.env_metrics, p.trajectories);
            rew.add_means(&p.reward_metrics, p.trajectories);
            all.trajectories += p.trajectories;
            for (name, vs) in p.update {
                all.update.entry(name).or_default().extend(vs);
            }
            if k == 0 {
                all.grad_norms = p.grad_norms;
                all.lrs = p.lrs;
            }
            all.generate_secs = all.generate_secs.max(p.generate_secs);
            all.wait_secs = all.wait_secs.max(p.wait_secs);
            all.train_secs = all.train_secs.max(p.train_secs);
        }
        all.env_metrics = env.means();
        all.reward_metrics = rew.means();
        all
    }
}

/// The step's metrics from the merged `f`; `extra` (e.g. KL-controller
/// values, filter fractions) is merged in.
pub(super) fn step_metrics(
    f: &StepFacts,
    epoch: usize,
    step_secs: f64,
    extra: StepMetrics,
) -> StepMetrics {
    let mut m = StepMetrics::new();
    m.insert("epoch".into(), epoch as f64);
    m.insert("train/samples".into(), f.final_rewards.len() as f64);
    m.insert("async/staleness_mean".into(), mean(&f.staleness));
    let max_staleness = f.staleness.iter().cloned().fold(0.0, f64::max);
    m.insert("async/staleness_max".into(), max_staleness);
    m.insert("time/wait_for_rollouts".into(), f.wait_secs);
    m.extend(extra);
    m.insert("reward/mean".into(), mean(&f.raw_rewards));
    m.insert("reward/mean_after_filters".into(), mean(&f.final_rewards));
    m.insert("response_length/mean".into(), mean(&f.response_lens));
    m.insert(
        "response_length/max".into(),
        f.response_lens.iter().cloned().fold(0.0, f64::max),
    );
    m.insert("num_turns/mean".into(), mean(&f.turns));
    let n = f.stop_reasons.len().max(1) as f64;
    for reason in ["stop", "length", ENV_ERROR] {
        let count = f.stop_reasons.iter().filter(|s| *s == reason).count();
        m.insert(format!("stop_reason/{reason}"), count as f64 / n);
    }
    for (k, v) in &f.env_metrics {
        m.insert(format!("env/{k}"), *v);
    }
    for (k, v) in &f.reward_metrics {
        m.insert(format!("reward/{k}"), *v);
    }
    for (k, v) in &f.update {
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
    m.insert("grad_norm".into(), mean(&f.grad_norms));
    m.insert("lr".into(), f.lrs.last().copied().unwrap_or(0.0));
    m.insert("time/generate".into(), f.generate_secs);
    m.insert("time/train".into(), f.train_secs);
    m.insert("time/step".into(), step_secs);
    m.insert(
        "tokens_per_s".into(),
        f.generated_tokens / f.generate_secs.max(1e-9),
    );
    m.insert("train/tokens".into(), f.trained_tokens);
    m.insert(
        "train/tokens_per_s".into(),
        f.trained_tokens / f.train_secs.max(1e-9),
    );
    m
}
