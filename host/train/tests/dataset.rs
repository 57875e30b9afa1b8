//! Dataset loading (JSONL, Parquet; files, globs, directories, Hugging Face
//! data sets in a fake hub cache) and the resumable epoch sampler.

use std::path::{Path, PathBuf};

use skyrl_train::dataset::{DataPosition, DataSources, EpochSampler, PromptDataset};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn parquet_rows_follow_skyrl_schema() {
    let ds = PromptDataset::load(&[fixture("gsm8k_sample.parquet")]).unwrap();
    assert_eq!(ds.len(), 3);
    let r = &ds.rows[0];
    assert_eq!(r.prompt.len(), 2);
    assert_eq!(r.prompt[0].role, "system");
    assert!(r.prompt[1].content.starts_with("Natalia"));
    assert_eq!(r.env_class.as_deref(), Some("gsm8k"));
    assert_eq!(r.ground_truth().and_then(|v| v.as_str()), Some("72"));
    assert_eq!(r.data_source(), Some("openai/gsm8k"));
    assert_eq!(r.extras["extra_info"]["index"], serde_json::json!(0));
    assert!(!r.extras.contains_key("prompt") && !r.extras.contains_key("env_class"));
    assert_eq!(
        ds.rows[2].env_class, None,
        "a null env_class falls back to the config"
    );
    assert!(r.origin.ends_with("#row0"));
}

