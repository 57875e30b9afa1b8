//! Parquet reading via the `parquet` crate's record API (no Arrow).

use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result};
use parquet::file::reader::{FileReader, SerializedFileReader};

use super::PromptRow;

/// Reads every row of a Parquet file as a [`PromptRow`].
pub fn load_parquet(path: &Path) -> Result<Vec<PromptRow>> {
    let file =
        File::open(path).with_context(|| format!("cannot open dataset {}", path.display()))?;
    let reader = SerializedFileReader::new(file)
        .with_context(|| format!("{}: not a readable Parquet file", path.display()))?;
    let mut rows = Vec::new();
    for (i, row) in reader
        .get_row_iter(None)
        .with_context(|| format!("{}: cannot iterate rows", path.display()))?
        .enumerate()
    {
        let origin = format!("{}#row{}", path.display(), i);
        let row = row.with_context(|| format!("{origin}: cannot decode row"))?;
        rows.push(PromptRow::from_json(row.to_json_value(), origin)?);
    }
    Ok(rows)
}
