//! Prompt datasets in skyrl's schema (JSONL or Parquet) and a deterministic,
//! resumable epoch sampler.
//!
//! Row schema: `prompt` (list of `{role, content}`), optional `env_class`, and
//! any other columns (`reward_spec`, `extra_info`, `data_source`, ...), which are
//! passed to the environment as `extras`.

mod parquet_rows;
mod sampler;

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use sampler::{DataPosition, EpochSampler};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// One dataset row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptRow {
    pub prompt: Vec<Message>,
    /// Env class of this row (falls back to `environment.env_class` when `None`).
    pub env_class: Option<String>,
    /// Every column except `prompt` and `env_class`.
    pub extras: Map<String, Value>,
    /// `file:line` (JSONL) or `file#row` (Parquet), for error messages.
    pub origin: String,
}

impl PromptRow {
    /// `extras.reward_spec.ground_truth`, if present.
    pub fn ground_truth(&self) -> Option<&Value> {
        self.extras.get("reward_spec")?.get("ground_truth")
    }

    /// `extras.data_source` as a string, if present.
    pub fn data_source(&self) -> Option<&str> {
        self.extras.get("data_source")?.as_str()
    }

    /// Builds a row from a JSON object, checking the schema.
    pub fn from_json(value: Value, origin: String) -> Result<Self> {
        let Value::Object(mut obj) = value else {
            bail!("{origin}: a row must be a JSON object");
        };
        let prompt = obj
            .remove("prompt")
            .with_context(|| format!("{origin}: missing column `prompt`"))?;
        let prompt = parse_prompt(prompt).with_context(|| format!("{origin}: bad `prompt`"))?;
        let env_class = match obj.remove("env_class") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => bail!("{origin}: `env_class` must be a string, got {other}"),
        };
        Ok(Self {
            prompt,
            env_class,
            extras: obj,
            origin,
        })
    }
}

fn parse_prompt(v: Value) -> Result<Vec<Message>> {
    let Value::Array(items) = v else {
        bail!("expected a list of {{role, content}} messages, got {v}");
    };
    if items.is_empty() {
        bail!("the prompt has no messages");
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let role = m.get("role").and_then(Value::as_str);
            let content = m.get("content").and_then(Value::as_str);
            match (role, content) {
                (Some(r), Some(c)) => Ok(Message {
                    role: r.to_string(),
                    content: c.to_string(),
                }),
                _ => bail!("message {i} needs string `role` and `content`, got {m}"),
            }
        })
        .collect()
}

/// Rows loaded from one or more files.
#[derive(Debug, Clone, Default)]
pub struct PromptDataset {
    pub rows: Vec<PromptRow>,
}

impl PromptDataset {
    /// Loads every file (by extension: `.jsonl`/`.json` lines, or `.parquet`), in order.
    /// A leading `~/` is expanded to `$HOME`.
    pub fn load(paths: &[String]) -> Result<Self> {
        let mut rows = Vec::new();
        for p in paths {
            let path = expand_home(p);
            let ext = path
                .extension()
                .and_then(|e| e.to_str())
                .unwrap_or("")
                .to_ascii_lowercase();
            let mut part = match ext.as_str() {
                "jsonl" | "json" => load_jsonl(&path)?,
                "parquet" => parquet_rows::load_parquet(&path)?,
                _ => bail!(
                    "{}: unknown dataset format (expected .jsonl or .parquet)",
                    path.display()
                ),
            };
            tracing::info!("loaded {} rows from {}", part.len(), path.display());
            rows.append(&mut part);
        }
        Ok(Self { rows })
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

pub use skyrl_model::expand_home;

/// Reads a JSONL file: one object per non-empty line.
pub fn load_jsonl(path: &Path) -> Result<Vec<PromptRow>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read dataset {}", path.display()))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let origin = format!("{}:{}", path.display(), i + 1);
        let value: Value =
            serde_json::from_str(line).with_context(|| format!("{origin}: invalid JSON"))?;
        rows.push(PromptRow::from_json(value, origin)?);
    }
    Ok(rows)
}
