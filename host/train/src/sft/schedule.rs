//! Which conversations each step trains on. An epoch is `ceil(n /
//! batch_size)` steps (the last batch may be short, as skyrl 0.3.0 keeps
//! it); `random` reshuffles every epoch with a permutation that depends only
//! on `(seed, epoch)`, so a resumed run continues exactly; `num_steps` (or
//! `num_epochs` epochs), capped by `max_training_steps`, is the run.

use super::SftConfig;
use crate::dataset::{DataPosition, EpochSampler};

/// The run's steps over `n` conversations.
#[derive(Debug, Clone)]
pub struct StepSchedule {
    n: usize,
    batch_size: usize,
    seed: u64,
    shuffle: bool,
    pub steps_per_epoch: u64,
    /// Steps of the whole run.
    pub num_steps: u64,
}

impl StepSchedule {
    /// The schedule `cfg` describes for `n` (> 0) conversations.
    pub fn new(cfg: &SftConfig, n: usize) -> Self {
        let steps_per_epoch = n.div_ceil(cfg.batch_size.max(1)) as u64;
        let mut num_steps = match cfg.num_steps {
            Some(s) => s as u64,
            None => cfg.num_epochs.unwrap_or(1) as u64 * steps_per_epoch,
        };
        if let Some(cap) = cfg.max_training_steps {
            num_steps = num_steps.min(cap as u64);
        }
        Self {
            n,
            batch_size: cfg.batch_size.max(1),
            seed: cfg.seed,
            shuffle: cfg.sampler == "random",
            steps_per_epoch,
            num_steps,
        }
    }

    /// Epoch and batch of step `step` (1-based).
    pub fn position(&self, step: u64) -> DataPosition {
        let i = step.saturating_sub(1);
        DataPosition {
            epoch: (i / self.steps_per_epoch) as usize,
            batch: (i % self.steps_per_epoch) as usize,
        }
    }

    /// The conversations of step `step` (1-based), in batch order.
    pub fn rows(&self, step: u64) -> Vec<usize> {
        let pos = self.position(step);
        let perm = EpochSampler::new(self.n, 1, self.seed, 1, self.shuffle)
            .expect("a non-empty data set")
            .permutation(pos.epoch);
        let start = pos.batch * self.batch_size;
        perm[start..(start + self.batch_size).min(self.n)].to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_keep_the_short_last_batch_and_reshuffle() {
        let cfg = SftConfig {
            batch_size: 4,
            num_epochs: Some(2),
            ..SftConfig::default()
        };
        let s = StepSchedule::new(&cfg, 10);
        assert_eq!((s.steps_per_epoch, s.num_steps), (3, 6));
        let epoch0: Vec<usize> = (1..=3).flat_map(|k| s.rows(k)).collect();
        assert_eq!(s.rows(3).len(), 2);
        let mut sorted = epoch0.clone();
        sorted.sort();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        let epoch1: Vec<usize> = (4..=6).flat_map(|k| s.rows(k)).collect();
        assert_ne!(epoch0, epoch1);
        let capped = StepSchedule::new(
            &SftConfig {
                num_steps: Some(50),
                num_epochs: None,
                max_training_steps: Some(7),
                ..cfg.clone()
            },
            10,
        );
        assert_eq!(capped.num_steps, 7);
        let seq = StepSchedule::new(
            &SftConfig {
                sampler: "sequential".into(),
                ..cfg
            },
            10,
        );
        assert_eq!(seq.rows(2), vec![4, 5, 6, 7]);
    }
}
