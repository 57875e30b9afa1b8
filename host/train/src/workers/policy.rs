//! The policy role: the model being trained, its optimizer and its part of a
//! checkpoint. One PPO update runs mini-batches with gradient accumulation
//! over micro-batches, then syncs gradients across the ranks, clips them and
//! steps AdamW (skyrl's `PolicyWorker.ppo_train`).
//!
//! Every rank trains on its share of each mini-batch. The advantages are
//! scaled by the loss reduction over the whole mini-batch (all ranks), and
//! the policy loss is their masked sum (skyrl 0.3.0), so the summed gradients
//! of all ranks equal the single-process gradient. With `ddp` the gradients are
//! all-reduced in buckets and every rank steps the whole optimizer; with
//! `fsdp` they are reduce-scattered into the rank's optimizer shard
//! ([`ShardedAdamW`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use skyrl_distributed::ReduceOp;
use skyrl_model::{CausalLm, LoadOptions, LoraSpec};
use tch::{Device, Kind, Tensor};

use super::forward::{logprobs_all, training_forward};
use crate::algorithms::loss::{actor_loss, ActorBatch};
use crate::algorithms::masked::masked_mean;
use crate::algorithms::{advantage_scales, LossReduction, PolicyLossRegistry, ReductionRow};
use crate::batch::TrainingBatch;
use crate::config::{AlgorithmConfig, OptimizerConfig, Strategy};
use crate::dist::Dist;
use crate::optim::flat::FlatLayout;
use crate::optim::sharded::ShardedAdamW;
use crate::optim::AdamW;

mod checkpoint;
mod sft;
pub use sft::SftStepReport;

/// Elements per gradient all-reduce bucket (`ddp`): 25M, PyTorch DDP's 25 MiB
/// default is in bytes; this is the fp32 count of 100 MB.
const BUCKET_ELEMENTS: i64 = 25 << 20;

/// How the policy is trained, beyond the optimizer's hyper-parameters.
#[derive(Debug, Clone, Copy)]
pub struct PolicySettings {
    pub strategy: Strategy,
    /// Recompute decoder layers in the backward (`trainer.gradient_checkpointing`).
    pub gradient_checkpointing: bool,
    /// Keep the optimizer state on the CPU between steps (`offload_after_step`).
    pub offload_optimizer: bool,
    /// Training steps of the whole run (the lr schedule's horizon).
    pub total_steps: usize,
    /// Sequence positions per LM-head chunk (`trainer.logprobs_chunk_size`).
    pub logprob_chunk_positions: Option<i64>,
}

/// The optimizer of the policy, whole or this rank's shard of it.
enum PolicyOptimizer {
    Replicated(AdamW),
    Sharded(ShardedAdamW),
}

/// The optimizer state as a checkpoint holds it.
pub enum OptimizerState {
    /// Every parameter's state (`exp_avg.<name>`, ...): written by rank 0.
    Full(Vec<(String, Tensor)>),
    /// This rank's flat shard: written by every rank.
    Shard {
        layout: FlatLayout,
        shard: Vec<(String, Tensor)>,
    },
}

/// Bytes the policy's training state holds on this rank.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryReport {
    pub parameters: i64,
    /// Gradient buffers held now.
    pub gradients: i64,
    pub optimizer: i64,
}

impl MemoryReport {
    /// The step metrics `memory/parameters_mib`, `memory/gradients_peak_mib`
    /// (from the step's `peak_gradient_bytes`) and `memory/optimizer_mib`.
    pub fn step_metrics_mib(&self, peak_gradient_bytes: i64) -> [(&'static str, f64); 3] {
        [
            ("memory/parameters_mib", mib(self.parameters)),
            ("memory/gradients_peak_mib", mib(peak_gradient_bytes)),
            ("memory/optimizer_mib", mib(self.optimizer)),
        ]
    }

    /// Gradient buffers held now, in MiB (`memory/gradients_at_rest_mib`).
    pub fn gradients_at_rest_mib(&self) -> f64 {
        mib(self.gradients)
    }
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// What one PPO update trains on (all `[N, R]`, rows as in `batch`).
pub struct PpoBatch<'a> {
    pub batch: &'a TrainingBatch,
    pub advantages: &'a Tensor,
    /// Logprobs of the policy before this update.
    pub old_logprobs: &'a Tensor,
    /// Reference logprobs, when a KL loss is used.
    pub ref_logprobs: Option<&'a Tensor>,
    /// The prompt each row was sampled from (rows of one prompt share the id):
    /// the groups of `prompt_mean`.
    pub prompts: &'a [u64],
}

/// How one PPO update runs.
pub struct PpoSettings<'a> {
    /// Loss, KL and entropy settings (`trainer.algorithm`).
    pub algorithm: &'a AlgorithmConfig,
    /// Logit temperature of the forward.
    pub temperature: f64,
    /// Rows per optimizer step.
    pub mini_batch_rows: i64,
    /// Rows per forward/backward.
    pub micro_batch_rows: i64,
    /// Passes over the batch (`update_epochs_per_batch`).
    pub epochs: usize,
    /// Gradient clipping (0 = off).
    pub max_grad_norm: f64,
    /// Whether the batch's rollout logprobs are the engine's (logprobs were
    /// requested); otherwise losses see none, as in skyrl.
    pub rollout_logprobs: bool,
}

