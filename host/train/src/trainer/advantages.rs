//! From generated trajectories to what the policy update needs: the output
//! filters (zero reward on non-stop, overlong filtering, zero-variance
//! groups), the in-reward KL penalty, and advantages (per group, or over
//! last steps for step-wise trajectories), optionally normalised.
//!
//! Each rank holds its share of the batch's rows ([`RankRows`]). What needs
//! the whole batch (groups straddle ranks; the KL controller and batch
//! normalisation see every row) is computed after a gather, so every
//! advantage equals the single-process one.

use anyhow::Result;
use serde::{Deserialize, Serialize};
use skyrl_rollout::GeneratorOutput;
use tch::{Kind, Tensor};

use crate::algorithms::advantage::normalize_advantages;
use crate::algorithms::kl::{apply_kl_penalty_over_ranks, KlPenaltyInput};
use crate::algorithms::{
    filters, step_wise, AdvantageEstimatorRegistry, AdvantageInput, AdvantageParams, KlController,
    KlEstimator,
};
use crate::batch::TrainingBatch;
use crate::config::SkyrlConfig;
use crate::dist::{rank_rows, Dist};
use crate::metrics::StepMetrics;

/// Which rows of the batch this rank holds, for every rank.
#[derive(Debug, Clone)]
pub(super) struct RankRows {
    /// `by_rank[r][i]`: the batch row of rank `r`'s local row `i`.
    pub by_rank: Vec<Vec<usize>>,
    pub rank: usize,
    /// Rows of the whole batch.
    pub total: usize,
}

impl RankRows {
    /// The split of `total` rows into mini-batches of `mini_rows` over `world` ranks.
    pub fn split(total: usize, mini_rows: usize, rank: usize, world: usize) -> Self {
        Self {
            by_rank: (0..world)
                .map(|r| rank_rows(total, mini_rows, r, world))
                .collect(),
            rank,
            total,
        }
    }

    /// This rank's rows.
    pub fn mine(&self) -> &[usize] {
        &self.by_rank[self.rank]
    }

    /// Index, in the rank-major concatenation of every rank's rows, of each
    /// batch row: `order[g]` is where batch row `g` sits.
    pub fn order(&self) -> Vec<i64> {
        let mut order = vec![0i64; self.total];
        let mut k = 0;
        for rows in &self.by_rank {
            for &g in rows {
                order[g] = k;
                k += 1;
            }
        }
        order
    }
}

/// What the zero-variance filter needs of a row.
#[derive(Clone, Serialize, Deserialize)]
struct FilterRow {
    reward: f64,
    live: bool,
}

/// Applies the configured output filters to this rank's rows in place;
/// returns how many rows of the whole batch the zero-variance filter masked.
pub(super) fn apply_output_filters(
    cfg: &SkyrlConfig,
    dist: &Dist,
    rows: &RankRows,
    out: &mut GeneratorOutput,
    group_ids: &[String],
) -> Result<usize> {
    let g = &cfg.generator;
    if g.zero_reward_on_non_stop {
        let mut scalar = out.sequence_rewards();
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
    if !cfg.trainer.algorithm.zero_variance_filter {
        return Ok(0);
    }
    // Groups may straddle ranks: decide on the whole batch.
    let local: Vec<FilterRow> = out
        .sequence_rewards()
        .into_iter()
        .zip(&out.loss_masks)
        .map(|(reward, m)| FilterRow {
            reward,
            live: m.iter().any(|&v| v != 0.0),
        })
        .collect();
    let mut rewards = vec![0.0; rows.total];
    let mut masks = vec![vec![0.0f32]; rows.total];
    for (r, part) in dist.all_gather_json(&local)?.into_iter().enumerate() {
        for (i, row) in part.into_iter().enumerate() {
            let g = rows.by_rank[r][i];
            rewards[g] = row.reward;
            masks[g][0] = f32::from(u8::from(row.live));
        }
    }
    let tol = cfg.trainer.algorithm.zero_variance_filter_tol;
    let masked = filters::apply_zero_variance_filter(&rewards, group_ids, &mut masks, tol)?;
    for (i, &g) in rows.mine().iter().enumerate() {
        if masks[g][0] == 0.0 {
            out.loss_masks[i].iter_mut().for_each(|v| *v = 0.0);
        }
    }
    Ok(masked)
}

/// Where each step-wise row came from (`skyrl_rollout::step_wise::expand`).
pub(super) struct StepRows {
    pub trajectory: Vec<usize>,
    pub is_last: Vec<bool>,
}

/// Inputs of [`compute_advantages`].
pub(super) struct AdvantageJob<'a> {
    pub batch: &'a TrainingBatch,
    pub old_logprobs: &'a Tensor,
    pub ref_logprobs: Option<&'a Tensor>,
    /// Group id of every row of the whole batch.
    pub group_ids: &'a [String],
    pub rows: &'a RankRows,
    pub steps: Option<&'a StepRows>,
    /// `[N, R]` critic values of this rank's rows (`gae`).
    pub values: Option<&'a Tensor>,
}

