//! One Tinker training model: the base model with LoRA adapters (rank 0:
//! every weight trains), gradients accumulated over `forward_backward`
//! calls, and AdamW applied by `optim_step` with the call's AdamParams.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use skyrl_model::{CausalLm, LoadOptions, LoraInit, LoraSpec, ModuleSelector};
use skyrl_train::optim::{sum_of_squares_many, AdamW, AdamWParams, LrSchedule};
use tch::{Device, Kind, Tensor};

use crate::loss::LossFn;

/// Tinker's LoRA alpha (skyrl's Tinker server uses the same).
pub const LORA_ALPHA: f64 = 32.0;

/// Where a training checkpoint keeps its weights and optimizer state.
const STATE_MODEL_DIR: &str = "model";
const STATE_OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// The checkpoint's description (base model, rank, seed, steps).
pub const STATE_META_FILE: &str = "state.json";

/// One datum of a forward(-backward) call, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatumInput {
    pub tokens: Vec<i64>,
    /// The token each position should predict (same length as `tokens`).
    pub targets: Vec<i64>,
    pub weights: Vec<f32>,
    /// The sampler's log-probs of the targets (policy losses only).
    pub sampler_logprobs: Vec<f32>,
    pub advantages: Vec<f32>,
}

/// Per-datum results of a forward(-backward) call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassOutput {
    pub logprobs: Vec<Vec<f32>>,
    pub elementwise_loss: Vec<Vec<f32>>,
    /// The summed loss.
    pub loss: f64,
}

/// Adam settings of one `optim_step`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AdamStep {
    pub learning_rate: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// 0: no clipping.
    pub grad_clip_norm: f64,
}

/// A model being trained through the API.
pub struct TrainingModel {
    model: CausalLm,
    optimizer: AdamW,
}

impl TrainingModel {
    /// The base model in `base_dir` with rank-`rank` adapters on every linear
    /// layer of the decoder (rank 0: full fine-tuning), adapters seeded by `seed`.
    pub fn new(
        base_dir: &Path,
        base_name: &str,
        rank: i64,
        seed: u64,
        options: &LoadOptions,
    ) -> Result<Self> {
        let mut model = CausalLm::from_pretrained(base_dir, options)
            .with_context(|| format!("cannot load the base model from {}", base_dir.display()))?;
        if rank < 0 {
            bail!("lora_config.rank must be 0 (full fine-tuning) or positive, got {rank}");
        }
        if rank > 0 {
            model.attach_lora(LoraSpec {
                rank,
                alpha: LORA_ALPHA,
                dropout: 0.0,
                target_modules: ModuleSelector::AllLinear,
                exclude_modules: None,
                init: LoraInit::Kaiming,
                seed,
                base_model_name_or_path: Some(base_name.to_string()),
            })?;
        }
        let hp = AdamWParams {
            lr: 1e-4,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-12,
            weight_decay: 0.0,
        };
        let optimizer = AdamW::new(model.trainable_parameters(), hp, LrSchedule::Constant);
        Ok(Self { model, optimizer })
    }

    /// The model (weights, config, adapters).
    pub fn model(&self) -> &CausalLm {
        &self.model
    }