/// What one PPO update measured.
#[derive(Debug, Default)]
pub struct PpoReport {
    /// Per-micro-batch values of each metric (`policy/...`, `entropy`).
    pub metrics: BTreeMap<String, Vec<f64>>,
    /// Gradient norm before clipping, per optimizer step.
    pub grad_norms: Vec<f64>,
    /// Learning rate of each optimizer step.
    pub lrs: Vec<f64>,
    /// Most gradient bytes held on this rank (before an optimizer step).
    pub peak_gradient_bytes: i64,
}

impl PpoReport {
    fn push(&mut self, key: impl Into<String>, v: f64) {
        self.metrics.entry(key.into()).or_default().push(v);
    }
}

/// One micro-batch of a mini-batch: rows `start..start+rows` of the batch.
struct MicroBatch<'a> {
    start: i64,
    rows: i64,
    /// Its advantages, scaled by the loss reduction.
    advantages: &'a Tensor,
    /// Its share of the mini-batch's rows (weight of the KL and entropy terms).
    aux_weight: f64,
}

/// Owns the trained model and its optimizer (or this rank's shard of it).
pub struct PolicyWorker {
    model: CausalLm,
    optimizer: PolicyOptimizer,
    losses: PolicyLossRegistry,
    dist: Arc<Dist>,
    settings: PolicySettings,
}

impl PolicyWorker {
    /// Loads the policy from `dir`, attaches LoRA adapters when `lora` is
    /// given (then only they train), and creates the optimizer over what
    /// trains: sharded over the ranks of `dist` for `fsdp` with more than one
    /// rank, whole otherwise.
    pub fn load(
        dir: &Path,
        options: &LoadOptions,
        optimizer: &OptimizerConfig,
        settings: PolicySettings,
        dist: Arc<Dist>,
        lora: Option<LoraSpec>,
    ) -> Result<Self> {
        let mut model = load_model(dir, options, lora, "policy")?;
        model.set_logprob_chunk_positions(settings.logprob_chunk_positions);
        let params = model.trainable_parameters();
        let mut optimizer = match settings.strategy {
            Strategy::Sharded if dist.world() > 1 => {
                PolicyOptimizer::Sharded(ShardedAdamW::from_config(
                    params,
                    optimizer,
                    dist.rank(),
                    dist.world(),
                    settings.total_steps,
                )?)
            }
            _ => PolicyOptimizer::Replicated(AdamW::from_config(
                params,
                optimizer,
                settings.total_steps,
            )?),
        };
        if settings.offload_optimizer && options.device != Device::Cpu {
            match &mut optimizer {
                PolicyOptimizer::Replicated(o) => o.offload_state(),
                PolicyOptimizer::Sharded(o) => o.offload_state(),
            }
        }
        Ok(Self {
            model,
            optimizer,
            losses: PolicyLossRegistry::with_defaults(),
            dist,
            settings,
        })
    }

    /// Use `losses` (built-ins plus algorithm plugins) for `policy_loss_type`.
    pub fn set_losses(&mut self, losses: PolicyLossRegistry) {
        self.losses = losses;
    }

    /// The policy model.
    pub fn model(&self) -> &CausalLm {
        &self.model
    }

    /// No-grad response logprobs `[N, R]` of every row of `batch`.
    pub fn logprobs(&self, batch: &TrainingBatch, micro: i64, temperature: f64) -> Result<Tensor> {
        logprobs_all(&self.model, batch, micro, temperature)
    }

