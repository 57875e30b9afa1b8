//! The retrieval corpus: JSON lines, one passage per line, each an object
//! with a string `contents` (Search-R1's wiki-18 format: `"Title"\ntext`)
//! and usually an `id`. Every field of a line is kept as written and returned
//! with the passage.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Why a corpus could not be loaded; each names the file (and line).
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// The file could not be opened or read.
    #[error("cannot read corpus {path}")]
    Io {
        /// The corpus file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line is not a JSON object.
    #[error("{path}:{line}: not a JSON object: {message}")]
    Malformed {
        /// The corpus file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What the JSON parser said.
        message: String,
    },
    /// A line has no string `contents`.
    #[error("{path}:{line}: the passage has no string field `contents`")]
    MissingContents {
        /// The corpus file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
    },
    /// The file holds no passages.
    #[error("{path}: the corpus has no passages")]
    Empty {
        /// The corpus file.
        path: PathBuf,
    },
}

/// One corpus line.
#[derive(Debug, Clone)]
pub struct Passage {
    /// The line as written (every field), returned as the `document`.
    pub raw: Box<RawValue>,
    /// Its `contents`, the text that is indexed.
    pub contents: String,
}

/// Reads every passage of the JSONL file at `path` (blank lines skipped).
pub fn load(path: &Path) -> Result<Vec<Passage>, CorpusError> {
    let file = File::open(path).map_err(|source| CorpusError::Io {
        path: path.to_owned(),
        source,
    })?;
    read(BufReader::new(file), path)
}

/// Reads passages from `reader`; `path` names it in errors.
pub fn read(reader: impl BufRead, path: &Path) -> Result<Vec<Passage>, CorpusError> {
    let mut passages = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| CorpusError::Io {
            path: path.to_owned(),
            source,
        })?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        passages.push(parse_line(text, path, i + 1)?);
    }
    if passages.is_empty() {
        return Err(CorpusError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(passages)
}

/// One non-blank line as a passage.
fn parse_line(text: &str, path: &Path, line: usize) -> Result<Passage, CorpusError> {
    let malformed = |e: serde_json::Error| CorpusError::Malformed {
        path: path.to_owned(),
        line,
        message: e.to_string(),
    };
    let mut fields: Map<String, Value> = serde_json::from_str(text).map_err(malformed)?;
    let Some(Value::String(contents)) = fields.remove("contents") else {
        return Err(CorpusError::MissingContents {
            path: path.to_owned(),
            line,
        });
    };
    let raw = RawValue::from_string(text.to_owned()).map_err(malformed)?;
    Ok(Passage { raw, contents })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Passage>, CorpusError> {
        read(text.as_bytes(), Path::new("corpus.jsonl"))
    }

    #[test]
    fn keeps_every_field_and_skips_blank_lines() {
        let passages = parse(
            "{\"id\": \"0\", \"contents\": \"\\\"Paris\\\"\\nCapital.\", \"extra\": 1}\n\n  \n{\"id\": \"1\", \"contents\": \"b\"}\n",
        )
        .unwrap();
        assert_eq!(passages.len(), 2);
        assert_eq!(passages[0].contents, "\"Paris\"\nCapital.");
        let doc: Value = serde_json::from_str(passages[0].raw.get()).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({"id": "0", "contents": "\"Paris\"\nCapital.", "extra": 1})
        );
    }

    #[test]
    fn malformed_line_names_file_and_line() {
        let err = parse("{\"id\": \"0\", \"contents\": \"a\"}\n{\"id\": 1,\n").unwrap_err();
        assert!(
            matches!(err, CorpusError::Malformed { line: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().starts_with("corpus.jsonl:2: "), "{err}");
        let err = parse("[1, 2]\n").unwrap_err();
        assert!(
            matches!(err, CorpusError::Malformed { line: 1, .. }),
            "{err}"
        );
    }

    #[test]
    fn missing_or_non_string_contents_is_an_error() {
        let err = parse("{\"id\": \"0\", \"contents\": \"a\"}\n{\"id\": \"1\"}\n").unwrap_err();
        assert!(
            matches!(err, CorpusError::MissingContents { line: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("`contents`"), "{err}");
        let err = parse("{\"id\": \"0\", \"contents\": 7}\n").unwrap_err();
        assert!(matches!(err, CorpusError::MissingContents { line: 1, .. }));
    }

    #[test]
    fn empty_corpus_is_an_error() {
        let err = parse("\n   \n").unwrap_err();
        assert!(matches!(err, CorpusError::Empty { .. }));
        assert_eq!(err.to_string(), "corpus.jsonl: the corpus has no passages");
    }

    #[test]
    fn missing_file_is_an_io_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.jsonl");
        let err = load(&path).unwrap_err();
        assert!(matches!(err, CorpusError::Io { .. }));
        assert!(err.to_string().contains("nope.jsonl"), "{err}");
    }
}
