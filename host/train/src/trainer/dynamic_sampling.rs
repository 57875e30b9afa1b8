//! `trainer.algorithm.dynamic_sampling` in the sync loop, after skyrl-train's
//! trainer: `filter` (DAPO) drops prompt groups whose rewards all agree and
//! generates further batches until `train_batch_size` groups with signal are
//! collected; `replace` (POLARIS) overwrites such groups with copies of
//! groups that have signal, or generates a new batch when too few have it.
//! Both stop the run after `max_sample_batches` generated batches without
//! enough signal. With several ranks every rank gathers the whole generated
//! batch and runs the same seeded sampler, so all take the same decisions,
//! then trains on its share of the ready batch.

use anyhow::{bail, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use skyrl_rollout::GeneratorOutput;

use super::advantages::RankRows;
use crate::algorithms::filters::{
    replace_sampling, zero_variance_keep, DynamicSamplingOutcome, FilterSampler, SampleBatch,
};
use crate::config::SkyrlConfig;
use crate::dist::Dist;
use crate::metrics::StepMetrics;

/// The generator output as a batch dynamic sampling can cut and join.
pub(super) struct OutBatch(pub GeneratorOutput);

impl SampleBatch for OutBatch {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn select(&self, idx: &[usize]) -> Self {
        let o = &self.0;
        let pick = |v: &Vec<Vec<i64>>| idx.iter().map(|&i| v[i].clone()).collect::<Vec<_>>();
        let pick_f = |v: &Vec<Vec<f32>>| idx.iter().map(|&i| v[i].clone()).collect::<Vec<_>>();
        OutBatch(GeneratorOutput {
            prompt_token_ids: pick(&o.prompt_token_ids),
            response_ids: pick(&o.response_ids),
            rewards: pick_f(&o.rewards),
            loss_masks: pick_f(&o.loss_masks),
            stop_reasons: idx.iter().map(|&i| o.stop_reasons[i].clone()).collect(),
            rollout_logprobs: pick_f(&o.rollout_logprobs),
            env_metrics: o.env_metrics.clone(),
            num_turns: idx.iter().map(|&i| o.num_turns[i]).collect(),
            policy_versions: idx.iter().map(|&i| o.policy_versions[i]).collect(),
            turn_spans: idx.iter().map(|&i| o.turn_spans[i].clone()).collect(),
            reward_metrics: o.reward_metrics.clone(),
        })
    }

    fn concat(parts: Vec<Self>) -> Self {
        let mut parts = parts.into_iter();
        let mut all = parts.next().map(|p| p.0).unwrap_or_default();
        for p in parts {
            all.append(p.0);
        }
        OutBatch(all)
    }
}

/// The whole generated batch in batch order, from `mine`, this rank's rows
/// of `rows` (every rank sends its rows to every other).
pub(super) fn whole_batch(
    dist: &Dist,
    rows: &RankRows,
    mine: GeneratorOutput,
) -> Result<GeneratorOutput> {
    if dist.world() == 1 {
        return Ok(mine);
    }
    let parts = dist.all_gather_binary(mine)?;
    let rank_major = OutBatch::concat(parts.into_iter().map(OutBatch).collect());
    if rank_major.len() != rows.total {
        bail!(
            "the ranks sent {} rollouts for a batch of {} rows",
            rank_major.len(),
            rows.total
        );
    }
    let order: Vec<usize> = rows.order().into_iter().map(|i| i as usize).collect();
    Ok(rank_major.select(&order).0)
}

/// This rank's rows of a whole ready batch `out`, split as every batch is:
/// mini-batches of `mini_rows` rows, each shared evenly by the ranks.
pub(super) fn rank_share(
    dist: &Dist,
    out: GeneratorOutput,
    mini_rows: usize,
) -> (GeneratorOutput, RankRows) {
    let rows = RankRows::split(out.len(), mini_rows, dist.rank(), dist.world());
    let out = match dist.world() {
        1 => out,
        _ => OutBatch(out).select(rows.mine()).0,
    };
    (out, rows)
}

/// The two strategies, with their state across generated batches.
pub(super) enum DynamicSampler {
    Filter(FilterSampler<OutBatch>),
    Replace {
        min_replace_ratio: f64,
        max_sample_batches: i64,
        rounds: i64,
        rng: Box<ChaCha8Rng>,
    },
}

/// What one generated batch led to.
pub(super) enum Sampled {
    /// Train on this output with these group ids.
    Ready(Box<GeneratorOutput>, Vec<String>),
    /// Generate another batch.
    Again,
}

impl DynamicSampler {
    /// The configured strategy, or `None` when `type` is null.
    pub fn from_config(cfg: &SkyrlConfig, seed: u64) -> Result<Option<Self>> {
        let d = &cfg.trainer.algorithm.dynamic_sampling;
        let n = cfg.generator.n_samples_per_prompt;
        Ok(match d.kind.as_deref() {
            None => None,
            Some("filter") => Some(Self::Filter(FilterSampler::new(
                cfg.trainer.train_batch_size,
                n,
                d.max_sample_batches,
            ))),
            Some("replace") => Some(Self::Replace {
                min_replace_ratio: d.min_replace_ratio,
                max_sample_batches: d.max_sample_batches,
                rounds: 0,
                rng: Box::new(ChaCha8Rng::seed_from_u64(seed)),
            }),
            Some(other) => bail!(
                "trainer.algorithm.dynamic_sampling.type `{other}` must be filter, replace or null"
            ),
        })
    }

    /// Takes one generated batch (`uids`: each trajectory's prompt group);
    /// counts its zero-variance groups into `m`.
    pub fn push(
        &mut self,
        out: GeneratorOutput,
        uids: Vec<String>,
        n_samples_per_prompt: usize,
        m: &mut StepMetrics,
    ) -> Result<Sampled> {
        let rewards = out.sequence_rewards();
        let keep = zero_variance_keep(&rewards, &uids, None, 0.0)?;
        let flat = (uids.len() - keep.len()) / n_samples_per_prompt.max(1);
        *m.entry("dynamic_sampling/zero_variance_prompts".into())
            .or_default() += flat as f64;
        *m.entry("dynamic_sampling/batches".into()).or_default() += 1.0;
        let outcome = match self {
            Self::Filter(f) => f.push(OutBatch(out), &rewards, &uids)?,
            Self::Replace {
                min_replace_ratio,
                max_sample_batches,
                rounds,
                rng,
            } => {
                *rounds += 1;
                let o = replace_sampling(
                    OutBatch(out),
                    &rewards,
                    &uids,
                    n_samples_per_prompt,
                    *min_replace_ratio,
                    rng.as_mut(),
                )?;
                match o {
                    DynamicSamplingOutcome::KeepSampling if *max_sample_batches >= 0 && *rounds >= *max_sample_batches => bail!(
                        "dynamic sampling (replace): no batch with more than min_replace_ratio of its prompts \
                         having reward variance after {rounds} batches (trainer.algorithm.dynamic_sampling.max_sample_batches); \
                         the data may be too easy or too hard"
                    ),
                    DynamicSamplingOutcome::Ready { .. } => {
                        m.insert("dynamic_sampling/replaced_prompts".into(), flat as f64);
                        *rounds = 0;
                        o
                    }
                    o => o,
                }
            }
        };
        Ok(match outcome {
            DynamicSamplingOutcome::Ready { batch, uids } => {
                Sampled::Ready(Box::new(batch.0), uids)
            }
            DynamicSamplingOutcome::KeepSampling => Sampled::Again,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_config_str;

    /// Two prompt groups of `n = 2`: `a` with rewards (1, 0), `b` with (1, 1).
    fn batch(tag: &str) -> (GeneratorOutput, Vec<String>) {
        let rewards = [1.0f32, 0.0, 1.0, 1.0];
        let out = GeneratorOutput {
            prompt_token_ids: (0..4).map(|i| vec![i]).collect(),
            response_ids: (0..4).map(|i| vec![10 + i, 20 + i]).collect(),
            rewards: rewards.iter().map(|&r| vec![0.0, r]).collect(),
            loss_masks: vec![vec![1.0, 1.0]; 4],
            stop_reasons: vec!["stop".into(); 4],
            rollout_logprobs: vec![vec![-0.5, -0.5]; 4],
            num_turns: vec![1; 4],
            policy_versions: vec![0; 4],
            turn_spans: vec![vec![(0, 2)]; 4],
            ..Default::default()
        };
        let uids = ["a", "a", "b", "b"]
            .iter()
            .map(|u| format!("{tag}{u}"))
            .collect();
        (out, uids)
    }

    fn sampler(kind: &str, max: i64) -> DynamicSampler {
        let cfg = load_config_str(
            "",
            "t",
            &[
                format!("trainer.algorithm.dynamic_sampling.type={kind}"),
                format!("trainer.algorithm.dynamic_sampling.max_sample_batches={max}"),
                "trainer.train_batch_size=2".into(),
                "trainer.policy_mini_batch_size=2".into(),
                "generator.n_samples_per_prompt=2".into(),
            ],
        )
        .unwrap();
        DynamicSampler::from_config(&cfg, 1).unwrap().unwrap()
    }

    #[test]
    fn filter_drops_flat_groups_and_samples_until_the_batch_is_full() {
        let mut s = sampler("filter", 3);
        let mut m = StepMetrics::new();
        let (out, uids) = batch("1");
        assert!(matches!(
            s.push(out, uids, 2, &mut m).unwrap(),
            Sampled::Again
        ));
        let (out, uids) = batch("2");
        let Sampled::Ready(out, uids) = s.push(out, uids, 2, &mut m).unwrap() else {
            panic!("two groups with signal make the batch")
        };
        assert_eq!(uids, ["1a", "1a", "2a", "2a"]);
        assert_eq!(
            out.response_ids,
            [vec![10, 20], vec![11, 21], vec![10, 20], vec![11, 21]]
        );
        assert_eq!(m["dynamic_sampling/batches"], 2.0);
        assert_eq!(m["dynamic_sampling/zero_variance_prompts"], 2.0);
    }

    #[test]
    fn filter_stops_after_max_sample_batches() {
        let mut s = sampler("filter", 1);
        let (out, uids) = batch("1");
        let e = s.push(out, uids, 2, &mut StepMetrics::new()).err().unwrap();
        assert!(format!("{e:#}").contains("max_sample_batches"), "{e:#}");
    }

    #[test]
    fn replace_copies_a_group_with_signal_over_the_flat_one() {
        let mut s = sampler("replace", 3);
        let mut m = StepMetrics::new();
        let (out, uids) = batch("");
        let Sampled::Ready(out, uids) = s.push(out, uids, 2, &mut m).unwrap() else {
            panic!("half the groups have signal (> min_replace_ratio 0.3)")
        };
        assert_eq!(uids, ["a", "a", "a", "a"]);
        assert_eq!(out.sequence_rewards(), [1.0, 0.0, 1.0, 0.0]);
        assert_eq!(m["dynamic_sampling/replaced_prompts"], 1.0);
    }
}