    /// One PPO update over `data`: `settings.epochs` passes of mini-batches.
    pub fn ppo_update(&mut self, data: &PpoBatch, settings: &PpoSettings) -> Result<PpoReport> {
        let mut report = PpoReport::default();
        let n_rows = data.batch.rows();
        let mini = settings.mini_batch_rows.max(1);
        for _epoch in 0..settings.epochs {
            let mut start = 0;
            while start < n_rows {
                let len = mini.min(n_rows - start);
                self.train_mini_batch(data, settings, start, len, &mut report)?;
                start += len;
            }
        }
        Ok(report)
    }

    /// Accumulates the gradients of rows `start..start+len` over
    /// micro-batches, then takes one optimizer step.
    fn train_mini_batch(
        &mut self,
        data: &PpoBatch,
        settings: &PpoSettings,
        start: i64,
        len: i64,
        report: &mut PpoReport,
    ) -> Result<()> {
        let a = settings.algorithm;
        let micro = settings.micro_batch_rows.max(1);
        let scaled = self.scaled_advantages(data, settings, start, len)?;
        // Every rank holds `len` rows of this mini-batch.
        let mini_rows = (len as usize * self.dist.world()) as f64;
        let mut loss_cfg = a.clone();
        loss_cfg.use_entropy_loss = false;
        loss_cfg.use_kl_loss = a.use_kl_loss && data.ref_logprobs.is_some();
        self.zero_grad();
        let mut sums = [0.0f64; 2];
        let mut s = start;
        while s < start + len {
            let rows = micro.min(start + len - s);
            let advs = scaled.narrow(0, s - start, rows);
            let micro_batch = MicroBatch {
                start: s,
                rows,
                advantages: &advs,
                aux_weight: rows as f64 / mini_rows,
            };
            let (policy_loss, final_loss) =
                self.micro_step(data, settings, &loss_cfg, &micro_batch, report)?;
            sums[0] += policy_loss;
            sums[1] += final_loss;
            s += rows;
        }
        // Losses are sums over the mini-batch: add the micro-batches of every rank.
        let sums = self.dist.sum_f64(&sums)?;
        report.push("policy/policy_loss", sums[0]);
        report.push("policy/final_loss", sums[1]);
        let held = self.memory().gradients;
        report.peak_gradient_bytes = report.peak_gradient_bytes.max(held);
        let (norm, lr) = self.optimizer_step(settings.max_grad_norm)?;
        report.grad_norms.push(norm);
        report.lrs.push(lr);
        Ok(())
    }

    /// This rank's advantages of rows `start..start+len`, scaled by the loss
    /// reduction over the whole mini-batch: the rows of every rank, its
    /// micro-batches as the ranks run them.
    fn scaled_advantages(
        &self,
        data: &PpoBatch,
        settings: &PpoSettings,
        start: i64,
        len: i64,
    ) -> Result<Tensor> {
        let a = settings.algorithm;
        let reduction: LossReduction = a.loss_reduction.parse()?;
        let micro = settings.micro_batch_rows.max(1);
        let tokens: Vec<f64> = Vec::<f64>::try_from(
            data.batch
                .response_mask
                .narrow(0, start, len)
                .sum_dim_intlist([-1i64].as_slice(), false, Kind::Double)
                .to_device(Device::Cpu),
        )?;
        if data.prompts.len() as i64 != data.batch.rows() {
            bail!(
                "{} prompt ids for {} training rows",
                data.prompts.len(),
                data.batch.rows()
            );
        }
        let rank = self.dist.rank() as u64;
        let local: Vec<ReductionRow> = tokens
            .iter()
            .enumerate()
            .map(|(i, &t)| ReductionRow {
                tokens: t,
                prompt: data.prompts[start as usize + i],
                micro_batch: (rank << 32) | (i as u64 / micro as u64),
            })
            .collect();
        let all = self.dist.all_gather_json(&local)?;
        let offset: usize = all[..self.dist.rank()].iter().map(Vec::len).sum();
        let rows: Vec<ReductionRow> = all.into_iter().flatten().collect();
        let scales = advantage_scales(reduction, &rows, a.max_seq_len)?;
        let mine = &scales[offset..offset + local.len()];
        let advs = data.advantages.narrow(0, start, len);
        let scales = Tensor::from_slice(mine)
            .to_kind(advs.kind())
            .to_device(advs.device())
            .unsqueeze(-1);
        Ok(advs * scales)
    }

