//! Dataset loading (JSONL, Parquet) and the resumable epoch sampler.

use std::path::PathBuf;

use skyrl_train::dataset::{DataPosition, EpochSampler, PromptDataset};

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
