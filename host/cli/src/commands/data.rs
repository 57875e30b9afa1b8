//! `skyrl data inspect`: what a dataset holds and whether training would load
//! it, read by the trainer's own loader.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::bail;
use clap::{Args, Subcommand};
use serde_json::Value;
use skyrl_train::dataset::{parquet_schema, visit_rows, DataSources, FileFormat};

#[derive(Subcommand)]
pub enum DataCommand {
    /// Print each file's schema, row count and first rows, and every row that
    /// would fail to load (exits non-zero if any would).
    Inspect(InspectArgs),
}

#[derive(Args)]
pub struct InspectArgs {
    /// Dataset entries as in `data.train_data`: files (.parquet, .jsonl),
    /// globs, directories, or Hugging Face data sets in the local hub cache
    /// (`hf://datasets/org/name[:split]`, `org/name[:split]`).
    #[arg(required = true)]
    entries: Vec<String>,
    /// Rows to print from the start of each file (strings past 1000 characters cut).
    #[arg(long, default_value_t = 3)]
    rows: usize,
}

pub fn run(cmd: DataCommand) -> anyhow::Result<()> {
    let DataCommand::Inspect(args) = cmd;
    let sources = DataSources::from_env();
    let mut report = Report::default();
    for entry in &args.entries {
        match sources.expand(entry) {
            Ok(files) => {
                for file in files {
                    if let Err(e) = inspect_file(&file, args.rows, &mut report) {
                        report.failures.push(format!("{e:#}"));
                    }
                }
            }
            Err(e) => report.failures.push(format!("{e:#}")),
        }
    }
    println!(
        "{} rows in {} files, {} would fail to load",
        report.rows,
        report.files,
        report.failures.len()
    );
    for f in &report.failures {
        println!("  FAIL {f}");
    }
    if !report.failures.is_empty() {
        bail!(
            "{} row(s) or file(s) of {} would fail to load",
            report.failures.len(),
            args.entries.join(" ")
        );
    }
    Ok(())
}

/// Totals over every file.
#[derive(Default)]
struct Report {
    files: usize,
    rows: usize,
    /// One line per row or file that would fail (origin and reason).
    failures: Vec<String>,
}

/// Prints one file's schema, row count and first `show` rows; records its
/// failing rows. An error is the file failing as a whole.
fn inspect_file(path: &Path, show: usize, report: &mut Report) -> anyhow::Result<()> {
    let format = FileFormat::of(path)?;
    let schema = match format {
        FileFormat::Parquet => Some(parquet_schema(path)?.0),
        FileFormat::Jsonl => None,
    };
    let mut rows = 0usize;
    let mut first = Vec::new();
    let mut keys: BTreeMap<String, usize> = BTreeMap::new();
    visit_rows(path, &mut |raw| {
        if let Ok(Value::Object(obj)) = &raw.value {
            for k in obj.keys() {
                *keys.entry(k.clone()).or_default() += 1;
            }
        }
        if first.len() < show {
            if let Ok(v) = &raw.value {
                first.push((raw.origin.clone(), v.clone()));
            }
        }
        rows += 1;
        if let Err(e) = raw.parse() {
            report.failures.push(format!("{e:#}"));
        }
        Ok(())
    })?;
    report.files += 1;
    report.rows += rows;
    let kind = match format {
        FileFormat::Parquet => "parquet",
        FileFormat::Jsonl => "jsonl",
    };
    println!("== {} ({kind}, {rows} rows)", path.display());
    match schema {
        Some(s) => println!("schema:\n{}", s.trim_end()),
        None => {
            let list: Vec<String> = keys
                .iter()
                .map(|(k, n)| format!("{k} ({n} rows)"))
                .collect();
            println!("keys: {}", list.join(", "));
        }
    }
    for (origin, value) in first {
        let value = clip_strings(value);
        let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
        println!("-- {origin}\n{text}");
    }
    println!();
    Ok(())
}

/// Longest string printed whole in a shown row.
const SHOWN_CHARS: usize = 1000;

/// `value` with strings longer than [`SHOWN_CHARS`] cut, saying how long they were.
fn clip_strings(value: Value) -> Value {
    match value {
        Value::String(s) if s.chars().count() > SHOWN_CHARS => {
            let head: String = s.chars().take(SHOWN_CHARS).collect();
            Value::String(format!("{head}... ({} chars in all)", s.chars().count()))
        }
        Value::Array(items) => Value::Array(items.into_iter().map(clip_strings).collect()),
        Value::Object(obj) => {
            Value::Object(obj.into_iter().map(|(k, v)| (k, clip_strings(v))).collect())
        }
        other => other,
    }
}
