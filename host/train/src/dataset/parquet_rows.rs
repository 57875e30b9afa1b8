//! Parquet reading via the `parquet` crate's record API (no Arrow): every
//! record as JSON (nested `list<struct>` and `struct` columns as written by
//! pyarrow / `datasets.Dataset.to_parquet`), pages compressed with snappy,
//! zstd, gzip, lz4 (raw or framed), brotli or nothing.

use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result};
use parquet::file::reader::{FileReader, SerializedFileReader};

use super::RawRow;

fn open(path: &Path) -> Result<SerializedFileReader<File>> {
    let file =
        File::open(path).with_context(|| format!("cannot open dataset {}", path.display()))?;
    SerializedFileReader::new(file)
        .with_context(|| format!("{}: not a readable Parquet file", path.display()))
}

/// Hands every record of a Parquet file to `visit`, in order, stopping at the
/// first error `visit` returns. A record that cannot be decoded is handed over
/// as an error, and the rest of the file is not read.
pub fn visit_parquet(path: &Path, visit: &mut dyn FnMut(RawRow) -> Result<()>) -> Result<()> {
    let reader = open(path)?;
    let rows = reader
        .get_row_iter(None)
        .with_context(|| format!("{}: cannot iterate rows", path.display()))?;
    for (i, row) in rows.enumerate() {
        let origin = format!("{}#row{}", path.display(), i);
        match row {
            Ok(row) => visit(RawRow {
                value: Ok(row.to_json_value()),
                origin,
            })?,
            Err(e) => {
                let value = Err(anyhow::Error::new(e).context(format!(
                    "{origin}: cannot decode row (the rest of the file is not read)"
                )));
                return visit(RawRow { origin, value });
            }
        }
    }
    Ok(())
}

/// The file's Parquet schema, printed as a message type, and its row count.
pub fn parquet_schema(path: &Path) -> Result<(String, i64)> {
    let reader = open(path)?;
    let meta = reader.metadata().file_metadata();
    let mut out = Vec::new();
    parquet::schema::printer::print_schema(&mut out, meta.schema());
    Ok((String::from_utf8_lossy(&out).into_owned(), meta.num_rows()))
}
