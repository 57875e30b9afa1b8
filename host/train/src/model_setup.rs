//! Where the policy / reference weights come from: a Hugging Face directory or
//! hub name resolved in the local hub cache (`model.path`), or a random tiny
//! init (`model.init`, or no model at all), written once into the run's export
//! directory.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use skyrl_model::tiny::{char_tokenizer_config, char_tokenizer_json, char_vocab_size, tiny_config};
use skyrl_model::{Arch, CausalLm, LoadOptions};
use tch::{Device, Kind};

use crate::config::{ModelConfig, TinyModelSpec};

/// Built-in tokenizer names accepted by `model.init.tokenizer`.
pub const CHAR_TOKENIZER: &str = "char";

/// The model directory for `model`: `path` (a local directory, else a hub name
/// `org/name[@revision]` found in the Hugging Face cache), otherwise a random
/// init from `init` (defaults when null) created in `init_dir` unless it
/// already holds one.
pub fn resolve_model_dir(model: &ModelConfig, init_dir: &Path, seed: u64) -> Result<PathBuf> {
    if let Some(p) = &model.path {
        let dir = skyrl_model::resolve_model(p)?;
        if !dir.join("config.json").is_file() {
            bail!(
                "model path {} is not a Hugging Face model directory (no config.json); \
                 create one with `skyrl model init --out DIR` or drop `path` to init a tiny model",
                dir.display()
            );
        }
        return Ok(dir);
    }
    if init_dir.join("config.json").is_file() {
        return Ok(init_dir.to_path_buf());
    }
    let spec = model.init.clone().unwrap_or_else(default_spec);
    init_from_spec(&spec, init_dir, spec.seed.unwrap_or(seed))?;
    Ok(init_dir.to_path_buf())
}

/// The tiny preset as a spec (hidden 64, 2 layers, the character tokenizer).
pub fn default_spec() -> TinyModelSpec {
    let c = tiny_config(Arch::Qwen2, skyrl_model::TinySize::Tiny);
    TinyModelSpec {
        vocab_size: c.vocab_size as usize,
        hidden_size: c.hidden_size as usize,
        intermediate_size: c.intermediate_size as usize,
        num_hidden_layers: c.num_hidden_layers as usize,
        num_attention_heads: c.num_attention_heads as usize,
        num_key_value_heads: c.kv_heads() as usize,
        max_position_embeddings: 512,
        rope_theta: c.rope_theta,
        rms_norm_eps: c.rms_norm_eps,
        tie_word_embeddings: true,
        tokenizer: Some(CHAR_TOKENIZER.into()),
        seed: None,
    }
}

/// Writes a randomly initialised Qwen2-style model for `spec` with the built-in
/// character tokenizer and ChatML template into `dir` (atomically).
pub fn init_from_spec(spec: &TinyModelSpec, dir: &Path, seed: u64) -> Result<()> {
    match spec.tokenizer.as_deref() {
        None | Some(CHAR_TOKENIZER) => {}
        Some(other) => bail!(
            "trainer.*.model.init.tokenizer: unknown tokenizer `{other}` (the built-in one is `{CHAR_TOKENIZER}`)"
        ),
    }
    let min_vocab = char_vocab_size() as usize;
    if spec.vocab_size < min_vocab {
        bail!(
            "trainer.*.model.init.vocab_size ({}) is smaller than the character tokenizer ({min_vocab})",
            spec.vocab_size
        );
    }
    let mut c = tiny_config(Arch::Qwen2, skyrl_model::TinySize::Tiny);
    c.vocab_size = spec.vocab_size as i64;
    c.hidden_size = spec.hidden_size as i64;
    c.intermediate_size = spec.intermediate_size as i64;
    c.num_hidden_layers = spec.num_hidden_layers as i64;
    c.num_attention_heads = spec.num_attention_heads as i64;
    c.num_key_value_heads = Some(spec.num_key_value_heads as i64);
    c.head_dim = Some((spec.hidden_size / spec.num_attention_heads.max(1)) as i64);
    c.max_position_embeddings = spec.max_position_embeddings as i64;
    c.rope_theta = spec.rope_theta;
    c.rms_norm_eps = spec.rms_norm_eps;
    c.tie_word_embeddings = spec.tie_word_embeddings;
    let model = CausalLm::new(
        c.clone(),
        &LoadOptions {
            device: Device::Cpu,
            kind: Kind::Float,
        },
        seed,
    )
    .context("invalid trainer.*.model.init architecture")?;
    skyrl_model::atomic_dir::write_dir_atomically(dir, |tmp| {
        model.write_into(tmp, skyrl_model::weights::DEFAULT_MAX_SHARD_BYTES)?;
        write_json(&tmp.join("tokenizer.json"), &char_tokenizer_json())?;
        write_json(
            &tmp.join("tokenizer_config.json"),
            &char_tokenizer_config(c.max_position_embeddings),
        )
    })
    .with_context(|| format!("cannot write the initial model to {}", dir.display()))?;
    tracing::info!(dir = %dir.display(), "initialised a tiny random model");
    Ok(())
}

fn write_json(path: &Path, value: &Value) -> skyrl_model::Result<()> {
    let text = serde_json::to_string_pretty(value).expect("json values serialise");
    std::fs::write(path, text).map_err(|e| skyrl_model::ModelError::io(path, e))
}
