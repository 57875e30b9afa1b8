//! Batch filters applied between generation and training: zero-variance groups,
//! overlong filtering, zero reward on non-stop, and dynamic sampling
//! (`filter` as in DAPO, `replace` as in POLARIS), after skyrl-train's trainer utils.

use std::collections::{BTreeMap, HashMap};

use anyhow::{bail, Result};
use rand::seq::SliceRandom;
use rand::Rng;

/// Indices of trajectories to keep: a group (same uid) is dropped only when it
/// has more than one *live* trajectory (`live[i]`, e.g. loss mask not all zero)
/// and all their rewards lie within `tol` of each other.
pub fn zero_variance_keep(
    rewards: &[f64],
    uids: &[String],
    live: Option<&[bool]>,
    tol: f64,
) -> Result<Vec<usize>> {
    if rewards.len() != uids.len() || live.is_some_and(|l| l.len() != uids.len()) {
        bail!(
            "zero_variance_keep: {} rewards, {} uids{}",
            rewards.len(),
            uids.len(),
            live.map(|l| format!(", {} live flags", l.len()))
                .unwrap_or_default()
        );
    }
    let mut groups: HashMap<&str, Vec<f64>> = HashMap::new();
    for (i, (uid, r)) in uids.iter().zip(rewards).enumerate() {
        if live.is_none_or(|l| l[i]) {
            groups.entry(uid.as_str()).or_default().push(*r);
        }
    }
    let zero_var = |uid: &str| {
        groups.get(uid).is_some_and(|v| {
            let max = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
            v.len() > 1 && max - min <= tol
        })
    };
    Ok((0..uids.len()).filter(|&i| !zero_var(&uids[i])).collect())
}

/// Zeroes the loss masks of zero-variance groups (live rewards within `tol`
/// of each other) in place; returns how many trajectories were masked.
pub fn apply_zero_variance_filter<M: Copy + Default + PartialEq>(
    rewards: &[f64],
    uids: &[String],
    loss_masks: &mut [Vec<M>],
    tol: f64,
) -> Result<usize> {
    let live: Vec<bool> = loss_masks
        .iter()
        .map(|m| m.iter().any(|v| *v != M::default()))
        .collect();
    let keep = zero_variance_keep(rewards, uids, Some(&live), tol)?;
    let mut kept = vec![false; uids.len()];
    for i in keep {
        kept[i] = true;
    }
    let mut n = 0;
    for (mask, k) in loss_masks.iter_mut().zip(kept) {
        if !k {
            mask.iter_mut().for_each(|v| *v = M::default());
            n += 1;
        }
    }
    Ok(n)
}

/// Overlong filtering (DAPO): zero the whole loss mask of every trajectory whose
/// stop reason is not `"stop"` (truncated / aborted). Returns how many were masked.
pub fn apply_overlong_filtering<M: Copy + Default>(
    loss_masks: &mut [Vec<M>],
    stop_reasons: &[String],
) -> Result<usize> {
    if loss_masks.len() != stop_reasons.len() {
        bail!(
            "overlong filtering: {} loss masks but {} stop reasons",
            loss_masks.len(),
            stop_reasons.len()
        );
    }
    let mut n = 0;
    for (mask, reason) in loss_masks.iter_mut().zip(stop_reasons) {
        if reason != "stop" {
            mask.iter_mut().for_each(|v| *v = M::default());
            n += 1;
        }
    }
    Ok(n)
}

/// `zero_reward_on_non_stop`: reward 0 for every trajectory whose stop reason is not `"stop"`.
pub fn zero_reward_on_non_stop(rewards: &mut [f64], stop_reasons: &[String]) -> Result<usize> {
    if rewards.len() != stop_reasons.len() {
        bail!(
            "zero_reward_on_non_stop: {} rewards but {} stop reasons",
            rewards.len(),
            stop_reasons.len()
        );
    }
    let mut n = 0;
    for (r, reason) in rewards.iter_mut().zip(stop_reasons) {
        if reason != "stop" {
            *r = 0.0;
            n += 1;
        }
    }
    Ok(n)
}

/// A batch of trajectories that dynamic sampling can subset and concatenate.
pub trait SampleBatch: Sized {
    /// Number of trajectories.
    fn len(&self) -> usize;
    /// Whether the batch is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The trajectories at `indices`, in that order.
    fn select(&self, indices: &[usize]) -> Self;
    /// Concatenation of `parts`, in order.
    fn concat(parts: Vec<Self>) -> Self;
}

/// Population standard deviation per uid, in order of first appearance.
fn group_std(rewards: &[f64], uids: &[String]) -> Vec<(String, f64, Vec<usize>)> {
    let mut order: Vec<String> = Vec::new();
    let mut map: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, u) in uids.iter().enumerate() {
        map.entry(u.clone())
            .or_insert_with(|| {
                order.push(u.clone());
                Vec::new()
            })
            .push(i);
    }
    order
        .into_iter()
        .map(|u| {
            let idx = map.remove(&u).unwrap_or_default();
            let n = idx.len() as f64;
            let mean = idx.iter().map(|&i| rewards[i]).sum::<f64>() / n;
            let var = idx
                .iter()
                .map(|&i| (rewards[i] - mean).powi(2))
                .sum::<f64>()
                / n;
            (u, var.sqrt(), idx)
        })
        .collect()
}

/// Outcome of one dynamic-sampling round.
pub enum DynamicSamplingOutcome<B> {
    /// Train on this batch (with these uids).
    Ready { batch: B, uids: Vec<String> },
    /// Not enough signal yet: generate another batch and call again.
    KeepSampling,
}