    /// Forward + backward of one micro-batch; returns its policy loss and
    /// its whole loss (both sums, as the backward saw them).
    fn micro_step(
        &mut self,
        data: &PpoBatch,
        settings: &PpoSettings,
        loss_cfg: &AlgorithmConfig,
        micro: &MicroBatch,
        report: &mut PpoReport,
    ) -> Result<(f64, f64)> {
        let a = settings.algorithm;
        let (s, rows) = (micro.start, micro.rows);
        let mask = data.batch.response_mask.narrow(0, s, rows);
        let fwd = training_forward(
            &self.model,
            data.batch,
            s,
            rows,
            settings.temperature,
            self.settings.gradient_checkpointing,
        )?;
        let (lp, ent) = (fwd.logprobs, fwd.entropy);
        let old = data.old_logprobs.narrow(0, s, rows);
        let rollout = data.batch.rollout_logprobs.narrow(0, s, rows);
        let reference = data.ref_logprobs.map(|r| r.narrow(0, s, rows));
        let out = actor_loss(
            &self.losses,
            loss_cfg,
            &ActorBatch {
                log_probs: &lp,
                old_log_probs: &old,
                advantages: micro.advantages,
                loss_mask: &mask,
                rollout_logprobs: settings.rollout_logprobs.then_some(&rollout),
                ref_log_probs: reference.as_ref(),
                logits: None,
                aux_weight: micro.aux_weight,
            },
        )?;
        let mut loss = out.loss;
        if let Some(e) = ent.map(|e| masked_mean(&e, &mask)) {
            report.push("entropy", e.double_value(&[]));
            if a.use_entropy_loss {
                loss -= e * (a.entropy_loss_coef * micro.aux_weight);
            }
        }
        let final_loss = loss.double_value(&[]);
        loss.backward();
        if let Some(checkpoints) = fwd.checkpoints {
            checkpoints.backward()?;
        }
        let approx_kl = masked_mean(&(&old - lp.detach()), &mask).double_value(&[]);
        report.push("policy/approx_kl", approx_kl);
        let mut policy_loss = 0.0;
        for (k, v) in out.metrics {
            match k.as_str() {
                "policy_loss" => policy_loss = v,
                "final_loss" => {}
                _ => report.push(format!("policy/{k}"), v),
            }
        }
        Ok((policy_loss, final_loss))
    }

    fn zero_grad(&mut self) {
        match &mut self.optimizer {
            PolicyOptimizer::Replicated(o) => o.zero_grad(),
            PolicyOptimizer::Sharded(o) => o.zero_grad(),
        }
    }

    /// Syncs the gradients over the ranks and takes one optimizer step.
    fn optimizer_step(&mut self, max_norm: f64) -> Result<(f64, f64)> {
        match &mut self.optimizer {
            PolicyOptimizer::Replicated(o) => {
                if let Some(g) = self.dist.group() {
                    all_reduce_gradients(g, o.params(), self.dist.collective_device())?;
                }
                Ok(o.step(max_norm))
            }
            PolicyOptimizer::Sharded(o) => o.step(&self.dist, max_norm),
        }
    }

    /// What trains (every weight, or the LoRA adapters) and the optimizer
    /// state, for a checkpoint.
    pub fn checkpoint_state(&self) -> (Vec<(String, Tensor)>, OptimizerState) {
        let state = match &self.optimizer {
            PolicyOptimizer::Replicated(o) => OptimizerState::Full(o.state_tensors()),
            PolicyOptimizer::Sharded(o) => OptimizerState::Shard {
                layout: o.layout().clone(),
                shard: o.shard_state(),
            },
        };
        (self.model.trainable_parameters(), state)
    }

    /// Restores the trained weights (every weight, or the LoRA adapters) and
    /// the per-parameter optimizer state (as a checkpoint reads back,
    /// whatever world size wrote it).
    pub fn restore(
        &mut self,
        weights: Vec<(String, Tensor)>,
        optimizer: Vec<(String, Tensor)>,
    ) -> Result<()> {
        load_params(&self.model, weights)?;
        match &mut self.optimizer {
            PolicyOptimizer::Replicated(o) => o.load_state_tensors(optimizer),
            PolicyOptimizer::Sharded(o) => o.load_state_tensors(optimizer),
        }
    }

