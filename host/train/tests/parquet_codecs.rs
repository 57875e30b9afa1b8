//! SkyRL-style rows written by pyarrow (as `datasets.Dataset.to_parquet` does)
//! load identically with every Parquet codec. Needs the test Python with
//! pyarrow (`$SKYRL_PYTHON`, else the project venv); fails, not skips, without it.

mod common;

use std::fs::File;
use std::process::Command;

use parquet::basic::Compression;
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::Value;
use skyrl_train::dataset::{PromptDataset, PromptRow};

/// Asserts the test Python imports pyarrow, naming the fix when it does not.
fn require_pyarrow() {
    let python = common::python();
    let out = Command::new(&python)
        .args(["-c", "import pyarrow"])
        .output()
        .expect("cannot start the test Python");
    assert!(
        out.status.success(),
        "{} cannot import pyarrow (scripts/setup installs it with the Python reference \
         packages, PY_REF_PACKAGES; or set SKYRL_PYTHON to a Python that has it):\n{}",
        python.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The codec of every column chunk of the file.
fn codecs(path: &std::path::Path) -> Vec<Compression> {
    let reader = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    let meta = reader.metadata();
    (0..meta.num_row_groups())
        .flat_map(|g| {
            let rg = meta.row_group(g);
            (0..rg.num_columns())
                .map(|c| rg.column(c).compression())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn skyrl_rows_written_by_pyarrow_load_with_every_codec() {
    require_pyarrow();
    let dir = tempfile::tempdir().unwrap();
    common::run_python("skyrl_parquet.py", &[dir.path()]);
    let expected: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("rows.json")).unwrap())
            .unwrap();
    assert_eq!(expected.len(), 7);
    let expected: Vec<PromptRow> = expected
        .into_iter()
        .enumerate()
        .map(|(i, v)| PromptRow::from_json(v, format!("rows.json#{i}")).unwrap())
        .collect();

    for (name, want_codec) in [
        ("snappy", "SNAPPY"),
        ("zstd", "ZSTD"),
        ("gzip", "GZIP"),
        ("lz4", "LZ4"),
        ("brotli", "BROTLI"),
        ("none", "UNCOMPRESSED"),
        ("zstd_v2", "ZSTD"),
    ] {
        let path = dir.path().join(format!("{name}.parquet"));
        for c in codecs(&path) {
            // pyarrow's `lz4` is LZ4_RAW in the file.
            let got = format!("{c:?}");
            assert!(got.starts_with(want_codec), "{name}: column codec {got}");
        }
        let ds = PromptDataset::load(&[path.display().to_string()])
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert_eq!(ds.len(), expected.len(), "{name}");
        for (i, (got, want)) in ds.rows.iter().zip(&expected).enumerate() {
            assert_eq!(got.prompt, want.prompt, "{name} row {i}: prompt");
            assert_eq!(got.env_class, want.env_class, "{name} row {i}: env_class");
            assert_eq!(got.extras, want.extras, "{name} row {i}: other columns");
            assert_eq!(got.origin, format!("{}#row{i}", path.display()));
        }
    }

    // Spot checks that the comparison saw the SkyRL schema.
    let r = &expected[0];
    assert_eq!(r.prompt[0].role, "system");
    assert!(r.prompt[0].content.contains("数学"));
    assert_eq!(r.data_source(), Some("openai/gsm8k"));
    assert_eq!(r.ground_truth(), Some(&Value::from("72")));
    assert_eq!(r.extras["extra_info"]["index"], Value::from(0));
    assert_eq!(r.extras["extra_info"]["verified"], Value::from(true));
    assert_eq!(r.extras["reward_spec"]["method"], Value::from("rule"));
    assert_eq!(expected[2].env_class, None);
    assert_eq!(expected[4].prompt[1].content.len(), 300_000);
    assert_eq!(expected[4].prompt[2].content, "");
}
