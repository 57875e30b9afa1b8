//! skyrl-train's evaluation metrics (`get_metrics_from_generator_output`,
//! `calculate_per_dataset_metrics`), over all trajectories and per data
//! source: `avg_score` (mean total reward), `pass_at_<n>` (share of prompts
//! with a trajectory whose last-token reward is positive) and
//! `mean_positive_reward` (mean total of the positive token rewards).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::metrics::StepMetrics;

/// What evaluation keeps of one trajectory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct EvalSample {
    /// The prompt (dataset row) it was sampled for.
    pub uid: u64,
    /// `data_source` of the row (`unknown` when absent).
    pub data_source: String,
    pub reward_sum: f64,
    pub positive_sum: f64,
    pub last_reward: f64,
}

impl EvalSample {
    /// From a trajectory's per-token rewards.
    pub fn new(uid: u64, data_source: &str, token_rewards: &[f32]) -> Self {
        Self {
            uid,
            data_source: data_source.to_string(),
            reward_sum: token_rewards.iter().map(|&r| r as f64).sum(),
            positive_sum: token_rewards.iter().map(|&r| (r as f64).max(0.0)).sum(),
            last_reward: token_rewards.last().map_or(0.0, |&r| r as f64),
        }
    }
}

/// `eval/all/*` and `eval/<data_source>/*` (`/` in a source becomes `_`).
pub(super) fn eval_metrics(samples: &[EvalSample], n: usize) -> StepMetrics {
    let mut m = StepMetrics::new();
    if samples.is_empty() {
        return m;
    }
    let mut by_source: BTreeMap<&str, Vec<&EvalSample>> = BTreeMap::new();
    for s in samples {
        by_source.entry(&s.data_source).or_default().push(s);
    }
    let all: Vec<&EvalSample> = samples.iter().collect();
    let groups = std::iter::once(("all".to_string(), all))
        .chain(by_source.into_iter().map(|(k, v)| (k.replace('/', "_"), v)));
    for (name, part) in groups {
        let len = part.len() as f64;
        let mut passed: BTreeMap<u64, bool> = BTreeMap::new();
        for s in &part {
            *passed.entry(s.uid).or_default() |= s.last_reward > 0.0;
        }
        let pass = passed.values().filter(|&&p| p).count() as f64 / passed.len() as f64;
        m.insert(
            format!("eval/{name}/avg_score"),
            part.iter().map(|s| s.reward_sum).sum::<f64>() / len,
        );
        m.insert(format!("eval/{name}/pass_at_{n}"), pass);
        m.insert(
            format!("eval/{name}/mean_positive_reward"),
            part.iter().map(|s| s.positive_sum).sum::<f64>() / len,
        );
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_at_n_counts_prompts_with_any_positive_last_reward() {
        let s = |uid, ds, r: &[f32]| EvalSample::new(uid, ds, r);
        let samples = [
            s(0, "gsm8k", &[0.0, 1.0]),
            s(0, "gsm8k", &[0.0, 0.0]),
            s(1, "gsm8k", &[0.0, 0.0]),
            s(1, "gsm8k", &[0.5, -1.0]),
            s(2, "math/hard", &[0.0, 2.0]),
            s(2, "math/hard", &[0.0, 0.0]),
        ];
        let m = eval_metrics(&samples, 2);
        assert_eq!(m["eval/all/pass_at_2"], 2.0 / 3.0);
        assert_eq!(m["eval/gsm8k/pass_at_2"], 0.5);
        assert_eq!(m["eval/math_hard/pass_at_2"], 1.0);
        assert_eq!(m["eval/gsm8k/avg_score"], (1.0 + 0.0 + 0.0 - 0.5) / 4.0);
        assert_eq!(m["eval/gsm8k/mean_positive_reward"], (1.0 + 0.5) / 4.0);
        assert_eq!(m["eval/all/avg_score"], (1.0 - 0.5 + 2.0) / 6.0);
    }
}
