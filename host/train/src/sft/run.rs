//! The SFT loop (skyrl 0.3.0's `SFTTrainer.train`): step after step, each an
//! optimizer step of the policy worker over the step's conversations; at
//! their intervals a checkpoint, a Hugging Face export and an evaluation
//! (`eval/eval_loss`, the per-token mean NLL of the eval set); every step's
//! metrics to `metrics.jsonl` and the trackers (rank 0). At the end: a last
//! checkpoint, export and evaluation unless the last step just did them.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use tracing::info;

use super::collate::{micro_batches, rank_share};
use super::{SftOptions, SftSummary, SftTrainer};
use crate::batch::pad_id;
use crate::checkpoint::TrainerState;
use crate::dataset::expand_home;
use crate::metrics::{MetricsLog, StepMetrics};
use crate::tracking::{console_line, parse_trackers, RunInfo, RunStatus, Trackers};

/// Rank 0's metrics outputs (none on the other ranks).
struct Logs {
    log: Option<MetricsLog>,
    trackers: Trackers,
}

impl Logs {
    fn write(&mut self, step: u64, m: &StepMetrics) -> Result<()> {
        let Some(log) = &mut self.log else {
            return Ok(());
        };
        log.write(step, m)?;
        self.trackers.log(step, m);
        if self.trackers.console() {
            eprintln!("{}", console_line(step, m));
        }
        Ok(())
    }
}

impl SftTrainer {
    /// Runs the loop to the end (or `opts.max_steps` steps of it).
    pub fn run(&mut self, opts: &SftOptions) -> Result<SftSummary> {
        let start = Instant::now();
        let mut logs = self.open_logs()?;
        let start_step = self.global_step;
        let mut summary = SftSummary {
            rank: self.dist.rank(),
            start_step,
            final_step: start_step,
            resumed_from: self.resumed_from.clone(),
            steps: Vec::new(),
            evals: Vec::new(),
            metrics_path: expand_home(&self.cfg.log_path).join("metrics.jsonl"),
            last_checkpoint: None,
            last_export: None,
            wall_seconds: 0.0,
        };
        let has_eval = self.eval.is_some();
        if has_eval && self.cfg.eval_before_train {
            let loss = self.evaluate()?;
            let m = StepMetrics::from([("eval/eval_loss".to_string(), loss)]);
            logs.write(self.global_step, &m)?;
            summary.evals.push((self.global_step, loss));
        }
        let (mut saved_at, mut exported_at, mut evaluated_at) = (None, None, None);
        let mut done_here = 0u64;
        while self.global_step < self.schedule.num_steps
            && opts.max_steps.is_none_or(|n| done_here < n)
        {
            let mut m = self.train_step()?;
            done_here += 1;
            let step = self.global_step;
            let c = &self.cfg;
            if c.ckpt_interval > 0 && step.is_multiple_of(c.ckpt_interval as u64) {
                summary.last_checkpoint = self.save_checkpoint(&m)?;
                saved_at = Some(step);
            }
            if c.hf_save_interval > 0 && step.is_multiple_of(c.hf_save_interval as u64) {
                summary.last_export = self.export()?;
                exported_at = Some(step);
            }
            if has_eval && c.eval_interval > 0 && step.is_multiple_of(c.eval_interval as u64) {
                let loss = self.evaluate()?;
                m.insert("eval/eval_loss".into(), loss);
                summary.evals.push((step, loss));
                evaluated_at = Some(step);
            }
            logs.write(step, &m)?;
            if step.is_multiple_of(5) {
                info!(
                    step,
                    loss = m["train/loss"],
                    grad_norm = m["train/grad_norm"],
                    "SFT step"
                );
            }
            summary.steps.push((step, m));
        }
        let step = self.global_step;
        if saved_at != Some(step) && step > start_step {
            summary.last_checkpoint = self.save_checkpoint(&summary_last(&summary))?;
        }
        let finished = step >= self.schedule.num_steps;
        if finished && self.cfg.hf_save_interval > 0 && exported_at != Some(step) {
            summary.last_export = self.export()?;
        }
        if finished && has_eval && evaluated_at != Some(step) {
            let loss = self.evaluate()?;
            // 0.3.0 logs the final evaluation one step after the last one.
            let m = StepMetrics::from([("eval/eval_loss".to_string(), loss)]);
            logs.write(step + 1, &m)?;
            summary.evals.push((step + 1, loss));
        }
        logs.trackers.finish(RunStatus::Finished);
        summary.final_step = step;
        summary.wall_seconds = start.elapsed().as_secs_f64();
        Ok(summary)
    }

    fn open_logs(&self) -> Result<Logs> {
        if !self.dist.is_main() {
            return Ok(Logs {
                log: None,
                trackers: Trackers::none(),
            });
        }
        let c = &self.cfg;
        let log_dir = expand_home(&c.log_path);
        let resuming = self.resumed_from.is_some();
        let kinds = parse_trackers(&c.logger.0)
            .map_err(|m| anyhow::anyhow!(m.replace("trainer.logger", "logger")))?;
        let trackers = Trackers::start(
            &kinds,
            &RunInfo {
                project: c.project_name.clone(),
                run_name: c.run_name.clone(),
                log_dir: log_dir.clone(),
                config: serde_json::to_value(c)?,
                resuming,
            },
        )
        .map_err(|e| anyhow::anyhow!(format!("{e:#}").replace("trainer.logger", "logger")))?;
        Ok(Logs {
            log: Some(MetricsLog::open(&log_dir.join("metrics.jsonl"), resuming)?),
            trackers,
        })
    }

