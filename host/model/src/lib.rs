//! `skyrl-model`: a Qwen2 / Llama / Qwen3 decoder-only transformer on libtorch
//! (`tch`), loading and saving the Hugging Face format, with a tokenizer and chat
//! template, a batched KV-cache sampler, and the log-prob API the trainer needs.
//!
//! ```no_run
//! use skyrl_model::{CausalLm, InferenceEngine, LoadOptions, SamplingParams, Tokenizer};
//! # fn main() -> anyhow::Result<()> {
//! let dir = std::path::Path::new("/tmp/tiny");
//! skyrl_model::init_tiny_model(skyrl_model::Arch::Qwen2, skyrl_model::TinySize::Tiny, dir, 0)?;
//! let model = CausalLm::from_pretrained(dir, &LoadOptions::default())?;
//! let tokenizer = Tokenizer::from_dir(dir)?;
//! let prompt = tokenizer.encode_chat(&[skyrl_model::ChatMessage::new("user", "hi")], true)?;
//! let engine = InferenceEngine::new(model, Some(tokenizer));
//! let out = engine.generate(&[prompt], &SamplingParams::greedy(16))?;
//! # Ok(()) }
//! ```

pub mod atomic_dir;
pub mod chat_template;
pub mod checkpointing;
pub mod chunked_logprobs;
pub mod config;
pub mod custom_templates;
pub mod engine;
pub mod error;
pub mod hub;
pub mod intra_op;
pub mod kv_cache;
pub mod layers;
pub mod lora;
pub mod model;
pub mod paged;
pub mod rope;
pub mod sampling;
pub mod seeded_init;
pub mod static_batch;
pub mod tiny;
pub mod tokenizer;
pub mod weights;

use std::path::{Path, PathBuf};

pub use chat_template::{ChatMessage, ChatTemplate, MarkedRender};
pub use checkpointing::LayerCheckpoints;
pub use chunked_logprobs::{default_logprob_chunk, LOGPROB_KEEP_ELEMENTS};
pub use config::{Arch, ModelConfig, TokenIds};
pub use custom_templates::{custom_chat_template, CUSTOM_CHAT_TEMPLATE_NAMES};
pub use engine::{
    BatchRequest, EngineSettings, InferenceEngine, MixedRequest, SampleStream, SeqId, SeqRequest,
    SeqUpdate,
};
pub use error::{ModelError, Result};
pub use hub::{resolve_model, HubError, HubId, RepoType};
pub use lora::{LoraInit, LoraSpec, LoraState, ModuleSelector};
pub use model::{CausalLm, LoadOptions, LogprobOptions, TokenLogprobs};
pub use paged::EngineStats;
pub use sampling::{
    Completion, LogprobMode, PromptTokenLogprob, SamplingParams, StopMatch, StopReason,
};
pub use static_batch::{generate, generate_with_streams};
pub use tiny::{init_tiny_model, TinySize};
pub use tokenizer::Tokenizer;

/// Expands a leading `~/` with `$HOME` (config paths: models, data, logs).
pub fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(p),
    }
}

/// Loads a Hugging Face model directory: weights + config and its tokenizer.
pub fn load_pretrained(
    dir: impl AsRef<Path>,
    options: &LoadOptions,
) -> Result<(CausalLm, Tokenizer)> {
    let dir = dir.as_ref();
    Ok((
        CausalLm::from_pretrained(dir, options)?,
        Tokenizer::from_dir(dir)?,
    ))
}

/// Directory of the PEFT adapter inside a checkpoint of a LoRA model (skyrl-train's name).
pub const LORA_ADAPTER_DIR: &str = "lora_adapter";

/// Saves model weights + config and the tokenizer files into `dir` in one atomic
/// replace (a complete Hugging Face checkpoint directory). With LoRA the
/// weights are merged, and the adapter alone is saved in PEFT's format under
/// [`LORA_ADAPTER_DIR`].
pub fn save_checkpoint(model: &CausalLm, tokenizer: Option<&Tokenizer>, dir: &Path) -> Result<()> {
    atomic_dir::write_dir_atomically(dir, |tmp| {
        model.write_into(tmp, weights::DEFAULT_MAX_SHARD_BYTES)?;
        if let Some(lora) = model.lora() {
            lora.save_peft(&tmp.join(LORA_ADAPTER_DIR))?;
        }
        match tokenizer {
            Some(t) => t.save(tmp),
            None => Ok(()),
        }
    })
}
