//! The causal language model: weights in a `VarStore` with Hugging Face names,
//! full and cached forward passes, training log-probs, load/save/copy.

use std::path::Path;

use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};
use tracing::{debug, warn};

use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::kv_cache::KvStore;
use crate::layers::{AttnMask, DecoderLayer, ParamInit, RmsNorm};
use crate::lora::{LoraSpec, LoraState};
use crate::rope::{RopeScaling, Rotary};
use crate::weights::{self, torch_dtype_name};

/// Where and in which precision to hold the weights.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions {
    /// Defaults to `Device::cuda_if_available()`.
    pub device: Device,
    /// Parameter dtype; defaults to fp32 (what the trainer optimises).
    pub kind: Kind,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            device: Device::cuda_if_available(),
            kind: Kind::Float,
        }
    }
}

/// Options of [`CausalLm::forward_logprobs_with`].
#[derive(Debug, Clone, Copy)]
pub struct LogprobOptions {
    /// Logits are divided by this before the softmax (skyrl passes the sampling
    /// temperature); 1.0 gives the raw log-probs.
    pub temperature: f64,
    /// Also return the per-position entropy of the (temperature-scaled) distribution.
    pub with_entropy: bool,
}

impl Default for LogprobOptions {
    fn default() -> Self {
        LogprobOptions {
            temperature: 1.0,
            with_entropy: false,
        }
    }
}

/// Result of [`CausalLm::forward_logprobs_with`].
#[derive(Debug)]
pub struct TokenLogprobs {
    /// `[B, T-1]` fp32: log p(input_ids[:, t+1] | input_ids[:, ..=t]), with grad.
    pub logprobs: Tensor,
    /// `[B, T-1]` fp32 entropy, when requested.
    pub entropy: Option<Tensor>,
}

/// Decoder-only transformer with the Qwen2 / Llama / Qwen3 architecture.
#[derive(Debug)]
pub struct CausalLm {
    vs: nn::VarStore,
    config: ModelConfig,
    pub(crate) embed_tokens: Tensor,
    pub(crate) layers: Vec<DecoderLayer>,
    pub(crate) norm: RmsNorm,
    lm_head: Tensor,
    pub(crate) rotary: Rotary,
    lora: Option<LoraState>,
    /// Sequence positions per LM-head chunk in the default chunking
    /// (`trainer.logprobs_chunk_size`); `None`: chosen by memory.
    pub(crate) logprob_chunk_positions: Option<i64>,
}

const LM_HEAD: &str = "lm_head.weight";

impl CausalLm {
    /// A randomly initialised model (HF-style init: normal(0, 0.02), norms 1,
    /// biases 0). The weights depend on `seed` alone: each is drawn from its own
    /// stream ([`crate::seeded_init`]), never from libtorch's global generator.
    pub fn new(config: ModelConfig, options: &LoadOptions, seed: u64) -> Result<Self> {
        Self::build(config, options, ParamInit::Seeded(seed))
    }

    /// The model with weights initialised as `init` says.
    fn build(config: ModelConfig, options: &LoadOptions, init: ParamInit) -> Result<Self> {
        config.validate()?;
        let mut vs = nn::VarStore::new(options.device);
        let root = vs.root();
        let model = &root / "model";
        let embed_dims = [config.vocab_size, config.hidden_size];
        let embed_tokens = init.weight(&(&model / "embed_tokens"), "weight", &embed_dims);
        let layers = (0..config.num_hidden_layers)
            .map(|i| DecoderLayer::new(&model / "layers" / i, &config, init))
            .collect();
        let norm = RmsNorm::new(&model / "norm", config.hidden_size, config.rms_norm_eps);
        let lm_head = if config.tie_word_embeddings {
            embed_tokens.shallow_clone()
        } else {
            init.weight(&(&root / "lm_head"), "weight", &embed_dims)
        };
        let scaling = match &config.rope_scaling {
            Some(v) => RopeScaling::from_config(v)?,
            None => RopeScaling::Default,
        };
        let rotary = Rotary::new(
            config.head_dim(),
            config.rope_theta,
            &scaling,
            options.device,
        );
        if options.kind != Kind::Float {
            vs.set_kind(options.kind);
        }
        Ok(CausalLm {
            vs,
            config,
            embed_tokens,
            layers,
            norm,
            lm_head,
            rotary,
            lora: None,
            logprob_chunk_positions: None,
        })
    }