    /// One optimizer step on the next batch; returns its metrics.
    fn train_step(&mut self) -> Result<StepMetrics> {
        let start = Instant::now();
        let step = self.global_step + 1;
        let rows = self.schedule.rows(step);
        let batch: Vec<&super::SftExample> = rows.iter().map(|&i| &self.train[i]).collect();
        let loss_tokens: usize = batch.iter().map(|e| e.loss_tokens()).sum();
        let scale = 1.0 / loss_tokens.max(1) as f32;
        let (rank, world) = (self.dist.rank(), self.dist.world());
        let share = rank_share(batch.len(), self.cfg.batch_size, rank, world);
        // A rank with no conversation left in a short last batch still joins
        // the step (the gradient sync) with a zero-weight row.
        let (mine, scale) = match share.is_empty() {
            true => (vec![batch[0]], 0.0),
            false => (batch[share].to_vec(), scale),
        };
        let model = self.policy.model();
        let pad = pad_id(&self.tokenizer, model);
        let micro = micro_batches(
            &mine,
            self.cfg.micro_train_batch_size_per_gpu,
            self.cfg.remove_microbatch_padding,
            scale,
            pad,
            model.device(),
        );
        let collate_secs = start.elapsed().as_secs_f64();
        let max_norm = self.cfg.optimizer_config.max_grad_norm;
        let r = self.policy.sft_step(&micro, max_norm)?;
        self.global_step = step;
        if !r.loss.is_finite() {
            bail!("step {step}: train/loss is not finite ({})", r.loss);
        }
        let step_secs = start.elapsed().as_secs_f64();
        let tokens: usize = batch.iter().map(|e| e.input_ids.len()).sum();
        self.total_tokens += tokens as f64;
        let longest = batch.iter().map(|e| e.input_ids.len()).max().unwrap_or(0);
        let pos = self.schedule.position(step);
        let mut m = StepMetrics::new();
        for (k, v) in [
            ("train/loss", r.loss),
            ("train/grad_norm", r.grad_norm),
            ("train/lr", r.lr),
            ("train/tokens_per_second", tokens as f64 / step_secs),
            (
                "train/tokens_per_second_per_gpu",
                tokens as f64 / step_secs / world as f64,
            ),
            ("train/actual_num_tokens", tokens as f64),
            ("train/num_loss_tokens", loss_tokens as f64),
            ("train/batch_padded_seq_len", longest as f64),
            ("train/total_tokens_processed", self.total_tokens),
            ("train/epoch", pos.epoch as f64),
            ("train/global_step", step as f64),
            ("timing/data_loading", collate_secs),
            ("timing/forward_backward", r.forward_backward_secs),
            ("timing/optim_step", r.optim_step_secs),
            ("timing/step", step_secs),
        ] {
            m.insert(k.to_string(), v);
        }
        if self.cfg.enable_ray_gpu_monitor {
            for (k, v) in self.policy.memory().step_metrics_mib(r.peak_gradient_bytes) {
                m.insert(k.into(), v);
            }
        }
        Ok(m)
    }

    /// The eval set's per-token mean NLL: each rank scores a contiguous part,
    /// `micro_train_batch_size_per_gpu` conversations per forward.
    pub fn evaluate(&self) -> Result<f64> {
        let Some(eval) = &self.eval else {
            bail!("no eval data set (eval_dataset_name)");
        };
        let (rank, world) = (self.dist.rank(), self.dist.world());
        let (n, w) = (eval.len(), world.max(1));
        let mine: Vec<&super::SftExample> = eval[n * rank / w..n * (rank + 1) / w].iter().collect();
        let model = self.policy.model();
        let pad = pad_id(&self.tokenizer, model);
        let micro = self.cfg.micro_train_batch_size_per_gpu;
        let mut nll = 0.0;
        for b in micro_batches(&mine, micro, true, 1.0, pad, model.device()) {
            nll += self.policy.masked_nll_sum(&b)?;
        }
        let nll = self.dist.sum_f64(&[nll])?[0];
        let tokens: usize = eval.iter().map(|e| e.loss_tokens()).sum();
        Ok(nll / tokens.max(1) as f64)
    }

    /// A resumable checkpoint of the current step (collective); `None`
    /// without `ckpt_path`.
    fn save_checkpoint(&self, metrics: &StepMetrics) -> Result<Option<PathBuf>> {
        let Some(root) = self.cfg.ckpt_root() else {
            return Ok(None);
        };
        let state = TrainerState {
            global_step: self.global_step,
            data_position: self.schedule.position(self.global_step + 1),
            seed: self.cfg.seed,
            kl_ctrl_value: None,
            metrics: metrics.clone(),
            extra: serde_json::to_value(&self.cfg)?,
        };
        let keep = self.cfg.max_ckpts_to_keep;
        Ok(Some(self.policy.save_checkpoint(
            &root,
            &state,
            &[],
            keep,
        )?))
    }

    /// The policy in Hugging Face layout at `global_step_N/policy` under the
    /// export root, by rank 0.
    fn export(&self) -> Result<Option<PathBuf>> {
        let dir = self
            .cfg
            .export_root()
            .join(format!("global_step_{}", self.global_step))
            .join("policy");
        if self.dist.is_main() {
            skyrl_model::save_checkpoint(self.policy.model(), Some(&self.tokenizer), &dir)?;
            info!(dir = %dir.display(), "exported the policy");
        }
        self.dist.barrier()?;
        Ok(Some(dir))
    }
}

/// The metrics of the summary's last step (empty when none ran).
fn summary_last(summary: &SftSummary) -> StepMetrics {
    summary
        .steps
        .last()
        .map(|(_, m)| m.clone())
        .unwrap_or_default()
}
