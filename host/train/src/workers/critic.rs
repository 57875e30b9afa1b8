//! The critic role (`advantage_estimator: gae`): the policy's architecture
//! with a value head (`value_head`, hidden -> 1, no bias, as skyrl-train's
//! critic) instead of the LM head, giving a value per response token (the
//! state before the token, as the logprobs), trained with the clipped value
//! loss on its own AdamW. With several ranks the critic is replicated (as
//! `ddp`): every rank draws the same fresh value head from `trainer.seed`,
//! gradients are
//! summed over the ranks before each step, and each rank's micro-batch
//! losses are weighted by their share of the whole mini-batch.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use skyrl_model::seeded_init::normal_tensor;
use skyrl_model::{CausalLm, LoadOptions, LoraSpec};
use tch::{nn, nn::Module, Kind, Tensor};

use crate::algorithms::critic_value_loss;
use crate::batch::TrainingBatch;
use crate::config::OptimizerConfig;
use crate::dist::Dist;
use crate::optim::AdamW;

/// Named tensors (weights or optimizer state).
pub type NamedTensors = Vec<(String, Tensor)>;

/// Name of the value head's weight in checkpoints.
pub const VALUE_HEAD: &str = "value_head.weight";

/// How the critic is trained each step.
#[derive(Debug, Clone, Copy)]
pub struct CriticSettings {
    pub epochs: usize,
    pub mini_batch_rows: i64,
    pub micro_batch_rows: i64,
    /// `trainer.algorithm.value_clip` (None: unclipped).
    pub value_clip: Option<f64>,
    pub max_grad_norm: f64,
}

/// Means of one critic update.
#[derive(Debug, Clone, Default)]
pub struct CriticReport {
    pub loss: f64,
    pub clipfrac: Option<f64>,
    pub grad_norm: f64,
    pub lr: f64,
}

/// Owns the critic model, its value head and optimizer.
pub struct CriticWorker {
    model: CausalLm,
    _head_store: nn::VarStore,
    head: nn::Linear,
    optimizer: AdamW,
    dist: Arc<Dist>,
}

/// How a critic is built: what it must match and how it starts.
pub struct CriticSpec {
    /// The policy's vocabulary size (the critic must share the tokenizer).
    pub vocab_size: i64,
    /// Adapters on a frozen backbone, or none (the backbone trains).
    pub lora: Option<LoraSpec>,
    /// Seed of the fresh value head.
    pub seed: u64,
}

impl CriticWorker {
    /// Loads the critic's backbone from `dir` for a policy with
    /// `spec.vocab_size` tokens, replicated over the ranks of `dist`. The
    /// fresh value head is drawn as `transformers` draws a weight missing from
    /// the checkpoint, normal(0, 0.02), from its own stream of `spec.seed`
    /// (the same on every rank). With `spec.lora`, the backbone is frozen and
    /// adapted; the value head always trains whole.
    pub fn load(
        dir: &Path,
        options: &LoadOptions,
        optimizer: &OptimizerConfig,
        total_steps: usize,
        spec: CriticSpec,
        dist: Arc<Dist>,
    ) -> Result<Self> {
        let CriticSpec {
            vocab_size,
            lora,
            seed,
        } = spec;
        let model = super::policy::load_model(dir, options, lora, "critic")?;
        if model.config().vocab_size != vocab_size {
            bail!(
                "the critic at {} has a vocabulary of {} tokens, the policy {}: they must share the tokenizer",
                dir.display(),
                model.config().vocab_size,
                vocab_size
            );
        }
        let store = nn::VarStore::new(options.device);
        let hidden = model.config().hidden_size;
        let weight = normal_tensor(seed, VALUE_HEAD, &[1, hidden], 0.02)
            .to_device(options.device)
            .to_kind(Kind::Float);
        let head = nn::Linear {
            ws: (store.root() / "value_head").add("weight", weight, true),
            bs: None,
        };
        let mut params = model.trainable_parameters();
        params.push((VALUE_HEAD.to_string(), head.ws.shallow_clone()));
        let optimizer = AdamW::from_config(params, optimizer, total_steps)?;
        Ok(Self {
            model,
            _head_store: store,
            head,
            optimizer,
            dist,
        })
    }

