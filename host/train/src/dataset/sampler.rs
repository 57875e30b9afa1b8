//! Deterministic shuffled batches over epochs, resumable from a position.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Where the sampler is: the next batch is batch `batch` of epoch `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DataPosition {
    pub epoch: usize,
    pub batch: usize,
}

/// Yields `batch_size` row indices at a time; each epoch is a fresh permutation
/// determined only by `(seed, epoch)`, so a saved [`DataPosition`] resumes exactly.
/// Incomplete final batches are dropped (`drop_last`), as in skyrl's train loader.
#[derive(Debug, Clone)]
pub struct EpochSampler {
    len: usize,
    batch_size: usize,
    seed: u64,
    epochs: usize,
    shuffle: bool,
    pos: DataPosition,
    perm: Vec<usize>,
    perm_epoch: Option<usize>,
}

impl EpochSampler {
    /// `shuffle = false` keeps file order (evaluation).
    pub fn new(
        len: usize,
        batch_size: usize,
        seed: u64,
        epochs: usize,
        shuffle: bool,
    ) -> anyhow::Result<Self> {
        if batch_size == 0 {
            anyhow::bail!("batch size must be at least 1");
        }
        if len < batch_size {
            anyhow::bail!(
                "the dataset has {len} rows, fewer than one batch of {batch_size} (trainer.train_batch_size)"
            );
        }
        Ok(Self {
            len,
            batch_size,
            seed,
            epochs,
            shuffle,
            pos: DataPosition::default(),
            perm: Vec::new(),
            perm_epoch: None,
        })
    }

    /// Full batches per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        self.len / self.batch_size
    }

    /// Total batches over all epochs.
    pub fn total_batches(&self) -> usize {
        self.batches_per_epoch() * self.epochs
    }

    /// Position of the next batch.
    pub fn position(&self) -> DataPosition {
        self.pos
    }

    /// Moves to `pos` (e.g. from a checkpoint).
    pub fn restore(&mut self, pos: DataPosition) -> anyhow::Result<()> {
        if pos.batch > self.batches_per_epoch() || pos.epoch > self.epochs {
            anyhow::bail!(
                "data position {pos:?} is outside {} epochs of {} batches",
                self.epochs,
                self.batches_per_epoch()
            );
        }
        self.pos = pos;
        Ok(())
    }

    /// The permutation of epoch `epoch`.
    pub fn permutation(&self, epoch: usize) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..self.len).collect();
        if self.shuffle {
            let mix = self.seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            idx.shuffle(&mut ChaCha8Rng::seed_from_u64(mix));
        }
        idx
    }

    /// Next batch as `(position, row indices)`, or `None` after the last epoch.
    pub fn next_batch(&mut self) -> Option<(DataPosition, Vec<usize>)> {
        if self.pos.batch >= self.batches_per_epoch() {
            self.pos = DataPosition {
                epoch: self.pos.epoch + 1,
                batch: 0,
            };
        }
        if self.pos.epoch >= self.epochs {
            return None;
        }
        if self.perm_epoch != Some(self.pos.epoch) {
            self.perm = self.permutation(self.pos.epoch);
            self.perm_epoch = Some(self.pos.epoch);
        }
        let start = self.pos.batch * self.batch_size;
        let batch = self.perm[start..start + self.batch_size].to_vec();
        let here = self.pos;
        self.pos.batch += 1;
        Some((here, batch))
    }
}