    /// Bytes of parameters, gradients held now and optimizer state on this rank.
    pub fn memory(&self) -> MemoryReport {
        let bytes = |t: &Tensor| t.numel() as i64 * t.kind().elt_size_in_bytes() as i64;
        let mut params = self.model.named_parameters();
        if self.model.lora().is_some() {
            params.extend(self.model.trainable_parameters());
        }
        MemoryReport {
            parameters: params.iter().map(|(_, p)| bytes(p)).sum(),
            gradients: params
                .iter()
                .map(|(_, p)| p.grad())
                .filter(Tensor::defined)
                .map(|g| bytes(&g))
                .sum(),
            optimizer: match &self.optimizer {
                PolicyOptimizer::Replicated(o) => o.state_bytes(),
                PolicyOptimizer::Sharded(o) => o.state_bytes(),
            },
        }
    }
}

/// Sums every parameter's gradient over the ranks (`ddp`), in buckets of at
/// most [`BUCKET_ELEMENTS`] elements, one flattened all-reduce per bucket.
pub(crate) fn all_reduce_gradients(
    group: &skyrl_distributed::ProcessGroup,
    params: &[(String, Tensor)],
    device: Device,
) -> Result<()> {
    let _g = tch::no_grad_guard();
    let grads: Vec<Tensor> = params
        .iter()
        .map(|(_, p)| p.grad())
        .filter(Tensor::defined)
        .collect();
    let mut bucket: Vec<Tensor> = Vec::new();
    let mut filled = 0i64;
    let flush = |bucket: &mut Vec<Tensor>| -> Result<()> {
        if bucket.is_empty() {
            return Ok(());
        }
        let mut comm: Vec<Tensor> = bucket
            .iter()
            .map(|g| crate::optim::to_device(g, device))
            .collect();
        group
            .all_reduce_many(&mut comm, ReduceOp::Sum)
            .context("gradient all-reduce failed")?;
        for (g, c) in bucket.iter_mut().zip(&comm) {
            if g.device() != c.device() {
                g.copy_(c);
            }
        }
        bucket.clear();
        Ok(())
    };
    for g in grads {
        filled += g.numel() as i64;
        bucket.push(g);
        if filled >= BUCKET_ELEMENTS {
            flush(&mut bucket)?;
            filled = 0;
        }
    }
    flush(&mut bucket)
}

/// Loads a trained role's model from `dir`, with LoRA adapters when `lora` is given.
pub(crate) fn load_model(
    dir: &Path,
    options: &LoadOptions,
    lora: Option<LoraSpec>,
    role: &str,
) -> Result<CausalLm> {
    let mut model = CausalLm::from_pretrained(dir, options)
        .with_context(|| format!("cannot load the {role} from {}", dir.display()))?;
    if let Some(spec) = lora {
        model
            .attach_lora(spec)
            .with_context(|| format!("cannot attach LoRA adapters to the {role}"))?;
    }
    Ok(model)
}

/// Copies `saved` (every trained parameter of `model`: its weights, or its
/// LoRA adapters, by name) into `model`.
pub(crate) fn load_params(model: &CausalLm, saved: Vec<(String, Tensor)>) -> Result<()> {
    let vars: std::collections::HashMap<String, Tensor> =
        model.trainable_parameters().into_iter().collect();
    let _g = tch::no_grad_guard();
    let mut seen = 0;
    for (name, t) in saved {
        let var = vars.get(&name).with_context(|| {
            let hint = match (name.contains(".lora_"), model.lora().is_some()) {
                (true, false) => {
                    ": the checkpoint holds LoRA adapters; set `*.model.lora` as in the run that wrote it"
                }
                (false, true) => ": the checkpoint holds full weights but LoRA is on here",
                _ => "",
            };
            format!("checkpoint has unknown parameter `{name}`{hint}")
        })?;
        if var.size() != t.size() {
            bail!(
                "checkpoint parameter `{name}` has shape {:?}, model has {:?}",
                t.size(),
                var.size()
            );
        }
        var.shallow_clone().f_copy_(&t)?;
        seen += 1;
    }
    if seen != vars.len() {
        bail!(
            "checkpoint holds {seen} parameters, the model has {}",
            vars.len()
        );
    }
    Ok(())
}
