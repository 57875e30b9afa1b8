//! Random-init tiny models with a one-token-per-character tokenizer, for tests,
//! CPU training runs and benchmarks.

use std::path::Path;

use serde_json::{json, Map, Value};
use tch::{Device, Kind};

use crate::config::{Arch, ModelConfig, TokenIds};
use crate::error::{ModelError, Result};
use crate::model::{CausalLm, LoadOptions};

/// Special tokens of the character tokenizer, ids 0, 1, 2.
pub const SPECIAL_TOKENS: [&str; 3] = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];

/// Qwen2-style ChatML template (no default system prompt).
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// Preset sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TinySize {
    /// hidden 64, 2 layers, 4 heads (2 kv), intermediate 192: trains on a CPU in minutes.
    Tiny,
    /// hidden 256, 4 layers, 8 heads (2 kv), intermediate 768.
    Small,
}

impl TinySize {
    /// Parses `tiny` or `small`.
    pub fn parse(name: &str) -> Result<Self> {
        match name.to_ascii_lowercase().as_str() {
            "tiny" => Ok(TinySize::Tiny),
            "small" => Ok(TinySize::Small),
            other => Err(ModelError::Input(format!(
                "unknown model size `{other}` (expected tiny or small)"
            ))),
        }
    }
}

/// Characters of the tokenizer after the special tokens: `\n`, then printable ASCII.
fn vocab_chars() -> Vec<char> {
    std::iter::once('\n')
        .chain((0x20u8..0x7f).map(char::from))
        .collect()
}

/// `tokenizer.json`: BPE with no merges over single characters (so every known
/// character is one token; characters outside the vocabulary are dropped), the
/// three special tokens as added tokens, and a `Fuse` decoder.
pub fn char_tokenizer_json() -> Value {
    let mut vocab = Map::new();
    let mut added = Vec::new();
    for (id, tok) in SPECIAL_TOKENS.iter().enumerate() {
        vocab.insert(tok.to_string(), json!(id));
        added.push(json!({
            "id": id, "content": tok, "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true
        }));
    }
    for (i, c) in vocab_chars().into_iter().enumerate() {
        vocab.insert(c.to_string(), json!(SPECIAL_TOKENS.len() + i));
    }
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": null,
        "post_processor": null,
        "decoder": { "type": "Fuse" },
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": []
        }
    })
}

/// Number of tokens of the character tokenizer.
pub fn char_vocab_size() -> i64 {
    (SPECIAL_TOKENS.len() + vocab_chars().len()) as i64
}

/// `tokenizer_config.json` with the ChatML template, EOS `<|im_end|>`, PAD `<|endoftext|>`.
pub fn char_tokenizer_config(max_len: i64) -> Value {
    let decoder: Map<String, Value> = SPECIAL_TOKENS
        .iter()
        .enumerate()
        .map(|(id, tok)| {
            (
                id.to_string(),
                json!({"content": tok, "lstrip": false, "normalized": false,
                       "rstrip": false, "single_word": false, "special": true}),
            )
        })
        .collect();
    json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": decoder,
        "bos_token": null,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": null,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "clean_up_tokenization_spaces": false,
        "model_max_length": max_len,
        "chat_template": CHATML_TEMPLATE,
    })
}

/// Config of a preset: Qwen2 ties embeddings and has q/k/v biases; Llama does not.
pub fn tiny_config(arch: Arch, size: TinySize) -> ModelConfig {
    let (hidden, layers, heads, kv_heads, inter) = match size {
        TinySize::Tiny => (64, 2, 4, 2, 192),
        TinySize::Small => (256, 4, 8, 2, 768),
    };
    ModelConfig {
        architectures: vec![arch.hf_class().into()],
        model_type: arch.model_type().into(),
        vocab_size: char_vocab_size(),
        hidden_size: hidden,
        intermediate_size: inter,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        num_key_value_heads: Some(kv_heads),
        head_dim: Some(hidden / heads),
        max_position_embeddings: 4096,
        rms_norm_eps: 1e-6,
        rope_theta: 10000.0,
        rope_scaling: None,
        tie_word_embeddings: arch == Arch::Qwen2,
        attention_bias: (arch != Arch::Qwen2).then_some(false),
        mlp_bias: (arch == Arch::Llama).then_some(false),
        hidden_act: "silu".into(),
        bos_token_id: Some(0),
        eos_token_id: Some(TokenIds::One(2)),
        pad_token_id: Some(0),
        torch_dtype: Some("float32".into()),
        extra: Map::new(),
    }
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("json values serialise");
    std::fs::write(path, text).map_err(|e| ModelError::io(path, e))
}

/// Writes a random-init model (seeded) with the character tokenizer and ChatML
/// template to `out_dir`, atomically, in Hugging Face format.
pub fn init_tiny_model(arch: Arch, size: TinySize, out_dir: &Path, seed: u64) -> Result<()> {
    let config = tiny_config(arch, size);
    let model = CausalLm::new(
        config.clone(),
        &LoadOptions {
            device: Device::Cpu,
            kind: Kind::Float,
        },
        seed,
    )?;
    crate::atomic_dir::write_dir_atomically(out_dir, |dir| {
        model.write_into(dir, crate::weights::DEFAULT_MAX_SHARD_BYTES)?;
        write_json(&dir.join("tokenizer.json"), &char_tokenizer_json())?;
        write_json(
            &dir.join("tokenizer_config.json"),
            &char_tokenizer_config(config.max_position_embeddings),
        )?;
        write_json(
            &dir.join("generation_config.json"),
            &json!({"bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 0}),
        )
    })
}
