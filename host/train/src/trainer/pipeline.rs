//! Pipelined training modes: a rollout worker thread generates while the
//! trainer trains.
//!
//! - `one_step_off`: while the trainer trains on batch k, the worker
//!   generates batch k+1 with the weights from before step k; weights are
//!   synced once batch k+1 is complete, so every batch comes from exactly one
//!   policy version, one step old.
//! - `fully_async`: prompt groups are generated independently (up to
//!   `num_parallel_generation_workers` at a time) and a step trains on the
//!   first `train_batch_size` groups to finish. Weights are synced right after
//!   each step, in flight: running trajectories continue with the new weights
//!   from their next turn. Admission keeps at most `max_staleness_steps + 1`
//!   batches outstanding, so no trajectory is more than `max_staleness_steps`
//!   versions old when trained on; rollout logprobs (TIS) correct the drift.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use tokio::sync::mpsc::UnboundedSender;

use super::advantages::RankRows;
use super::work::{derive_seed, Rollout, Work};
use super::{Phase, Trainer};
use crate::config::TrainingMode;
use crate::dataset::DataPosition;
use crate::metrics::StepMetrics;
use skyrl_rollout::{GeneratorOutput, RolloutJob};

/// What a generated unit belongs to.
struct UnitTag {
    batch: u64,
    epoch: usize,
    /// Group ids of the unit's rows (fully async: one group), or of the
    /// whole batch when the unit is the rank's whole share (one-step-off).
    group_ids: Vec<String>,
    /// The split of the batch over the ranks (one-step-off).
    rows: Option<RankRows>,
}

type UnitResult = (UnitTag, Result<GeneratorOutput>, f64);

/// The rollout worker and the bookkeeping of work in flight.
pub(super) struct Pipeline {
    jobs: Option<UnboundedSender<RolloutJob<UnitTag>>>,
    results: mpsc::Receiver<UnitResult>,
    worker: Option<JoinHandle<()>>,
    mode: TrainingMode,
    /// Batches handed out whose units are not all trained on: batch -> (units left, position after it).
    open: BTreeMap<u64, (usize, DataPosition)>,
    /// Finished units not trained on yet, in completion order.
    ready: Vec<(UnitTag, GeneratorOutput, f64)>,
    /// No more data to hand out.
    exhausted: bool,
    /// Waiting already spent on the next batch (one-step-off waits before syncing).
    carried_wait: f64,
    max_outstanding: usize,
}

impl Pipeline {
    /// Starts the rollout worker for `trainer`.
    pub(super) fn start(trainer: &Trainer, mode: TrainingMode) -> Result<Self> {
        let (job_tx, job_rx) = tokio::sync::mpsc::unbounded_channel();
        let (res_tx, res_rx) = mpsc::channel();
        let generator = trainer.generator.clone();
        let engine = trainer.rollout.clone();
        let tokenizer = trainer.tokenizer.clone();
        let fa = &trainer.cfg.trainer.fully_async;
        let parallel = match mode {
            TrainingMode::FullyAsync => fa.num_parallel_generation_workers.max(1),
            _ => 1,
        };
        let worker = std::thread::Builder::new()
            .name("skyrl-rollouts".into())
            .spawn(move || {
                generator.run_jobs(&engine, &tokenizer, parallel, job_rx, |tag, out, secs| {
                    let _ = res_tx.send((tag, out, secs));
                })
            })
            .map_err(|e| anyhow!("cannot start the rollout worker: {e}"))?;
        Ok(Self {
            jobs: Some(job_tx),
            results: res_rx,
            worker: Some(worker),
            mode,
            open: BTreeMap::new(),
            ready: Vec::new(),
            exhausted: false,
            carried_wait: 0.0,
            max_outstanding: match mode {
                TrainingMode::FullyAsync => fa.max_staleness_steps + 1,
                _ => 1,
            },
        })
    }

    /// Hands the next batch to the worker (split into prompt groups in
    /// fully-async mode); false when the data is exhausted.
    fn submit(&mut self, trainer: &mut Trainer) -> Result<bool> {
        let Some(work) = trainer.take_work() else {
            self.exhausted = true;
            return Ok(false);
        };
        let Work {
            batch,
            epoch,
            after,
            requests,
            group_ids,
            rows,
            seed,
        } = work;
        let tx = self.jobs.as_ref().expect("open pipeline");
        let mut units = Vec::new();
        if self.mode == TrainingMode::FullyAsync {
            // One unit per prompt group (one rank: rows are the batch's rows).
            let n = trainer.cfg.generator.n_samples_per_prompt.max(1);
            for (reqs, ids) in requests.chunks(n).zip(group_ids.chunks(n)) {
                units.push((reqs.to_vec(), ids.to_vec(), None));
            }
        } else {
            units.push((requests, group_ids, Some(rows)));
        }
        self.open.insert(batch, (units.len(), after));
        for (u, (requests, group_ids, rows)) in units.into_iter().enumerate() {
            let job = RolloutJob {
                tag: UnitTag {
                    batch,
                    epoch,
                    group_ids,
                    rows,
                },
                requests,
                params: trainer.rollout_params(derive_seed(seed, u as u64, 7)),
            };
            if tx.send(job).is_err() {
                bail!("the rollout worker stopped");
            }
        }
        Ok(true)
    }