    /// Values `[len, R]` of the response tokens of rows `start..start+len`.
    fn response_values(&self, batch: &TrainingBatch, start: i64, len: i64) -> Result<Tensor> {
        let ids = batch.input_ids.narrow(0, start, len);
        let attn = batch.attention_mask.narrow(0, start, len);
        let hidden = self.model.hidden_states(&ids, &attn)?;
        let values = self
            .head
            .forward(&hidden.to_kind(Kind::Float))
            .squeeze_dim(-1);
        Ok(values.narrow(1, batch.prompt_len - 1, batch.response_len()))
    }

    /// No-grad values `[N, R]` of every row, `micro` rows per forward.
    pub fn values(&self, batch: &TrainingBatch, micro: i64) -> Result<Tensor> {
        let _g = tch::no_grad_guard();
        let (n, micro) = (batch.rows(), micro.max(1));
        let mut parts = Vec::new();
        let mut s = 0;
        while s < n {
            let len = micro.min(n - s);
            parts.push(self.response_values(batch, s, len)?);
            s += len;
        }
        Ok(Tensor::cat(&parts, 0))
    }

    /// `settings.epochs` passes of mini-batches of the clipped value loss
    /// towards `returns`, clipped around `old_values`.
    pub fn update(
        &mut self,
        batch: &TrainingBatch,
        old_values: &Tensor,
        returns: &Tensor,
        settings: &CriticSettings,
    ) -> Result<CriticReport> {
        let n = batch.rows();
        let mini = settings.mini_batch_rows.max(1);
        let micro = settings.micro_batch_rows.max(1);
        // Every rank holds `len` rows of each mini-batch.
        let world = self.dist.world() as f64;
        let (mut losses, mut fracs, mut report) = (Vec::new(), Vec::new(), CriticReport::default());
        for _ in 0..settings.epochs.max(1) {
            let mut start = 0;
            while start < n {
                let len = mini.min(n - start);
                self.optimizer.zero_grad();
                let mut s = start;
                while s < start + len {
                    let rows = micro.min(start + len - s);
                    let values = self
                        .model
                        .with_training(|| self.response_values(batch, s, rows))?;
                    let (loss, frac) = critic_value_loss(
                        &values,
                        &old_values.narrow(0, s, rows),
                        &returns.narrow(0, s, rows),
                        &batch.response_mask.narrow(0, s, rows),
                        settings.value_clip,
                    );
                    // Sequence mean over the mini-batch of every rank: each
                    // micro-batch's share (the ranks' gradients are summed).
                    (&loss * (rows as f64 / (len as f64 * world))).backward();
                    losses.push(loss.double_value(&[]));
                    fracs.extend(frac);
                    s += rows;
                }
                if let Some(g) = self.dist.group() {
                    let params = self.optimizer.params();
                    super::policy::all_reduce_gradients(g, params, self.dist.collective_device())?;
                }
                let (norm, lr) = self.optimizer.step(settings.max_grad_norm);
                (report.grad_norm, report.lr) = (norm, lr);
                start += len;
            }
        }
        // Means over the micro-batches of every rank.
        let sums = [
            losses.iter().sum::<f64>(),
            losses.len() as f64,
            fracs.iter().sum::<f64>(),
            fracs.len() as f64,
        ];
        let s = self.dist.sum_f64(&sums)?;
        report.loss = s[0] / s[1].max(1.0);
        report.clipfrac = (s[3] > 0.0).then(|| s[2] / s[3]);
        Ok(report)
    }

    /// Trained weights (backbone or its LoRA adapters, and the value head)
    /// and optimizer state, for checkpoints.
    pub fn checkpoint_state(&self) -> (NamedTensors, NamedTensors) {
        let mut weights = self.model.trainable_parameters();
        weights.push((VALUE_HEAD.to_string(), self.head.ws.shallow_clone()));
        (weights, self.optimizer.state_tensors())
    }

    /// Restores [`CriticWorker::checkpoint_state`].
    pub fn restore(&mut self, mut weights: NamedTensors, optimizer: NamedTensors) -> Result<()> {
        let i = weights
            .iter()
            .position(|(n, _)| n == VALUE_HEAD)
            .context("the critic checkpoint has no value head")?;
        let (_, head) = weights.remove(i);
        {
            let _g = tch::no_grad_guard();
            self.head.ws.shallow_clone().f_copy_(&head)?;
        }
        super::policy::load_params(&self.model, weights)?;
        self.optimizer.load_state_tensors(optimizer)
    }
}
