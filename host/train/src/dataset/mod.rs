//! Prompt datasets in skyrl's schema (JSONL or Parquet) and a deterministic,
//! resumable epoch sampler.
//!
//! Row schema (that of SkyRL's example prep scripts): `prompt` (list of
//! `{role, content}`), optional `env_class`, and any other columns
//! (`reward_spec`, `extra_info`, `data_source`, ...), which are passed to the
//! environment as `extras`. Entries name files, globs, directories or Hugging
//! Face data sets ([`sources`]).

mod parquet_rows;
mod sampler;
pub mod sources;

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use parquet_rows::parquet_schema;
pub use sampler::{DataPosition, EpochSampler};
pub use sources::DataSources;

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

/// One record of a data file before the schema check: where it is and its
/// JSON value, or why it could not be read (the message names the origin).
#[derive(Debug)]
pub struct RawRow {
    /// `file:line` (JSONL) or `file#row` (Parquet).
    pub origin: String,
    /// The record as JSON, or why it could not be read or decoded.
    pub value: Result<Value>,
}

impl RawRow {
    /// The row, checked against the schema.
    pub fn parse(self) -> Result<PromptRow> {
        PromptRow::from_json(self.value?, self.origin)
    }
}

/// Whether a data file is read as JSON lines or Parquet (by extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// `.jsonl` / `.json`: one object per non-empty line.
    Jsonl,
    /// `.parquet`.
    Parquet,
}

impl FileFormat {
    /// The format of `path`, or an error naming it.
    pub fn of(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        match ext.as_str() {
            "jsonl" | "json" => Ok(Self::Jsonl),
            "parquet" => Ok(Self::Parquet),
            _ => bail!(
                "{}: unknown dataset format (expected .jsonl or .parquet)",
                path.display()
            ),
        }
    }
}

/// Hands every record of a data file to `visit`, in order, stopping at the
/// first error `visit` returns. The file failing as a whole (missing, unknown
/// format, not Parquet) is the returned error; a record that cannot be read is
/// handed over as an error, and the scan goes on (for Parquet, a record that
/// cannot be decoded ends the file).
pub fn visit_rows(path: &Path, visit: &mut dyn FnMut(RawRow) -> Result<()>) -> Result<()> {
    match FileFormat::of(path)? {
        FileFormat::Jsonl => visit_jsonl(path, visit),
        FileFormat::Parquet => parquet_rows::visit_parquet(path, visit),
    }
}

/// Rows loaded from one or more files.
#[derive(Debug, Clone, Default)]
pub struct PromptDataset {
    pub rows: Vec<PromptRow>,
}

impl PromptDataset {
    /// Loads every entry (a file by extension: `.jsonl`/`.json` lines or
    /// `.parquet`; a glob, a directory or a Hugging Face data set in this
    /// process's hub cache: see [`sources`]), in order. A leading `~/` is
    /// expanded to `$HOME`. The first bad row is an error naming its origin.
    pub fn load(entries: &[String]) -> Result<Self> {
        Self::load_from(&DataSources::from_env(), entries)
    }

    /// [`PromptDataset::load`] with hub names resolved by `sources`.
    pub fn load_from(sources: &DataSources, entries: &[String]) -> Result<Self> {
        let mut rows = Vec::new();
        for path in sources.expand_all(entries)? {
            let before = rows.len();
            visit_rows(&path, &mut |raw| {
                rows.push(raw.parse()?);
                Ok(())
            })?;
            tracing::info!(
                "loaded {} rows from {}",
                rows.len() - before,
                path.display()
            );
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

/// Reads a JSONL file: one object per non-empty line; the first bad line is an error.
pub fn load_jsonl(path: &Path) -> Result<Vec<PromptRow>> {
    let mut rows = Vec::new();
    visit_jsonl(path, &mut |raw| {
        rows.push(raw.parse()?);
        Ok(())
    })?;
    Ok(rows)
}

fn visit_jsonl(path: &Path, visit: &mut dyn FnMut(RawRow) -> Result<()>) -> Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read dataset {}", path.display()))?;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let origin = format!("{}:{}", path.display(), i + 1);
        let value = serde_json::from_str(line).with_context(|| format!("{origin}: invalid JSON"));
        visit(RawRow { origin, value })?;
    }
    Ok(())
}
