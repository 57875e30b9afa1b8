//! The outer loop: train step after step (or through the pipelined modes),
//! evaluate and checkpoint at their intervals, log metrics, export the final
//! policy and draw the reward curve. Every rank runs the loop (steps,
//! evaluations and checkpoints are collective); rank 0 alone writes the
//! metrics log, the trackers, the progress bar, the plot and the export.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use tracing::info;

use super::pipeline::Pipeline;
use super::{Progress, RunSummary, TrainOptions, Trainer};
use crate::config::TrainingMode;
use crate::dataset::expand_home;
use crate::metrics::{plot_reward_curve, MetricsLog, StepMetrics};
use crate::tracking::{console_line, parse_trackers, RunInfo, RunStatus, Trackers};

/// The loop's bookkeeping.
struct RunState {
    log: Option<MetricsLog>,
    trackers: Trackers,
    summary: RunSummary,
    eval_enabled: bool,
    last_eval_step: u64,
    last_ckpt_step: u64,
    /// Step of the last `hf_save_interval` export.
    last_hf_step: u64,
    last_metrics: StepMetrics,
}

impl RunState {
    /// Writes `m` to metrics.jsonl, hands it to the trackers and prints the
    /// console line when `console` is one of them.
    fn log(&mut self, progress: &Progress, step: u64, m: &StepMetrics) -> Result<()> {
        let Some(log) = &mut self.log else {
            return Ok(());
        };
        log.write(step, m)?;
        self.trackers.log(step, m);
        if self.trackers.console() {
            progress.println(console_line(step, m));
        }
        Ok(())
    }
}

impl Trainer {
    /// Runs the whole loop (or `opts.max_steps` steps of it).
    pub fn run(&mut self, opts: &TrainOptions) -> Result<RunSummary> {
        let start = Instant::now();
        let mut state = self.start_run(opts)?;
        let t = self.cfg.trainer.clone();
        if state.eval_enabled && t.eval_before_train && self.resumed_from.is_none() {
            let m = self.evaluate()?;
            state.log(&self.progress, self.global_step, &m)?;
            self.progress.println(format!(
                "step {} eval reward {:.3}",
                self.global_step, m["eval/reward_mean"]
            ));
            state.summary.evals.push((self.global_step, m));
        }
        let mode = t.training_mode;
        let mut pipeline = match mode {
            TrainingMode::Sync => None,
            _ => Some(Pipeline::start(self, mode)?),
        };
        let mut done_here = 0u64;
        while opts.max_steps.is_none_or(|n| done_here < n) {
            let next = match pipeline.as_mut() {
                Some(p) => p.step(self)?,
                None => self.train_step()?,
            };
            let Some(m) = next else {
                break;
            };
            done_here += 1;
            self.after_step(&mut state, m)?;
        }
        // Stop the rollout worker (it finishes what it holds).
        drop(pipeline);
        self.finish_run(&mut state)?;
        state.trackers.finish(RunStatus::Finished);
        state.summary.final_step = self.global_step;
        state.summary.wall_seconds = start.elapsed().as_secs_f64();
        Ok(state.summary)
    }

    fn start_run(&mut self, opts: &TrainOptions) -> Result<RunState> {
        let t = &self.cfg.trainer;
        let metrics_path = expand_home(&t.log_path).join("metrics.jsonl");
        let main = self.dist.is_main();
        let log = match main {
            true => Some(MetricsLog::open(
                &metrics_path,
                self.resumed_from.is_some(),
            )?),
            false => None,
        };
        let trackers = match main {
            true => {
                let kinds = parse_trackers(&t.logger.0).map_err(anyhow::Error::msg)?;
                Trackers::start(
                    &kinds,
                    &RunInfo {
                        project: t.project_name.clone(),
                        run_name: t.run_name.clone(),
                        log_dir: expand_home(&t.log_path),
                        config: serde_json::to_value(&self.cfg)?,
                        resuming: self.resumed_from.is_some(),
                    },
                )?
            }
            false => Trackers::none(),
        };
        let start_step = self.global_step;
        self.progress = Progress::new(opts.progress && main, self.total_steps(), start_step);
        Ok(RunState {
            log,
            trackers,
            summary: RunSummary {
                rank: self.dist.rank(),
                start_step,
                final_step: start_step,
                resumed_from: self.resumed_from.clone(),
                steps: Vec::new(),
                evals: Vec::new(),
                metrics_path,
                plot_path: None,
                last_checkpoint: None,
                wall_seconds: 0.0,
            },
            eval_enabled: t.eval_interval > 0 && !self.val_data.is_empty(),
            last_eval_step: start_step,
            last_ckpt_step: start_step,
            last_hf_step: start_step,
            last_metrics: StepMetrics::new(),
        })
    }