    /// Loads `config.json` and the safetensors weights of a Hugging Face model directory.
    /// Variables whose dtype and device match the checkpoint take over a private
    /// (copy-on-write) memory map of the file, read lazily without a copy; the
    /// others are copied (converted) from it. Replace a checkpoint a live model was
    /// loaded from by renaming (as `save_pretrained` does), not by rewriting it in place.
    pub fn from_pretrained(dir: impl AsRef<Path>, options: &LoadOptions) -> Result<Self> {
        let dir = dir.as_ref();
        let config = ModelConfig::load(dir)?;
        let model = CausalLm::build(config, options, ParamInit::Empty)?;
        let mut variables = model.vs.variables();
        let _guard = tch::no_grad_guard();
        weights::for_each_tensor(dir, |name, tensor| {
            match variables.remove(name) {
                Some(mut var) => {
                    if var.size() != tensor.size() {
                        return Err(ModelError::Weights(format!(
                            "{name}: checkpoint shape {:?} but config expects {:?}",
                            tensor.size(),
                            var.size()
                        )));
                    }
                    if var.kind() == tensor.kind() && var.device() == tensor.device() {
                        // The variable takes over the mapped file's pages (copy-on-write).
                        var.f_set_data(&tensor)?;
                    } else {
                        var.f_copy_(&tensor)?;
                    }
                }
                None if name == LM_HEAD && model.config.tie_word_embeddings => {}
                None if name.ends_with("rotary_emb.inv_freq") => {}
                None => warn!(tensor = %name, "ignoring checkpoint tensor the model does not use"),
            }
            Ok(())
        })?;
        if !variables.is_empty() {
            let mut missing: Vec<_> = variables.into_keys().collect();
            missing.sort();
            return Err(ModelError::Weights(format!(
                "{}: missing tensors {missing:?}",
                dir.display()
            )));
        }
        debug!(dir = %dir.display(), params = model.num_parameters(), "loaded model");
        Ok(model)
    }

    /// Writes `config.json` and `model.safetensors` (sharded above 5 GB) to `dir`
    /// atomically: everything goes to a temporary sibling directory that then
    /// replaces `dir`. Files already in `dir` that are not model weights or config
    /// (tokenizer files, ...) are carried over.
    pub fn save_pretrained(&self, dir: impl AsRef<Path>) -> Result<()> {
        crate::atomic_dir::write_dir_atomically(dir.as_ref(), |tmp| {
            self.write_into(tmp, weights::DEFAULT_MAX_SHARD_BYTES)
        })
    }

    /// Writes config and weights into an existing directory (not atomic).
    pub fn write_into(&self, dir: &Path, max_shard_bytes: usize) -> Result<()> {
        let mut config = self.config.clone();
        config.torch_dtype = Some(torch_dtype_name(self.kind()).to_string());
        config.architectures = vec![config.arch()?.hf_class().to_string()];
        config.save(dir)?;
        weights::write_weights(dir, &self.merged_parameters(), max_shard_bytes)
    }