    /// Units handed out and not yet received.
    fn in_flight(&self) -> usize {
        let handed: usize = self.open.values().map(|(left, _)| left).sum();
        handed - self.ready.len()
    }

    /// Receives one finished unit (blocking).
    fn receive(&mut self) -> Result<()> {
        let (tag, out, secs) = self
            .results
            .recv()
            .map_err(|_| anyhow!("the rollout worker stopped unexpectedly"))?;
        let out = out?;
        self.ready.push((tag, out, secs));
        Ok(())
    }

    /// Takes `count` ready units (waiting for more as needed), oldest batch
    /// first in one-step-off mode, completion order in fully-async mode.
    fn take_units(&mut self, trainer: &mut Trainer, count: usize) -> Result<Option<Rollout>> {
        let start = Instant::now();
        let wanted_batch = match self.mode {
            TrainingMode::FullyAsync => None,
            _ => self.open.keys().next().copied(),
        };
        let matches = |ready: &[(UnitTag, GeneratorOutput, f64)]| {
            ready
                .iter()
                .filter(|(t, _, _)| wanted_batch.is_none_or(|b| t.batch == b))
                .count()
        };
        while matches(&self.ready) < count {
            if self.in_flight() == 0 {
                return Ok(None);
            }
            self.receive()?;
        }
        let mut taken = Vec::with_capacity(count);
        let mut rest = Vec::new();
        for unit in std::mem::take(&mut self.ready) {
            if taken.len() < count && wanted_batch.is_none_or(|b| unit.0.batch == b) {
                taken.push(unit);
            } else {
                rest.push(unit);
            }
        }
        self.ready = rest;
        let mut out = GeneratorOutput::default();
        let mut group_ids = Vec::new();
        let mut split = None;
        let mut gen_secs = 0.0;
        let mut epoch = 0;
        for (tag, unit, secs) in taken {
            out.append(unit);
            group_ids.extend(tag.group_ids);
            split = tag.rows;
            gen_secs += secs;
            epoch = epoch.max(tag.epoch);
            if let Some(e) = self.open.get_mut(&tag.batch) {
                e.0 -= 1;
            }
        }
        // Resume point: after the newest batch such that it and all older ones are done.
        while let Some((&b, &(left, after))) = self.open.iter().next() {
            if left > 0 {
                break;
            }
            trainer.trained_pos = after;
            self.open.remove(&b);
        }
        let wait_secs = start.elapsed().as_secs_f64() + std::mem::take(&mut self.carried_wait);
        // A whole share keeps its split; groups of one process are the batch.
        let rows = split.unwrap_or_else(|| RankRows::split(out.len(), out.len().max(1), 0, 1));
        Ok(Some(Rollout {
            out,
            group_ids,
            rows,
            epoch,
            gen_secs,
            wait_secs,
        }))
    }

    /// One training step in this pipeline's mode; `None` when the data is exhausted.
    pub(super) fn step(&mut self, trainer: &mut Trainer) -> Result<Option<StepMetrics>> {
        match self.mode {
            TrainingMode::OneStepOff => self.one_step_off(trainer),
            TrainingMode::FullyAsync => self.fully_async(trainer),
            TrainingMode::Sync => trainer.train_step(),
        }
    }

    fn one_step_off(&mut self, trainer: &mut Trainer) -> Result<Option<StepMetrics>> {
        if self.open.is_empty() && !self.exhausted {
            self.submit(trainer)?;
        }
        let Some(current) = self.take_units(trainer, 1)? else {
            return Ok(None);
        };
        // Generate the next batch while training on this one.
        if !self.exhausted {
            self.submit(trainer)?;
        }
        let mut m = trainer.train_on(current)?;
        // The next batch must finish with the old weights before the sync, so
        // each batch comes from a single policy version.
        let wait = Instant::now();
        let phase = trainer
            .progress
            .begin(Phase::WaitForRollouts, trainer.global_step);
        while self.in_flight() > 0 {
            self.receive()?;
        }
        self.carried_wait = wait.elapsed().as_secs_f64();
        trainer.progress.end(phase, 0.0, "batches");
        trainer.finish_step(&mut m)?;
        Ok(Some(m))
    }

    fn fully_async(&mut self, trainer: &mut Trainer) -> Result<Option<StepMetrics>> {
        while self.open.len() < self.max_outstanding && !self.exhausted {
            self.submit(trainer)?;
        }
        let groups = trainer.cfg.trainer.train_batch_size;
        let Some(batch) = self.take_units(trainer, groups)? else {
            return Ok(None);
        };
        let mut m = trainer.train_on(batch)?;
        // In-flight update: running trajectories pick up the new weights at their next turn.
        trainer.finish_step(&mut m)?;
        Ok(Some(m))
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // Closing the job channel lets the worker finish what it holds and exit.
        self.jobs.take();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}
