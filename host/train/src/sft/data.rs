//! The SFT data sets: the rows of `dataset_name`'s split (files, globs,
//! folders or Hugging Face data sets, JSONL or Parquet), sliced as
//! `dataset_split` says, tokenised on `num_workers` threads (order kept) and
//! cached ([`super::cache`]).

use anyhow::{Context, Result};
use serde_json::{Map, Value};
use skyrl_model::Tokenizer;

use super::cache::{self, CacheKey};
use super::config::SftConfig;
use super::split::SplitSpec;
use super::tokenize::{tokenize_row, SftExample, TokenizeOptions};
use crate::dataset::{expand_home, visit_rows, DataSources};

/// One row and where it came from (`file:line`, `file#rowN`).
struct Row {
    origin: String,
    value: Map<String, Value>,
}

/// The tokenised examples of split `split` of `name` (rows that tokenise to
/// nothing are skipped, as in 0.3.0). `model` names the tokenizer's model in
/// the cache key.
pub fn load_examples(
    cfg: &SftConfig,
    name: &str,
    split: &str,
    tokenizer: &Tokenizer,
    model: &str,
) -> Result<Vec<SftExample>> {
    let spec = SplitSpec::parse(split).map_err(anyhow::Error::msg)?;
    let files = DataSources::from_env()
        .expand_split(name, &spec.name)
        .with_context(|| format!("data set `{name}` split `{split}`"))?;
    let key = CacheKey {
        dataset: name,
        split,
        model,
        max_length: cfg.max_length,
        messages_key: &cfg.messages_key,
        train_on_what: cfg.train_on_what.name(),
        tools_key: cfg.tools_column(),
        system_key: cfg.system_column(),
        files: &files,
    };
    let cache_path = match cfg.disable_cache {
        true => None,
        false => Some(key.path(&expand_home(&cfg.cache_dir))?),
    };
    if let (Some(p), false) = (&cache_path, cfg.force_recache) {
        if let Some(examples) = cache::load(p) {
            tracing::info!(path = %p.display(), n = examples.len(), "tokenised data set from the cache");
            return Ok(examples);
        }
    }
    let mut rows = Vec::new();
    for f in &files {
        visit_rows(f, &mut |raw| {
            let value = raw.value?;
            let Value::Object(value) = value else {
                anyhow::bail!("{}: a row must be a JSON object", raw.origin);
            };
            rows.push(Row {
                origin: raw.origin,
                value,
            });
            Ok(())
        })?;
    }
    let range = spec.rows(rows.len());
    let rows = &rows[range];
    let options = TokenizeOptions {
        max_length: cfg.max_length,
        messages_key: &cfg.messages_key,
        train_on_what: cfg.train_on_what,
        tools_key: cfg.tools_column(),
        system_key: cfg.system_column(),
    };
    let examples = tokenize_all(rows, tokenizer, &options, cfg.num_workers)?;
    tracing::info!(
        "data set `{name}` split `{split}`: tokenised {} examples (filtered from {})",
        examples.len(),
        rows.len()
    );
    if let Some(p) = &cache_path {
        cache::save(p, &examples)?;
    }
    Ok(examples)
}

/// Tokenises `rows` in order on `workers` threads (0 or 1: this thread).
fn tokenize_all(
    rows: &[Row],
    tokenizer: &Tokenizer,
    options: &TokenizeOptions,
    workers: usize,
) -> Result<Vec<SftExample>> {
    let one =
        |r: &Row| tokenize_row(&r.value, tokenizer, options).with_context(|| r.origin.clone());
    let chunks: Vec<Result<Vec<Option<SftExample>>>> = match workers {
        0 | 1 => vec![rows.iter().map(one).collect()],
        n => {
            let size = rows.len().div_ceil(n).max(1);
            std::thread::scope(|s| {
                let handles: Vec<_> = rows
                    .chunks(size)
                    .map(|c| s.spawn(move || c.iter().map(one).collect()))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a tokenising thread panicked"))
                    .collect()
            })
        }
    };
    let mut out = Vec::with_capacity(rows.len());
    for c in chunks {
        out.extend(c?.into_iter().flatten());
    }
    Ok(out)
}
