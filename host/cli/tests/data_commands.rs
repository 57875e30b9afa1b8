//! `skyrl data inspect` through the binary: schema, row count and first rows of
//! good files; every row that would fail to load, with a non-zero exit.

mod common;

use common::{repo, skyrl, text};

#[test]
fn inspect_prints_schema_count_and_first_rows_of_a_parquet_file() {
    let file = repo().join("host/train/tests/fixtures/gsm8k_sample.parquet");
    let out = skyrl(&["data", "inspect", "--rows", "2", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let t = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(t.contains("gsm8k_sample.parquet (parquet, 3 rows)"), "{t}");
    // The Parquet schema, nested columns included.
    for column in [
        "prompt",
        "role",
        "content",
        "reward_spec",
        "ground_truth",
        "extra_info",
    ] {
        assert!(t.contains(column), "schema lacks {column}: {t}");
    }
    assert!(
        t.contains("#row0") && t.contains("#row1") && !t.contains("#row2"),
        "{t}"
    );
    assert!(t.contains("\"ground_truth\": \"72\""), "{t}");
    assert!(t.contains("3 rows in 1 files, 0 would fail to load"), "{t}");
}

#[test]
fn inspect_names_every_row_that_would_fail_and_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let good = r#"{"prompt": [{"role": "user", "content": "hi"}], "env_class": "echo"}"#;
    let file = dir.path().join("mixed.jsonl");
    std::fs::write(
        &file,
        format!("{good}\n{{\"env_class\": \"echo\"}}\n{good}\nnot json\n{{\"prompt\": []}}\n"),
    )
    .unwrap();
    let out = skyrl(&["data", "inspect", file.to_str().unwrap()]);
    assert!(!out.status.success(), "{}", text(&out));
    let t = text(&out);
    let f = file.display();
    assert!(t.contains("mixed.jsonl (jsonl, 5 rows)"), "{t}");
    assert!(
        t.contains("keys: env_class (3 rows), prompt (3 rows)"),
        "{t}"
    );
    assert!(
        t.contains(&format!("FAIL {f}:2: missing column `prompt`")),
        "{t}"
    );
    assert!(t.contains(&format!("FAIL {f}:4: invalid JSON")), "{t}");
    assert!(t.contains(&format!("FAIL {f}:5: bad `prompt`")), "{t}");
    assert!(
        !t.contains(&format!("{f}:1:")) && !t.contains(&format!("{f}:3:")),
        "{t}"
    );
    assert!(t.contains("5 rows in 1 files, 3 would fail to load"), "{t}");

    // A file or pattern that cannot be read at all is reported too.
    let pattern = format!("{}/*.parquet", dir.path().display());
    let out = skyrl(&["data", "inspect", &pattern]);
    assert!(!out.status.success());
    assert!(text(&out).contains("matches no file"), "{}", text(&out));
}
