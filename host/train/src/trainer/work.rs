//! What a step generates: the next batch of prompts as trajectory requests
//! (each prompt repeated `n_samples_per_prompt` times, one GRPO group), with
//! the seed its rollouts sample from and the data position after it.

use skyrl_rollout::{GeneratorOutput, GeneratorRequest, RolloutParams};
use skyrl_runtime::Message;

use super::advantages::RankRows;
use super::Trainer;
use crate::dataset::{DataPosition, PromptDataset, PromptRow};

/// Rollout work for one batch of prompts: this rank's share of its requests.
pub(super) struct Work {
    /// Index of the batch in this run's data order (from the run's start).
    pub batch: u64,
    pub epoch: usize,
    /// Data position after this batch.
    pub after: DataPosition,
    /// This rank's requests, each drawing from the sample stream of its
    /// row in the whole batch.
    pub requests: Vec<GeneratorRequest>,
    /// Group id of every row of the whole batch.
    pub group_ids: Vec<String>,
    /// Which rows each rank generates and trains on.
    pub rows: RankRows,
    pub seed: u64,
}

/// Generated trajectories (this rank's rows) ready for a training step.
pub(super) struct Rollout {
    pub out: GeneratorOutput,
    /// Group id of every row of the whole batch.
    pub group_ids: Vec<String>,
    pub rows: RankRows,
    pub epoch: usize,
    /// Generation time of this batch (sum over its units when split).
    pub gen_secs: f64,
    /// How long the trainer waited for these rollouts.
    pub wait_secs: f64,
}

/// A reproducible seed for (run seed, step, purpose).
pub(super) fn derive_seed(seed: u64, step: u64, salt: u64) -> u64 {
    seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt.wrapping_mul(0xD1B5_4A32_D192_ED03)
}

/// The trajectory request of a dataset row, its env class defaulting to
/// `environment.env_class`.
pub fn request_for_row(row: &PromptRow, default_env_class: &str) -> GeneratorRequest {
    GeneratorRequest::new(
        row.prompt
            .iter()
            .map(|m| Message::new(m.role.clone(), m.content.clone()))
            .collect(),
        row.env_class
            .clone()
            .unwrap_or_else(|| default_env_class.to_string()),
        row.extras.clone(),
    )
}

impl Trainer {
    /// `n` requests for each of `rows` of `data`, grouped by prompt.
    pub(super) fn requests(
        &self,
        rows: &[usize],
        data: &PromptDataset,
        n: usize,
    ) -> Vec<GeneratorRequest> {
        let mut out = Vec::with_capacity(rows.len() * n);
        for &i in rows {
            let req = request_for_row(&data.rows[i], &self.cfg.environment.env_class);
            out.extend(std::iter::repeat_n(req, n));
        }
        out
    }

    /// The next batch of prompts as rollout work, or `None` when the data is exhausted.
    pub(super) fn take_work(&mut self) -> Option<Work> {
        let (pos, prompts) = self.sampler.next_batch()?;
        let n = self.cfg.generator.n_samples_per_prompt;
        let all = self.requests(&prompts, &self.train_data, n);
        let group_ids = prompts
            .iter()
            .flat_map(|r| std::iter::repeat_n(format!("{}-{r}", pos.epoch), n))
            .collect();
        let mini_rows = self.cfg.trainer.policy_mini_batch_size * n;
        let rows = RankRows::split(all.len(), mini_rows, self.dist.rank(), self.dist.world());
        let requests = rows
            .mine()
            .iter()
            .map(|&g| GeneratorRequest {
                stream: Some(g as u64),
                ..all[g].clone()
            })
            .collect();
        let seed = derive_seed(self.cfg.trainer.seed, self.batches_taken, 1);
        self.batches_taken += 1;
        Some(Work {
            batch: self.batches_taken - 1,
            epoch: pos.epoch,
            after: self.sampler.position(),
            requests,
            group_ids,
            rows,
            seed,
        })
    }

    /// Training-time generation limits with sampling seeded by `seed`.
    pub(super) fn rollout_params(&self, seed: u64) -> RolloutParams {
        let g = &self.cfg.generator;
        RolloutParams::from_config(g, &g.sampling_params, Some(seed))
    }
}