    /// The model config.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The parameters (for an optimiser: `nn::Adam::default().build(model.var_store(), lr)`).
    pub fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }

    /// Mutable parameters (freeze, change kind/device).
    pub fn var_store_mut(&mut self) -> &mut nn::VarStore {
        &mut self.vs
    }

    /// Device of the weights.
    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// Dtype of the weights.
    pub fn kind(&self) -> Kind {
        self.embed_tokens.kind()
    }

    /// Number of parameters (tied embeddings counted once).
    pub fn num_parameters(&self) -> i64 {
        self.vs
            .variables()
            .values()
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }

    /// The weights as `(name, tensor)` sorted by name (HF names; tied
    /// embeddings once). The tensors share storage with the model.
    pub fn named_parameters(&self) -> Vec<(String, Tensor)> {
        let mut v: Vec<(String, Tensor)> = self.vs.variables().into_iter().collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Copies every weight of `other` (same architecture and shapes) into this model,
    /// across devices and dtypes; LoRA adapters of `other` are merged in. Used
    /// for reference models and inference copies.
    pub fn copy_weights_from(&mut self, other: &CausalLm) -> Result<()> {
        if self.lora.is_some() {
            return Err(ModelError::Weights(
                "cannot copy weights into a model with LoRA adapters".into(),
            ));
        }
        let mine = self.vs.variables();
        let theirs: std::collections::HashMap<String, Tensor> =
            other.merged_parameters().into_iter().collect();
        if mine.len() != theirs.len() {
            return Err(ModelError::Weights(format!(
                "cannot copy weights: {} tensors vs {}",
                theirs.len(),
                mine.len()
            )));
        }
        let _guard = tch::no_grad_guard();
        for (name, var) in &mine {
            let src = theirs.get(name).ok_or_else(|| {
                ModelError::Weights(format!("cannot copy weights: source lacks {name}"))
            })?;
            if src.size() != var.size() {
                return Err(ModelError::Weights(format!(
                    "cannot copy weights: {name} is {:?} in the source, {:?} here",
                    src.size(),
                    var.size()
                )));
            }
            var.shallow_clone().f_copy_(src)?;
        }
        Ok(())
    }

    /// A new model with the same config and a copy of the weights on `options.device`
    /// in `options.kind`.
    pub fn try_clone(&self, options: &LoadOptions) -> Result<CausalLm> {
        let mut copy = CausalLm::build(self.config.clone(), options, ParamInit::Empty)?;
        copy.copy_weights_from(self)?;
        Ok(copy)
    }

    /// Puts LoRA adapters on the linear layers `spec` selects and freezes
    /// every base weight: from now on only the adapters are trainable
    /// ([`CausalLm::trainable_parameters`]), and exports, weight copies and
    /// [`CausalLm::merged_parameters`] carry `W + (alpha/r) B A`.
    pub fn attach_lora(&mut self, spec: LoraSpec) -> Result<()> {
        if self.lora.is_some() {
            return Err(ModelError::Lora("the model already has adapters".into()));
        }
        let (device, kind) = (self.device(), self.kind());
        let mut all_modules: Vec<String> = vec!["model.embed_tokens".into(), "lm_head".into()];
        let mut sites = Vec::new();
        for (i, layer) in self.layers.iter_mut().enumerate() {
            let layer_sites = layer.linear_sites(&format!("model.layers.{i}"));
            all_modules.extend(layer_sites.iter().map(|s| s.name.clone()));
            sites.extend(layer_sites);
        }
        let state = LoraState::attach(spec, sites, &all_modules, device, kind)?;
        self.vs.freeze();
        debug!(
            modules = state.modules().len(),
            params = state
                .parameters()
                .iter()
                .map(|(_, t)| t.numel())
                .sum::<usize>(),
            "attached LoRA adapters"
        );
        self.lora = Some(state);
        Ok(())
    }

    /// Attaches the PEFT adapter saved in `dir` (`adapter_config.json` +
    /// `adapter_model.safetensors`, as PEFT or [`LoraState::save_peft`] write it).
    pub fn load_lora_adapter(&mut self, dir: &Path) -> Result<()> {
        let (spec, tensors) = crate::lora::read_peft_adapter(dir)?;
        self.attach_lora(spec)?;
        self.lora
            .as_ref()
            .expect("just attached")
            .load_tensors(tensors)
    }

    /// The LoRA adapters, when attached.
    pub fn lora(&self) -> Option<&LoraState> {
        self.lora.as_ref()
    }

    /// Runs `f` (a training forward) with LoRA dropout on, and turns it off
    /// again afterwards; without adapters the model has no dropout and this
    /// only runs `f`.
    pub fn with_training<T>(&self, f: impl FnOnce() -> T) -> T {
        let Some(lora) = &self.lora else {
            return f();
        };
        lora.set_training(true);
        let out = f();
        lora.set_training(false);
        out
    }

    /// What an optimizer trains: the adapters (PEFT key names) with LoRA,
    /// otherwise every weight ([`CausalLm::named_parameters`]).
    pub fn trainable_parameters(&self) -> Vec<(String, Tensor)> {
        match &self.lora {
            Some(lora) => lora.parameters(),
            None => self.named_parameters(),
        }
    }

    /// The weights an inference engine or an export gets, sorted by HF name:
    /// [`CausalLm::named_parameters`] with every adapted layer's weight
    /// replaced by the merged `W + (alpha/r) B A` (fresh tensors).
    pub fn merged_parameters(&self) -> Vec<(String, Tensor)> {
        let mut named = self.named_parameters();
        if self.lora.is_none() {
            return named;
        }
        let mut merged = std::collections::HashMap::new();
        for (i, layer) in self.layers.iter().enumerate() {
            for (name, proj) in layer.projections(&format!("model.layers.{i}")) {
                if let Some(adapter) = proj.lora() {
                    merged.insert(format!("{name}.weight"), adapter.merge(proj.weight()));
                }
            }
        }
        for (name, t) in named.iter_mut() {
            if let Some(m) = merged.remove(name) {
                *t = m;
            }
        }
        named
    }

    /// Hidden states `[B, T, H]` after the final norm.
    ///
    /// * `input_ids [B, T]` int64, `positions [B, T]` int64,
    /// * `mask`: causal, or additive `[B, 1, T, S]`, `S` = cached + `T` (see [`AttnMask`]),
    /// * `cache`: appended to when given.
    pub fn forward_hidden(
        &self,
        input_ids: &Tensor,
        positions: &Tensor,
        mask: &AttnMask,
        mut cache: Option<&mut dyn KvStore>,
    ) -> Tensor {
        let mut h = Tensor::embedding(&self.embed_tokens, input_ids, -1, false, false);
        let (cos, sin) = self.rotary.cos_sin(positions, h.kind());
        for (i, layer) in self.layers.iter().enumerate() {
            let layer_cache = cache.as_deref_mut().map(|c| c.layer_kv(i));
            h = layer.forward(&h, &cos, &sin, mask, layer_cache);
        }
        self.norm.forward(&h)
    }

    /// Final hidden states `[B, T, H]` of a full (uncached) forward, for heads
    /// other than the LM head (a critic's value head).
    pub fn hidden_states(&self, input_ids: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
        let (ids, positions, mask) = self.full_inputs(input_ids, Some(attention_mask))?;
        Ok(self.forward_hidden(&ids, &positions, &mask, None))
    }

    /// The LM head's weight `[V, H]` (the embedding when tied).
    pub(crate) fn lm_head(&self) -> &Tensor {
        &self.lm_head
    }

    /// Logits `[.., V]` of hidden states `[.., H]`.
    pub fn logits(&self, hidden: &Tensor) -> Tensor {
        hidden.matmul(&self.lm_head.tr())
    }

    /// Full (uncached) forward: logits `[B, T, V]` in the model dtype.
    /// `attention_mask [B, T]` (1 = token, 0 = padding) defaults to all ones.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        let (ids, positions, mask) = self.full_inputs(input_ids, attention_mask)?;
        let hidden = self.forward_hidden(&ids, &positions, &mask, None);
        Ok(self.logits(&hidden))
    }

    /// Log-prob of every next token: `[B, T-1]` fp32 with grad, position `t` scoring
    /// `input_ids[:, t+1]`. Raw distribution (temperature 1).
    pub fn forward_logprobs(&self, input_ids: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
        Ok(self
            .forward_logprobs_with(input_ids, attention_mask, &LogprobOptions::default())?
            .logprobs)
    }

    /// [`CausalLm::forward_logprobs`] with a temperature and optional entropy.
    pub fn forward_logprobs_with(
        &self,
        input_ids: &Tensor,
        attention_mask: &Tensor,
        options: &LogprobOptions,
    ) -> Result<TokenLogprobs> {
        check_logprob_input(input_ids, options)?;
        let logits = self.forward(input_ids, Some(attention_mask))?;
        Ok(self.logprobs_of_logits(&logits, input_ids, options))
    }

    /// Next-token logprobs (and entropy) of `logits [B, T, V]` for `input_ids [B, T]`.
    pub(crate) fn logprobs_of_logits(
        &self,
        logits: &Tensor,
        input_ids: &Tensor,
        options: &LogprobOptions,
    ) -> TokenLogprobs {
        let t = input_ids.size()[1];
        let logits = logits.narrow(1, 0, t - 1).to_kind(Kind::Float);
        let logits = if options.temperature != 1.0 {
            logits / options.temperature
        } else {
            logits
        };
        let targets = input_ids
            .to_device(self.device())
            .narrow(1, 1, t - 1)
            .unsqueeze(-1);
        let log_z = logits.logsumexp([-1], true);
        let logprobs = (logits.gather(-1, &targets, false) - &log_z).squeeze_dim(-1);
        let entropy = options.with_entropy.then(|| {
            let logp = &logits - &log_z;
            -(logp.exp() * logp).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float)
        });
        TokenLogprobs { logprobs, entropy }
    }

    /// Device tensors of a full forward: ids, positions and the attention mask,
    /// [`AttnMask::Causal`] when no token is padding.
    pub(crate) fn full_inputs(
        &self,
        input_ids: &Tensor,
        attention_mask: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor, AttnMask)> {
        self.check_ids(input_ids)?;
        let mask = match attention_mask {
            Some(m) => {
                if m.size() != input_ids.size() {
                    return Err(ModelError::Input(format!(
                        "attention_mask shape {:?} differs from input_ids {:?}",
                        m.size(),
                        input_ids.size()
                    )));
                }
                m.to_device(self.device()).to_kind(Kind::Bool)
            }
            None => input_ids.ones_like().to_kind(Kind::Bool),
        };
        let ids = input_ids.to_device(self.device());
        let positions = positions_from_mask(&mask);
        let attn = if attention_mask.is_none() || mask.all().int64_value(&[]) != 0 {
            AttnMask::Causal
        } else {
            AttnMask::from_bool(&bool_mask(&mask, ids.size()[1], 0), self.kind())
        };
        Ok((ids, positions, attn))
    }

    fn check_ids(&self, input_ids: &Tensor) -> Result<()> {
        if input_ids.dim() != 2 {
            return Err(ModelError::Input(format!(
                "input_ids must be [B, T], got {:?}",
                input_ids.size()
            )));
        }
        if input_ids.kind() != Kind::Int64 {
            return Err(ModelError::Input(format!(
                "input_ids must be int64, got {:?}",
                input_ids.kind()
            )));
        }
        if input_ids.numel() > 0 {
            let (lo, hi) = (
                input_ids.min().int64_value(&[]),
                input_ids.max().int64_value(&[]),
            );
            if lo < 0 || hi >= self.config.vocab_size {
                return Err(ModelError::Input(format!(
                    "token ids must be in [0, {}), got range [{lo}, {hi}]",
                    self.config.vocab_size
                )));
            }
        }
        Ok(())
    }
}