#[test]
fn jsonl_rows_and_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jsonl");
    std::fs::write(
        &good,
        r#"{"prompt": [{"role": "user", "content": "hi"}], "env_class": "echo", "reward_spec": {"ground_truth": "hi"}, "db_id": "x"}

{"prompt": [{"role": "user", "content": "yo"}]}
"#,
    )
    .unwrap();
    let ds = PromptDataset::load(&[good.display().to_string()]).unwrap();
    assert_eq!(ds.len(), 2);
    assert_eq!(ds.rows[0].extras["db_id"], "x");
    assert_eq!(ds.rows[1].origin, format!("{}:3", good.display()));

    let cases = [
        ("not json", "invalid JSON"),
        (r#"{"env_class": "x"}"#, "missing column `prompt`"),
        (r#"{"prompt": "hello"}"#, "bad `prompt`"),
        (r#"{"prompt": [{"role": "user"}]}"#, "bad `prompt`"),
        (r#"{"prompt": []}"#, "bad `prompt`"),
        (
            r#"{"prompt": [{"role": "user", "content": "a"}], "env_class": 3}"#,
            "`env_class` must be a string",
        ),
        ("[1, 2]", "must be a JSON object"),
    ];
    for (i, (line, want)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("bad{i}.jsonl"));
        std::fs::write(
            &p,
            format!("{{\"prompt\": [{{\"role\": \"user\", \"content\": \"ok\"}}]}}\n{line}\n"),
        )
        .unwrap();
        let err = format!(
            "{:#}",
            PromptDataset::load(&[p.display().to_string()]).unwrap_err()
        );
        assert!(err.contains(&format!("bad{i}.jsonl:2")), "{err}");
        assert!(err.contains(want), "`{line}` -> {err}");
    }
    let err = PromptDataset::load(&["data.csv".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown dataset format"), "{err}");
    let err = format!(
        "{:#}",
        PromptDataset::load(&[dir.path().join("missing.jsonl").display().to_string()]).unwrap_err()
    );
    assert!(err.contains("missing.jsonl"), "{err}");
}

#[test]
fn sampler_is_deterministic_resumable_and_drops_last() {
    let mut a = EpochSampler::new(10, 3, 42, 2, true).unwrap();
    assert_eq!(a.batches_per_epoch(), 3);
    assert_eq!(a.total_batches(), 6);
    let all: Vec<_> = std::iter::from_fn(|| a.next_batch()).collect();
    assert_eq!(all.len(), 6);
    assert_eq!(all[3].0, DataPosition { epoch: 1, batch: 0 });
    // each epoch draws distinct rows; epochs differ in order
    let e0: Vec<usize> = all[..3].iter().flat_map(|b| b.1.clone()).collect();
    let mut sorted = e0.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 9);
    let e1: Vec<usize> = all[3..].iter().flat_map(|b| b.1.clone()).collect();
    assert_ne!(e0, e1);
    // same seed, same batches; resuming from a position continues identically
    let mut b = EpochSampler::new(10, 3, 42, 2, true).unwrap();
    b.restore(all[4].0).unwrap();
    assert_eq!(b.next_batch().unwrap(), all[4]);
    assert_eq!(b.next_batch().unwrap(), all[5]);
    assert!(b.next_batch().is_none());
    // a different seed gives a different order; no shuffle keeps file order
    let mut c = EpochSampler::new(10, 3, 7, 1, true).unwrap();
    assert_ne!(c.next_batch().unwrap().1, all[0].1);
    let mut d = EpochSampler::new(10, 3, 7, 1, false).unwrap();
    assert_eq!(d.next_batch().unwrap().1, vec![0, 1, 2]);
    assert!(EpochSampler::new(2, 3, 0, 1, true).is_err());
    assert!(b.restore(DataPosition { epoch: 9, batch: 0 }).is_err());
}

/// Puts `files` (path inside the repo, content) into a fake Hugging Face
/// cache as `huggingface-cli download` lays it out: blobs, a snapshot of
/// links to them, and `refs/<refname>` naming the snapshot.
fn fake_hub_dataset(
    cache: &Path,
    repo: &str,
    refname: &str,
    commit: &str,
    files: &[(&str, &[u8])],
) {
    let root = cache.join(format!("datasets--{}", repo.replace('/', "--")));
    std::fs::create_dir_all(root.join("blobs")).unwrap();
    std::fs::create_dir_all(root.join("refs")).unwrap();
    std::fs::write(root.join("refs").join(refname), commit).unwrap();
    for (i, (rel, content)) in files.iter().enumerate() {
        let blob = root.join("blobs").join(format!("{commit}{i}"));
        std::fs::write(&blob, content).unwrap();
        let link = root.join("snapshots").join(commit).join(rel);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&blob, &link).unwrap();
    }
}

fn origins(ds: &PromptDataset) -> Vec<String> {
    ds.rows.iter().map(|r| r.origin.clone()).collect()
}

#[test]
fn globs_and_directories_expand_to_sorted_data_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let line =
        |c: &str| format!("{{\"prompt\": [{{\"role\": \"user\", \"content\": \"{c}\"}}]}}\n");
    std::fs::write(d.join("b.jsonl"), line("b")).unwrap();
    std::fs::write(d.join("a.jsonl"), line("a")).unwrap();
    std::fs::copy(fixture("gsm8k_sample.parquet"), d.join("c.parquet")).unwrap();
    std::fs::write(d.join("notes.txt"), "not data").unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/z.jsonl"), line("z")).unwrap();

    let ds = PromptDataset::load(&[d.display().to_string()]).unwrap();
    assert_eq!(ds.len(), 5, "{:?}", origins(&ds));
    assert_eq!(ds.rows[0].prompt[0].content, "a");
    assert_eq!(ds.rows[1].prompt[0].content, "b");
    assert!(ds.rows[2].origin.ends_with("c.parquet#row0"));

    let ds = PromptDataset::load(&[format!("{}/*.jsonl", d.display())]).unwrap();
    assert_eq!(ds.len(), 2);
    assert_eq!(ds.rows[1].prompt[0].content, "b");
    let ds = PromptDataset::load(&[format!("{}/s*", d.display())]).unwrap();
    assert_eq!(
        ds.rows[0].prompt[0].content, "z",
        "a matched folder gives its files"
    );

    let pattern = format!("{}/nothing*.parquet", d.display());
    let err = format!(
        "{:#}",
        PromptDataset::load(std::slice::from_ref(&pattern)).unwrap_err()
    );
    assert!(
        err.contains(&pattern) && err.contains("matches no file"),
        "{err}"
    );
    let empty = d.join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = format!(
        "{:#}",
        PromptDataset::load(&[empty.display().to_string()]).unwrap_err()
    );
    assert!(err.contains("no .parquet or .jsonl file"), "{err}");
}

#[test]
fn hub_datasets_resolve_in_the_cache_by_split() {
    let cache = tempfile::tempdir().unwrap();
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let parquet = std::fs::read(fixture("gsm8k_sample.parquet")).unwrap();
    let jsonl = b"{\"prompt\": [{\"role\": \"user\", \"content\": \"t\"}]}\n";
    fake_hub_dataset(
        cache.path(),
        "org/math",
        "main",
        commit,
        &[
            ("data/train-00000-of-00001.parquet", parquet.as_slice()),
            ("data/test-00000-of-00001.jsonl", jsonl.as_slice()),
            ("README.md", b"# card".as_slice()),
            ("dataset_infos.json", b"{}".as_slice()),
        ],
    );
    std::fs::write(cache.path().join("datasets--org--math/refs/v1"), commit).unwrap();
    let sources = DataSources::with_hub_cache(cache.path());
    let load = |entry: &str| PromptDataset::load_from(&sources, &[entry.to_string()]);

    let by_commit = format!("org/math@{commit}:train");
    for entry in [
        "hf://datasets/org/math:train",
        "org/math:train",
        "hf://datasets/org/math@v1/data:train",
        by_commit.as_str(),
    ] {
        let ds = load(entry).unwrap_or_else(|e| panic!("{entry}: {e:#}"));
        assert_eq!(ds.len(), 3, "{entry}");
        assert_eq!(
            ds.rows[0].ground_truth().and_then(|v| v.as_str()),
            Some("72")
        );
        assert!(ds.rows[0].origin.contains(commit), "{}", ds.rows[0].origin);
    }
    let ds = load("org/math:test").unwrap();
    assert_eq!(ds.rows[0].prompt[0].content, "t");
    let ds = load("hf://datasets/org/math/data/test-00000-of-00001.jsonl").unwrap();
    assert_eq!(ds.len(), 1, "a file inside the data set");

    let err = format!("{:#}", load("org/math").unwrap_err());
    assert!(
        err.contains("splits train, test") && err.contains("`org/math:train`"),
        "{err}"
    );
    let err = format!("{:#}", load("org/math:validation").unwrap_err());
    assert!(err.contains("no file of split `validation`"), "{err}");
    assert!(err.contains("data/train-00000-of-00001.parquet"), "{err}");

    let err = format!("{:#}", load("org/missing:train").unwrap_err());
    assert!(err.contains(&cache.path().display().to_string()), "{err}");
    assert!(err.contains("datasets--org--missing"), "{err}");
    assert!(
        err.contains("huggingface-cli download --repo-type dataset org/missing"),
        "{err}"
    );
    let err = format!("{:#}", load("org/math@v2:train").unwrap_err());
    assert!(err.contains("refs/v2"), "{err}");
}