/// Accumulates groups across generation rounds for the `filter` strategy.
pub struct FilterSampler<B> {
    /// Prompts (groups) needed per training batch (`trainer.train_batch_size`).
    pub target_prompts: usize,
    pub n_samples_per_prompt: usize,
    /// -1 = unlimited.
    pub max_sample_batches: i64,
    collected: Vec<B>,
    uids: Vec<String>,
    prompts: usize,
    rounds: i64,
}

impl<B: SampleBatch> FilterSampler<B> {
    pub fn new(
        target_prompts: usize,
        n_samples_per_prompt: usize,
        max_sample_batches: i64,
    ) -> Self {
        Self {
            target_prompts,
            n_samples_per_prompt,
            max_sample_batches,
            collected: Vec::new(),
            uids: Vec::new(),
            prompts: 0,
            rounds: 0,
        }
    }

    /// Rounds consumed so far for the current training batch.
    pub fn rounds(&self) -> i64 {
        self.rounds
    }

    /// Adds one generated batch: keeps groups with reward std > 0 (or all when
    /// `n_samples_per_prompt == 1`); returns the truncated batch once enough
    /// prompts are collected. Errors after `max_sample_batches` rounds.
    pub fn push(
        &mut self,
        batch: B,
        rewards: &[f64],
        uids: &[String],
    ) -> Result<DynamicSamplingOutcome<B>> {
        if batch.len() != uids.len() || rewards.len() != uids.len() {
            bail!(
                "dynamic sampling: batch of {}, {} rewards, {} uids",
                batch.len(),
                rewards.len(),
                uids.len()
            );
        }
        self.rounds += 1;
        let mut kept = Vec::new();
        for (_, std, idx) in group_std(rewards, uids) {
            if std > 0.0 || self.n_samples_per_prompt == 1 {
                self.prompts += 1;
                kept.extend(idx);
            }
        }
        self.uids.extend(kept.iter().map(|&i| uids[i].clone()));
        self.collected.push(batch.select(&kept));
        if self.prompts < self.target_prompts {
            if self.max_sample_batches >= 0 && self.rounds >= self.max_sample_batches {
                bail!(
                    "dynamic sampling (filter) collected only {} of {} prompts with reward variance after {} batches \
                     (trainer.algorithm.dynamic_sampling.max_sample_batches); the data may be too easy or too hard",
                    self.prompts,
                    self.target_prompts,
                    self.rounds
                );
            }
            tracing::info!(
                "dynamic sampling (filter): {} < {} prompts after {} batches, sampling again",
                self.prompts,
                self.target_prompts,
                self.rounds
            );
            return Ok(DynamicSamplingOutcome::KeepSampling);
        }
        let all = B::concat(std::mem::take(&mut self.collected));
        let mut uids = std::mem::take(&mut self.uids);
        let max = self.target_prompts * self.n_samples_per_prompt;
        let batch = if uids.len() > max {
            uids.truncate(max);
            all.select(&(0..max).collect::<Vec<_>>())
        } else {
            all
        };
        self.prompts = 0;
        self.rounds = 0;
        Ok(DynamicSamplingOutcome::Ready { batch, uids })
    }
}

/// `replace` strategy: if more than `min_replace_ratio` of the groups have reward
/// std > 0, overwrite every zero-variance group with a (random, distinct when
/// possible) copy of a good group and return it; otherwise ask to keep sampling.
pub fn replace_sampling<B: SampleBatch>(
    batch: B,
    rewards: &[f64],
    uids: &[String],
    n_samples_per_prompt: usize,
    min_replace_ratio: f64,
    rng: &mut impl Rng,
) -> Result<DynamicSamplingOutcome<B>> {
    if batch.len() != uids.len() || rewards.len() != uids.len() {
        bail!(
            "dynamic sampling: batch of {}, {} rewards, {} uids",
            batch.len(),
            rewards.len(),
            uids.len()
        );
    }
    let groups = group_std(rewards, uids);
    let (good, bad): (Vec<_>, Vec<_>) = groups
        .iter()
        .partition(|(_, std, _)| *std > 0.0 || n_samples_per_prompt == 1);
    if (good.len() as f64) <= groups.len() as f64 * min_replace_ratio {
        tracing::warn!(
            "dynamic sampling (replace): only {} of {} prompts have reward variance; sampling again",
            good.len(),
            groups.len()
        );
        return Ok(DynamicSamplingOutcome::KeepSampling);
    }
    let replacements: Vec<usize> = if good.len() >= bad.len() {
        let mut perm: Vec<usize> = (0..good.len()).collect();
        perm.shuffle(rng);
        perm.truncate(bad.len());
        perm
    } else {
        (0..bad.len())
            .map(|_| rng.random_range(0..good.len()))
            .collect()
    };
    let mut source: Vec<usize> = (0..uids.len()).collect();
    let mut new_uids = uids.to_vec();
    for ((_, _, bad_idx), &g) in bad.iter().zip(&replacements) {
        let good_idx = &good[g].2;
        for (&b, &s) in bad_idx.iter().zip(good_idx.iter()) {
            source[b] = s;
            new_uids[b] = uids[s].clone();
        }
    }
    tracing::info!(
        "dynamic sampling (replace): replaced {} zero-variance prompts",
        bad.len()
    );
    Ok(DynamicSamplingOutcome::Ready {
        batch: batch.select(&source),
        uids: new_uids,
    })
}