/// Input checks of the logprob forwards: at least 2 tokens, a positive temperature.
pub(crate) fn check_logprob_input(input_ids: &Tensor, options: &LogprobOptions) -> Result<()> {
    let t = input_ids.size().get(1).copied().unwrap_or(0);
    if t < 2 {
        return Err(ModelError::Input(format!(
            "forward_logprobs needs at least 2 tokens per row, got {t}"
        )));
    }
    if options.temperature <= 0.0 {
        return Err(ModelError::Input(format!(
            "temperature must be positive, got {}",
            options.temperature
        )));
    }
    Ok(())
}

/// Positions from a `[B, T]` 0/1 mask: `cumsum - 1`, padding set to 1 (as skyrl does).
pub fn positions_from_mask(mask: &Tensor) -> Tensor {
    let m = mask.to_kind(Kind::Int64);
    let pos = m.cumsum(-1, Kind::Int64) - 1;
    pos.masked_fill(&m.eq(0), 1)
}

/// Boolean attention mask `[B, 1, T, S]` (true = attend) for `T` new queries whose
/// first one sits at key column `offset`, given the key padding mask `key_mask [B, S]`
/// (true = real). Query `i` sees key `j` when `j <= offset + i` and `key_mask[j]`.
pub fn bool_mask(key_mask: &Tensor, queries: i64, offset: i64) -> Tensor {
    let device = key_mask.device();
    let s = key_mask.size()[1];
    let q_pos = Tensor::arange(queries, (Kind::Int64, device)).view([queries, 1]) + offset;
    let k_pos = Tensor::arange(s, (Kind::Int64, device)).view([1, s]);
    let causal = k_pos.le_tensor(&q_pos); // [T, S]
    causal
        .unsqueeze(0)
        .logical_and(&key_mask.to_kind(Kind::Bool).unsqueeze(1)) // [B, T, S]
        .unsqueeze(1)
}