/// Advantages `[N, R]` of this rank's rows, and the returns (value targets)
/// when the estimator makes them for a critic.
pub(super) struct Advantages {
    pub advantages: Tensor,
    pub returns: Option<Tensor>,
}

/// Token rewards (with the in-reward KL penalty when configured) and the
/// advantages `[N, R]` of this rank's rows; KL-controller metrics go into
/// `metrics`.
pub(super) fn compute_advantages(
    cfg: &SkyrlConfig,
    dist: &Dist,
    registry: &AdvantageEstimatorRegistry,
    kl_ctrl: Option<&mut KlController>,
    job: &AdvantageJob,
    metrics: &mut StepMetrics,
) -> Result<Advantages> {
    let a = &cfg.trainer.algorithm;
    let batch = job.batch;
    let token_rewards = match (job.ref_logprobs, kl_ctrl) {
        (Some(ref_lp), Some(ctrl)) if a.use_kl_in_reward => {
            let input = KlPenaltyInput {
                token_level_rewards: &batch.token_rewards,
                log_probs: job.old_logprobs,
                ref_log_probs: ref_lp,
                loss_mask: &batch.response_mask,
                estimator: a.kl_estimator_type.parse::<KlEstimator>()?,
            };
            let p = apply_kl_penalty_over_ranks(&input, ctrl, |x| dist.sum_f64(x))?;
            metrics.insert("kl_in_reward/mean_kl".into(), p.mean_kl);
            metrics.insert("kl_in_reward/mean_max_kl".into(), p.mean_max_kl);
            metrics.insert("kl_in_reward/coef".into(), ctrl.value());
            p.token_level_rewards
        }
        _ => batch.token_rewards.shallow_clone(),
    };
    let estimator = registry.get(&a.advantage_estimator)?;
    let params = AdvantageParams::from(a);
    if let Some(steps) = job.steps {
        // Step-wise rows stay on one process (refused with several ranks).
        let adv = step_wise::advantages(
            estimator.as_ref(),
            &params,
            &token_rewards,
            &batch.response_mask,
            job.group_ids,
            &steps.trajectory,
            &steps.is_last,
        )?;
        return Ok(Advantages {
            advantages: normalized(a.advantage_batch_normalize, adv, &batch.response_mask),
            returns: None,
        });
    }
    // The whole batch, in batch order.
    let whole = |t: &Tensor| -> Result<Tensor> {
        let gathered = dist.all_gather_rows(t)?;
        let width = gathered.size()[2];
        let order = Tensor::from_slice(&job.rows.order()).to_device(t.device());
        Ok(gathered.view([-1, width]).index_select(0, &order))
    };
    let all_rewards = whole(&token_rewards)?;
    let all_mask = whole(&batch.response_mask)?;
    let all_values = job.values.map(whole).transpose()?;
    let out = estimator.compute(
        &AdvantageInput {
            token_level_rewards: &all_rewards,
            response_mask: &all_mask,
            group_ids: job.group_ids,
            values: all_values.as_ref(),
        },
        &params,
    )?;
    let adv = normalized(a.advantage_batch_normalize, out.advantages, &all_mask);
    let mine: Vec<i64> = job.rows.mine().iter().map(|&g| g as i64).collect();
    let mine = Tensor::from_slice(&mine).to_device(adv.device());
    let mine_of = |t: &Tensor| {
        t.index_select(0, &mine)
            .narrow(1, 0, batch.response_len())
            .to_kind(Kind::Float)
    };
    Ok(Advantages {
        advantages: mine_of(&adv),
        returns: all_values.as_ref().map(|_| mine_of(&out.returns)),
    })
}

fn normalized(on: bool, adv: Tensor, mask: &Tensor) -> Tensor {
    if on {
        normalize_advantages(&adv, mask)
    } else {
        adv
    }
}