    /// Evaluates and checkpoints when due, then logs the step.
    fn after_step(&mut self, state: &mut RunState, mut m: StepMetrics) -> Result<()> {
        let t = self.cfg.trainer.clone();
        let step = self.global_step;
        if state.eval_enabled && step.is_multiple_of(t.eval_interval as u64) {
            let e = self.evaluate()?;
            m.extend(e.clone());
            state.summary.evals.push((step, e));
            state.last_eval_step = step;
        }
        for (k, v) in &m {
            if !v.is_finite() && !k.starts_with("policy/ratio") {
                bail!("step {step}: metric {k} is not finite ({v})");
            }
        }
        state.log(&self.progress, step, &m)?;
        self.progress.step_done(
            step,
            format!(
                "reward {:.3} loss {:+.4}{}",
                m["reward/mean"],
                m["loss"],
                m.get("eval/reward_mean")
                    .map(|e| format!(" eval {e:.3}"))
                    .unwrap_or_default()
            ),
        );
        self.maybe_update_ref()?;
        if t.ckpt_interval > 0 && step.is_multiple_of(t.ckpt_interval as u64) {
            state.summary.last_checkpoint = Some(self.save_checkpoint(&m)?);
            state.last_ckpt_step = step;
        }
        if t.hf_save_interval > 0 && step.is_multiple_of(t.hf_save_interval as u64) {
            self.save_hf_model()?;
            state.last_hf_step = step;
        }
        state.last_metrics = m.clone();
        state.summary.steps.push(m);
        Ok(())
    }

    /// `update_ref_every_epoch`: after the last batch of every epoch but the
    /// last, the reference becomes a copy of the policy (skyrl-train's
    /// update_ref_with_policy), on every rank.
    fn maybe_update_ref(&mut self) -> Result<()> {
        let t = &self.cfg.trainer;
        let pos = self.trained_pos;
        let epoch_done = pos.batch >= self.sampler.batches_per_epoch();
        if !t.update_ref_every_epoch || !epoch_done || pos.epoch + 1 >= t.epochs {
            return Ok(());
        }
        if let Some(r) = self.reference.as_mut() {
            r.copy_from(self.policy.model())?;
            info!(
                epoch = pos.epoch,
                "the reference is now the policy (update_ref_every_epoch)"
            );
        }
        Ok(())
    }

    /// `hf_save_interval`: the policy in Hugging Face layout at
    /// `export_path/global_step_N/policy` (skyrl-train's save_models), by rank 0.
    fn save_hf_model(&self) -> Result<()> {
        if !self.dist.is_main() {
            return Ok(());
        }
        let dir = expand_home(&self.cfg.trainer.export_path)
            .join(format!("global_step_{}", self.global_step))
            .join("policy");
        skyrl_model::save_checkpoint(self.policy.model(), Some(&self.tokenizer), &dir)?;
        info!(dir = %dir.display(), "exported the policy (hf_save_interval)");
        Ok(())
    }

    /// The final evaluation, checkpoint, export and plot.
    fn finish_run(&mut self, state: &mut RunState) -> Result<()> {
        let t = self.cfg.trainer.clone();
        let finished = self.global_step >= self.total_steps();
        if finished && state.eval_enabled && state.last_eval_step != self.global_step {
            let e = self.evaluate()?;
            state.log(&self.progress, self.global_step, &e)?;
            state.summary.evals.push((self.global_step, e));
        }
        if t.ckpt_interval > 0 && state.last_ckpt_step != self.global_step {
            let m = state.last_metrics.clone();
            state.summary.last_checkpoint = Some(self.save_checkpoint(&m)?);
        }
        if t.hf_save_interval > 0 && state.last_hf_step != self.global_step {
            self.save_hf_model()?;
        }
        self.progress.finish();
        if !self.dist.is_main() {
            return Ok(());
        }
        if finished {
            let export = expand_home(&t.export_path).join("final_model");
            skyrl_model::save_checkpoint(self.policy.model(), Some(&self.tokenizer), &export)?;
            info!(dir = %export.display(), "exported the final policy");
        }
        let png: PathBuf = expand_home(&t.log_path).join("reward_curve.png");
        match plot_reward_curve(&state.summary.metrics_path, &png) {
            Ok(()) => state.summary.plot_path = Some(png),
            Err(e) => tracing::warn!("cannot draw the reward curve: {e:#}"),
        }
        Ok(())
    }
}