    /// Checks `data` against the model: lengths, vocabulary, context.
    pub fn check(&self, data: &[DatumInput], loss: LossFn) -> Result<(), String> {
        let config = self.model.config();
        let (vocab, context) = (config.vocab_size, config.max_position_embeddings);
        for (i, d) in data.iter().enumerate() {
            let n = d.tokens.len();
            if n == 0 {
                return Err(format!("data[{i}].model_input has no tokens"));
            }
            if n as i64 > context {
                return Err(format!(
                    "data[{i}].model_input has {n} tokens; the model's context is {context}"
                ));
            }
            for (name, ids) in [
                ("model_input", &d.tokens),
                ("loss_fn_inputs.target_tokens", &d.targets),
            ] {
                if let Some(bad) = ids.iter().find(|&&t| t < 0 || t >= vocab) {
                    return Err(format!(
                        "data[{i}].{name} has token id {bad} outside the vocabulary [0, {vocab})"
                    ));
                }
            }
            let mut lens = vec![
                ("target_tokens", d.targets.len()),
                ("weights", d.weights.len()),
            ];
            if loss.needs_policy_inputs() {
                lens.push(("logprobs", d.sampler_logprobs.len()));
                lens.push(("advantages", d.advantages.len()));
            }
            for (name, len) in lens {
                if len != n {
                    return Err(format!(
                        "data[{i}].loss_fn_inputs.{name} has {len} values; model_input has {n} tokens"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Log-probs and losses of `data`; with `backward`, gradients of the
    /// summed loss are added to those already accumulated.
    pub fn pass(
        &mut self,
        data: &[DatumInput],
        loss: LossFn,
        backward: bool,
    ) -> Result<PassOutput> {
        let t = data.iter().map(|d| d.tokens.len()).max().unwrap_or(0);
        let device = self.model.device();
        let ids = padded(data, t, |d| &d.tokens).to_device(device);
        let targets = padded(data, t, |d| &d.targets).to_device(device);
        let lengths = Tensor::from_slice(
            &data
                .iter()
                .map(|d| d.tokens.len() as i64)
                .collect::<Vec<_>>(),
        );
        let mask = Tensor::arange(t as i64, (Kind::Int64, Device::Cpu))
            .unsqueeze(0)
            .lt_tensor(&lengths.unsqueeze(1))
            .to_kind(Kind::Int64)
            .to_device(device);
        let weights = padded(data, t, |d| &d.weights).to_device(device);
        let q = padded(data, t, |d| &d.sampler_logprobs).to_device(device);
        let adv = padded(data, t, |d| &d.advantages).to_device(device);
        let run = || -> Result<(Tensor, Tensor)> {
            // Through the chunked LM head: no [B, T, vocab] logits for large vocabularies.
            let lp = self.model.target_logprobs(&ids, &mask, &targets)?;
            let per_token = loss.per_token(&lp, &weights, &q, &adv);
            Ok((lp, per_token))
        };
        let (lp, per_token) = if backward {
            let (lp, per_token) = self.model.with_training(run)?;
            per_token.sum(Kind::Float).backward();
            (lp, per_token)
        } else {
            tch::no_grad(run)?
        };
        let total = per_token.sum(Kind::Double).double_value(&[]);
        let rows = |x: &Tensor| -> Vec<Vec<f32>> {
            let x = x.detach().to_device(Device::Cpu);
            data.iter()
                .enumerate()
                .map(|(i, d)| {
                    Vec::<f32>::try_from(x.get(i as i64).narrow(0, 0, d.tokens.len() as i64))
                        .unwrap_or_default()
                })
                .collect()
        };
        Ok(PassOutput {
            logprobs: rows(&lp),
            elementwise_loss: rows(&per_token),
            loss: total,
        })
    }

    /// Applies the accumulated gradients with `adam` and clears them; returns
    /// the gradient norm before clipping.
    pub fn optim_step(&mut self, adam: &AdamStep) -> f64 {
        self.optimizer.hp = AdamWParams {
            lr: adam.learning_rate,
            beta1: adam.beta1,
            beta2: adam.beta2,
            eps: adam.eps,
            weight_decay: adam.weight_decay,
        };
        let grads = self.gradients();
        // The norm before clipping; `step` clips only for a positive limit.
        let norm = sum_of_squares_many(&grads).sqrt();
        self.optimizer.step(adam.grad_clip_norm);
        self.optimizer.zero_grad();
        norm
    }

    /// The accumulated gradients (handles on them: writing one writes the
    /// gradient), of the trainable parameters that have one.
    pub fn gradients(&self) -> Vec<Tensor> {
        self.optimizer
            .params()
            .iter()
            .map(|(_, p)| p.grad())
            .filter(Tensor::defined)
            .collect()
    }

    /// Number of optimizer steps taken.
    pub fn steps(&self) -> i64 {
        self.optimizer.step_count()
    }

    /// Writes a training checkpoint into `dir` (atomically): the adapters in
    /// PEFT's layout (rank 0: the whole model) under `model/`, and the
    /// optimizer's moments and step in `optimizer.safetensors`, and `meta`
    /// (what a load needs to rebuild the model) in `state.json`.
    pub fn save_state(&self, dir: &Path, meta: &serde_json::Value) -> Result<()> {
        skyrl_model::atomic_dir::write_dir_atomically(dir, |tmp| {
            let meta_path = tmp.join(STATE_META_FILE);
            std::fs::write(&meta_path, serde_json::to_vec_pretty(meta).expect("json"))
                .map_err(|e| skyrl_model::ModelError::io(&meta_path, e))?;
            let model_dir = tmp.join(STATE_MODEL_DIR);
            match self.model.lora() {
                Some(lora) => lora.save_peft(&model_dir)?,
                None => {
                    std::fs::create_dir_all(&model_dir)
                        .map_err(|e| skyrl_model::ModelError::io(&model_dir, e))?;
                    self.model
                        .write_into(&model_dir, skyrl_model::weights::DEFAULT_MAX_SHARD_BYTES)?;
                }
            }
            let state = self.optimizer.state_tensors();
            Tensor::write_safetensors(&state, tmp.join(STATE_OPTIMIZER_FILE))
                .map_err(|e| skyrl_model::ModelError::Weights(format!("optimizer state: {e}")))
        })
        .with_context(|| format!("cannot write a checkpoint to {}", dir.display()))
    }

    /// Loads a checkpoint [`TrainingModel::save_state`] wrote: the weights,
    /// and the optimizer state when `optimizer` (else the optimizer starts
    /// fresh). Gradients not yet applied are dropped.
    pub fn load_state(&mut self, dir: &Path, optimizer: bool) -> Result<()> {
        let model_dir = dir.join(STATE_MODEL_DIR);
        match self.model.lora() {
            Some(lora) => {
                let (_, tensors) = skyrl_model::lora::read_peft_adapter(&model_dir)?;
                lora.load_tensors(tensors)?;
            }
            None => {
                let saved = CausalLm::from_pretrained(
                    &model_dir,
                    &LoadOptions {
                        device: self.model.device(),
                        kind: self.model.kind(),
                    },
                )?;
                self.model.copy_weights_from(&saved)?;
            }
        }
        let hp = self.optimizer.hp;
        self.optimizer = AdamW::new(self.model.trainable_parameters(), hp, LrSchedule::Constant);
        self.optimizer.zero_grad();
        if optimizer {
            let path = dir.join(STATE_OPTIMIZER_FILE);
            let state = Tensor::read_safetensors(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            self.optimizer.load_state_tensors(state)?;
        }
        Ok(())
    }

    /// Writes what a sampler loads into `dir`: the merged weights and config
    /// (an HF model directory, with the base model's tokenizer files) and,
    /// with adapters, PEFT's adapter files beside them.
    pub fn write_sampler_weights(&self, dir: &Path, base_dir: &Path) -> Result<()> {
        skyrl_model::atomic_dir::write_dir_atomically(dir, |tmp| {
            self.model
                .write_into(tmp, skyrl_model::weights::DEFAULT_MAX_SHARD_BYTES)?;
            if let Some(lora) = self.model.lora() {
                lora.save_peft(tmp)?;
            }
            copy_tokenizer_files(base_dir, tmp)
        })
        .with_context(|| format!("cannot write sampler weights to {}", dir.display()))
    }
}

impl TrainingModel {
    /// Writes the weights for use outside this server (`save_weights_external`)
    /// into `dir`: PEFT's adapter files for a LoRA model (what
    /// `peft.PeftModel.from_pretrained` loads onto the base model), else a
    /// Hugging Face model directory with the base model's tokenizer files.
    pub fn write_external(&self, dir: &Path, base_dir: &Path) -> Result<()> {
        skyrl_model::atomic_dir::write_dir_atomically(dir, |tmp| match self.model.lora() {
            Some(lora) => lora.save_peft(tmp),
            None => {
                self.model
                    .write_into(tmp, skyrl_model::weights::DEFAULT_MAX_SHARD_BYTES)?;
                copy_tokenizer_files(base_dir, tmp)
            }
        })
        .with_context(|| format!("cannot write external weights to {}", dir.display()))
    }
}

/// `[B, t]` rows of one field of each datum, right-padded with zeros (a
/// field shorter than its datum, or absent, is zero beyond its end).
fn padded<T: tch::kind::Element + Copy + Default>(
    data: &[DatumInput],
    t: usize,
    field: impl Fn(&DatumInput) -> &[T],
) -> Tensor {
    let mut flat = vec![T::default(); data.len() * t];
    for (row, d) in flat.chunks_exact_mut(t.max(1)).zip(data) {
        let values = field(d);
        row[..values.len()].copy_from_slice(values);
    }
    Tensor::from_slice(&flat).view([data.len() as i64, t as i64])
}

/// Copies the tokenizer and generation files of a model directory.
fn copy_tokenizer_files(from: &Path, to: &Path) -> skyrl_model::Result<()> {
    for name in [
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "generation_config.json",
        "vocab.json",
        "merges.txt",
        "chat_template.jinja",
    ] {
        let src = from.join(name);
        if src.is_file() {
            std::fs::copy(&src, to.join(name)).map_err(|e| skyrl_model::ModelError::io(&src, e))?;
        }
    }
    Ok(())
}
