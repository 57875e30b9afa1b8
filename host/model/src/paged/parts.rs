//! Decode steps split across threads.
//!
//! A decode step of a small model (or of few rows) is made of products too
//! small to gain from several intra-op threads: it runs on one (see
//! [`crate::intra_op`]), and the machine's other cores sit idle. Even where
//! intra-op threads help the products, the step's many small element-wise
//! ops and their dispatch stay serial. Instead, when the thread has several
//! intra-op threads, and the step would run on one or has enough rows for
//! every part to stay compute-bound, its rows are split into contiguous
//! parts, and each part is decoded on its own rayon worker with one intra-op
//! thread: the same products, on fewer rows each, side by side.
//!
//! Each part keeps its own [`RowCache`], so a part's rows stay contiguous
//! between steps; when rows move between parts (a sequence leaves or joins),
//! the caches carry what they still hold and gather the rest from the pool,
//! as for any change of the batch.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use tch::{Device, Tensor};

use super::kv::KvPool;
use super::rows::{forward_decode, DecodeRow, RowCache};
use crate::intra_op::{self, SingleThread};
use crate::model::CausalLm;

/// Fewest rows a part gets: below this a part's forward is too short to pay
/// for handing it to another thread.
pub const MIN_PART_ROWS: usize = 4;

/// Whether decode steps may be split (benchmarks turn it off to compare).
static SPLIT_DECODE: AtomicBool = AtomicBool::new(true);

/// Lets later decode steps of this process split their rows across threads
/// (`true`, the default) or keeps every step on the scheduler's thread. The
/// rollout benchmark's `--no-split-decode` turns it off.
pub fn set_split_decode(yes: bool) {
    SPLIT_DECODE.store(yes, Ordering::Relaxed);
}

/// Rows a part needs before splitting a step that intra-op threads could
/// share: every part reads all the weights, which pays when each weight then
/// serves this many rows (the products stay compute-bound); with fewer, the
/// intra-op threads, which split the weights between them, are better.
pub const COMPUTE_BOUND_PART_ROWS: usize = 64;

/// The row caches of a decode batch, one per part (see the module docs).
#[derive(Debug, Default)]
pub struct DecodeParts {
    caches: Vec<RowCache>,
}

/// Lets the decode threads borrow what the scheduler's thread owns.
///
/// SAFETY: libtorch tensors may be read from several threads at once; the
/// model's weights are only read, and each part writes its new keys and
/// values into its own rows' slots of the pool (parts hold disjoint rows,
/// so disjoint slots) and into its own row cache.
struct Shared<'a, T>(&'a T);
unsafe impl<T> Sync for Shared<'_, T> {}
unsafe impl<T> Send for Shared<'_, T> {}

impl DecodeParts {
    /// Drops every part's rows (the next decode step gathers them again).
    pub fn clear(&mut self) {
        self.caches.clear();
    }

    /// How many parts a step of `rows` rows runs in: one per intra-op thread
    /// of the calling thread, each of at least [`MIN_PART_ROWS`] rows, when
    /// the whole step would run on one intra-op thread anyway or when every
    /// part gets at least [`COMPUTE_BOUND_PART_ROWS`]; otherwise (and on
    /// GPUs, or when splitting is off, [`set_split_decode`]) one.
    pub fn parts_for(model: &CausalLm, rows: usize) -> usize {
        if model.device() != Device::Cpu || !SPLIT_DECODE.load(Ordering::Relaxed) {
            return 1;
        }
        let threads = (tch::get_num_threads().max(1) as usize).min(rayon::current_num_threads());
        let parts = threads.min(rows / MIN_PART_ROWS).max(1);
        let n = rows as i64;
        let small_step =
            intra_op::projection_work(model.config(), n, n) < intra_op::SINGLE_THREAD_MAX_WORK;
        if small_step || rows / parts >= COMPUTE_BOUND_PART_ROWS {
            parts
        } else {
            1
        }
    }

    /// One decode step of `rows` (each feeds one token): writes their keys
    /// and values into `pool` and the parts' caches, returns `[B, V]` fp32
    /// logits in row order and the number of parts it ran in.
    pub fn forward(
        &mut self,
        model: &CausalLm,
        pool: &KvPool,
        rows: &[DecodeRow<'_>],
    ) -> (Tensor, usize) {
        let per_part = rows.len().div_ceil(Self::parts_for(model, rows.len()));
        let parts = rows.len().div_ceil(per_part.max(1)).max(1);
        self.caches.resize_with(parts, RowCache::default);
        let n = rows.len() as i64;
        if parts == 1 {
            let cache = &mut self.caches[0];
            let logits =
                intra_op::run_sized(model, n, n, || forward_decode(model, pool, cache, rows));
            return (logits, 1);
        }
        let shared = (Shared(model), Shared(pool));
        let logits: Vec<Tensor> = self
            .caches
            .par_iter_mut()
            .zip(rows.par_chunks(per_part))
            .map(|(cache, part)| {
                let (Shared(model), Shared(pool)) = &shared;
                // Grad mode and the intra-op thread count are per thread.
                let _no_grad = tch::no_grad_guard();
                let _one = SingleThread::for_work(0, model.device());
                forward_decode(model, pool, cache, part)
            })
            .collect();
        (Tensor::cat(&logits, 0), parts)
    }
}
