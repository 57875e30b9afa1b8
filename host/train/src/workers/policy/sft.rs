//! The policy's supervised step (skyrl 0.3.0's `forward_backward` with
//! `loss_fn="cross_entropy"`, then `optim_step`): every micro-batch's loss is
//! the `cross_entropy` policy loss, `−logp` summed over the loss mask, whose
//! entries the caller pre-scaled by 1 / (loss tokens of the whole batch, all
//! ranks), so the micro-batches of every rank add up to the per-token mean
//! over the batch; then the gradients are synced over the ranks, clipped and
//! AdamW steps, as in the RL update.

use std::time::Instant;

use anyhow::Result;
use tch::Kind;

use super::super::forward::{response_logprobs, training_forward};
use super::PolicyWorker;
use crate::algorithms::loss::{actor_loss, ActorBatch};
use crate::batch::TrainingBatch;
use crate::config::AlgorithmConfig;

/// What one supervised step measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct SftStepReport {
    /// The loss over the whole batch (all ranks): the per-token mean NLL.
    pub loss: f64,
    /// Gradient norm before clipping.
    pub grad_norm: f64,
    /// Learning rate of the step.
    pub lr: f64,
    /// Most gradient bytes held on this rank (before the optimizer step).
    pub peak_gradient_bytes: i64,
    pub forward_backward_secs: f64,
    pub optim_step_secs: f64,
}

impl PolicyWorker {
    /// One optimizer step over this rank's `micro_batches`, whose
    /// `response_mask` holds the pre-scaled loss weights.
    pub fn sft_step(
        &mut self,
        micro_batches: &[TrainingBatch],
        max_grad_norm: f64,
    ) -> Result<SftStepReport> {
        let start = Instant::now();
        let cfg = AlgorithmConfig {
            policy_loss_type: "cross_entropy".into(),
            use_kl_loss: false,
            use_entropy_loss: false,
            ..AlgorithmConfig::default()
        };
        self.zero_grad();
        let mut local = 0.0;
        for mb in micro_batches {
            let fwd = training_forward(
                &self.model,
                mb,
                0,
                mb.rows(),
                1.0,
                self.settings.gradient_checkpointing,
            )?;
            let lp = fwd.logprobs;
            let (old, zeros) = (lp.detach(), lp.zeros_like());
            let out = actor_loss(
                &self.losses,
                &cfg,
                &ActorBatch {
                    log_probs: &lp,
                    old_log_probs: &old,
                    advantages: &zeros,
                    loss_mask: &mb.response_mask,
                    rollout_logprobs: None,
                    ref_log_probs: None,
                    logits: None,
                    aux_weight: 0.0,
                },
            )?;
            local += out.loss.double_value(&[]);
            out.loss.backward();
            if let Some(checkpoints) = fwd.checkpoints {
                checkpoints.backward()?;
            }
        }
        let loss = self.dist.sum_f64(&[local])?[0];
        let peak_gradient_bytes = self.memory().gradients;
        let forward_backward_secs = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let (grad_norm, lr) = self.optimizer_step(max_grad_norm)?;
        Ok(SftStepReport {
            loss,
            grad_norm,
            lr,
            peak_gradient_bytes,
            forward_backward_secs,
            optim_step_secs: start.elapsed().as_secs_f64(),
        })
    }

    /// No-grad `Σ −logp · response_mask` over `batch` (this rank's part of an
    /// evaluation; the caller divides by the loss tokens of all ranks).
    pub fn masked_nll_sum(&self, batch: &TrainingBatch) -> Result<f64> {
        let _g = tch::no_grad_guard();
        let (lp, _) = response_logprobs(&self.model, batch, 0, batch.rows(), 1.0, false)?;
        Ok((lp.neg() * &batch.response_mask)
            .sum(Kind::Double)
            .double_value(&[]))
    }
}
