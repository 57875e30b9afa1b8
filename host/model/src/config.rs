//! `config.json` of a Hugging Face Qwen2 / Llama (and Qwen3) causal LM.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ModelError;

/// Model family, decided from `model_type` (or `architectures`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// Qwen2 / Qwen2.5: biases on q, k and v projections.
    Qwen2,
    /// Llama 2/3: no biases unless `attention_bias`.
    Llama,
    /// Qwen3: no biases, RMSNorm on q and k per head.
    Qwen3,
}

impl Arch {
    /// Parses `qwen2`, `llama` or `qwen3` (case-insensitive).
    pub fn parse(name: &str) -> Result<Self, ModelError> {
        match name.to_ascii_lowercase().as_str() {
            "qwen2" => Ok(Arch::Qwen2),
            "llama" => Ok(Arch::Llama),
            "qwen3" => Ok(Arch::Qwen3),
            other => Err(ModelError::Config(format!(
                "unsupported architecture `{other}` (supported: qwen2, llama, qwen3)"
            ))),
        }
    }

    /// The HF `architectures` entry.
    pub fn hf_class(self) -> &'static str {
        match self {
            Arch::Qwen2 => "Qwen2ForCausalLM",
            Arch::Llama => "LlamaForCausalLM",
            Arch::Qwen3 => "Qwen3ForCausalLM",
        }
    }

    /// The HF `model_type`.
    pub fn model_type(self) -> &'static str {
        match self {
            Arch::Qwen2 => "qwen2",
            Arch::Llama => "llama",
            Arch::Qwen3 => "qwen3",
        }
    }
}

/// One id or a list of ids (HF allows both for `eos_token_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TokenIds {
    /// A single id.
    One(i64),
    /// Several ids.
    Many(Vec<i64>),
}

impl TokenIds {
    /// All ids as a vector.
    pub fn to_vec(&self) -> Vec<i64> {
        match self {
            TokenIds::One(id) => vec![*id],
            TokenIds::Many(ids) => ids.clone(),
        }
    }
}

/// `config.json` with the Hugging Face field names. Unknown fields are kept in
/// `extra` and written back on save.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelConfig {
    /// e.g. `["Qwen2ForCausalLM"]`.
    #[serde(default)]
    pub architectures: Vec<String>,
    /// `qwen2`, `llama` or `qwen3`.
    pub model_type: String,
    /// Rows of the embedding matrix.
    pub vocab_size: i64,
    /// Residual stream width.
    pub hidden_size: i64,
    /// SwiGLU inner width.
    pub intermediate_size: i64,
    /// Decoder layers.
    pub num_hidden_layers: i64,
    /// Query heads.
    pub num_attention_heads: i64,
    /// Key/value heads (grouped-query attention); defaults to `num_attention_heads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_key_value_heads: Option<i64>,
    /// Per-head width; defaults to `hidden_size / num_attention_heads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<i64>,
    /// Longest sequence the model supports.
    #[serde(default = "default_max_positions")]
    pub max_position_embeddings: i64,
    /// RMSNorm epsilon.
    #[serde(default = "default_rms_eps")]
    pub rms_norm_eps: f64,
    /// RoPE base.
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    /// Optional RoPE scaling (`{"rope_type": "llama3", ...}` is supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<Value>,
    /// lm_head shares the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Biases on q/k/v/o (Llama, Qwen3). Qwen2 always has q/k/v biases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_bias: Option<bool>,
    /// Biases on the MLP projections (Llama).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp_bias: Option<bool>,
    /// Must be `silu`.
    #[serde(default = "default_act")]
    pub hidden_act: String,
    /// Beginning-of-sequence id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bos_token_id: Option<i64>,
    /// End-of-sequence id(s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eos_token_id: Option<TokenIds>,
    /// Padding id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pad_token_id: Option<i64>,
    /// Storage dtype (`float32`, `bfloat16`, `float16`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_dtype: Option<String>,
    /// Everything else in the file, preserved verbatim.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn default_max_positions() -> i64 {
    2048
}
fn default_rms_eps() -> f64 {
    1e-6
}
fn default_rope_theta() -> f64 {
    10000.0
}
fn default_act() -> String {
    "silu".into()
}

impl ModelConfig {
    /// Reads and validates `dir/config.json`.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::io(&path, e))?;
        let config: ModelConfig = serde_json::from_str(&text)
            .map_err(|e| ModelError::Config(format!("{}: {e}", path.display())))?;
        config.validate()?;
        Ok(config)
    }

    /// Writes `dir/config.json` (pretty-printed).
    pub fn save(&self, dir: &Path) -> Result<(), ModelError> {
        let path = dir.join("config.json");
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| ModelError::Config(format!("serialising config: {e}")))?;
        std::fs::write(&path, text).map_err(|e| ModelError::io(&path, e))
    }

    /// Model family.
    pub fn arch(&self) -> Result<Arch, ModelError> {
        Arch::parse(&self.model_type)
    }

    /// Key/value heads.
    pub fn kv_heads(&self) -> i64 {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// Per-head width.
    pub fn head_dim(&self) -> i64 {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads)
    }

    /// Whether q/k/v projections carry a bias.
    pub fn qkv_bias(&self) -> bool {
        match self.arch() {
            Ok(Arch::Qwen2) => true,
            _ => self.attention_bias.unwrap_or(false),
        }
    }

    /// Whether the output projection carries a bias.
    pub fn o_bias(&self) -> bool {
        match self.arch() {
            Ok(Arch::Qwen2) => false,
            _ => self.attention_bias.unwrap_or(false),
        }
    }

    /// Whether q and k get a per-head RMSNorm (Qwen3).
    pub fn qk_norm(&self) -> bool {
        matches!(self.arch(), Ok(Arch::Qwen3))
    }

    /// End-of-sequence ids from the config (may be empty).
    pub fn eos_ids(&self) -> Vec<i64> {
        self.eos_token_id
            .as_ref()
            .map(TokenIds::to_vec)
            .unwrap_or_default()
    }

    /// Checks the fields this implementation relies on.
    pub fn validate(&self) -> Result<(), ModelError> {
        self.arch()?;
        let bad = |msg: String| Err(ModelError::Config(msg));
        if self.hidden_act != "silu" {
            return bad(format!(
                "hidden_act `{}` is not supported (only silu)",
                self.hidden_act
            ));
        }
        for (name, v) in [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.kv_heads()),
            ("head_dim", self.head_dim()),
        ] {
            if v <= 0 {
                return bad(format!("{name} must be positive, got {v}"));
            }
        }
        if self.num_attention_heads % self.kv_heads() != 0 {
            return bad(format!(
                "num_attention_heads ({}) must be a multiple of num_key_value_heads ({})",
                self.num_attention_heads,
                self.kv_heads()
            ));
        }
        if self.head_dim() % 2 != 0 {
            return bad(format!("head_dim must be even, got {}", self.head_dim()));
        }
        if let Some(scaling) = &self.rope_scaling {
            crate::rope::RopeScaling::from_config(scaling)?;
        }
        if self
            .extra
            .get("use_sliding_window")
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            return bad("use_sliding_window=true is not supported".into());
        }
        Ok(())
    }
}
