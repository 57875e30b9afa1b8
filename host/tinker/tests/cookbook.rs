//! A tinker-cookbook recipe, unmodified, against the service: 0.5.8's
//! `math_rl` RL recipe on its synthetic arithmetic environment (no dataset
//! download), with only the base URL and the model changed (a local model
//! directory, whose tokenizer the cookbook loads itself, and the
//! `role_colon` renderer, which works with any tokenizer). scripts/setup
//! installs the cookbook into `.deps/cookbook-venv`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{server, tiny_model};
use serde_json::Value;

/// The cookbook venv's Python, or `$SKYRL_COOKBOOK_PYTHON`.
fn cookbook_python() -> PathBuf {
    let p = std::env::var_os("SKYRL_COOKBOOK_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/cookbook-venv/bin/python")
        });
    assert!(
        p.exists(),
        "the cookbook test needs tinker-cookbook (scripts/setup): set SKYRL_COOKBOOK_PYTHON (tried {})",
        p.display()
    );
    p
}

/// Every JSON line of a file.
fn json_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn cookbook_math_rl_recipe_runs_unmodified() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let data = dir.path().join("data");
    let url = server(&model, &data, None);
    let log = dir.path().join("log");
    let out = Command::new(cookbook_python())
        .args(["-m", "tinker_cookbook.recipes.math_rl.train"])
        .arg(format!("model_name={}", model.display()))
        .arg(format!("base_url={url}"))
        .arg(format!("log_path={}", log.display()))
        .args([
            "renderer_name=role_colon",
            "env=arithmetic",
            "group_size=4",
            "groups_per_batch=4",
            "max_tokens=5",
            "max_steps=3",
            "lora_rank=8",
            "learning_rate=1e-4",
            "eval_every=0",
            "save_every=2",
            "behavior_if_log_dir_exists=delete",
        ])
        .env("TINKER_API_KEY", "tml-local")
        .env("HF_HUB_OFFLINE", "1")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the recipe failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Three training steps logged, each with the environment's rewards.
    let metrics = json_lines(&log.join("metrics.jsonl"));
    let steps: Vec<i64> = metrics
        .iter()
        .filter_map(|m| m["progress/batch"].as_i64())
        .collect();
    assert_eq!(steps, [0, 1, 2], "{metrics:?}");
    for m in &metrics {
        let reward = m["env/all/reward/total"].as_f64();
        assert!(reward.is_some_and(f64::is_finite), "{m}");
    }
    // Its checkpoints (step 2 and final) were saved by this server: every
    // path it logged is a completed checkpoint on disk.
    let checkpoints = json_lines(&log.join("checkpoints.jsonl"));
    let names: Vec<&str> = checkpoints
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(names.contains(&"final"), "{checkpoints:?}");
    for c in &checkpoints {
        for key in ["state_path", "sampler_path"] {
            if let Some(path) = c[key].as_str() {
                let rest = path.strip_prefix("tinker://").expect("a tinker path");
                assert!(
                    data.join("checkpoints").join(rest).is_dir(),
                    "{key} {path} not on disk"
                );
            }
        }
    }
}
