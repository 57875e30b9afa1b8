//! `skyrl plugin inspect` and `skyrl env run` end to end on built plugins.

use std::path::PathBuf;
use std::process::Command;

fn plugin(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../artifacts/plugins/{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run scripts/build-plugins first",
        path.display()
    );
    path
}

fn skyrl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_skyrl"))
        .args(args)
        .env(
            "SKYRL_CACHE_DIR",
            std::env::temp_dir().join("skyrl-cli-test-cache"),
        )
        .output()
        .expect("running skyrl")
}

#[test]
fn inspect_prints_metadata_json() {
    let path = plugin("gsm8k");
    let out = skyrl(&["plugin", "inspect", path.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(meta["info"]["name"], "gsm8k");
    assert_eq!(meta["info"]["kind"], "environment");
    assert_eq!(meta["worlds"][0], "environment-plugin");
    assert_eq!(meta["digest"].as_str().unwrap().len(), 64);
}

#[test]
fn env_run_prints_each_step() {
    let path = plugin("gsm8k_multi_turn");
    let out = skyrl(&[
        "env",
        "run",
        "--plugin",
        path.to_str().unwrap(),
        "--prompt",
        "What is 2+3?",
        "--extras",
        r#"{"reward_spec":{"ground_truth":"5"},"max_turns":3}"#,
        "--action",
        "#### 4",
        "--action",
        "#### 5",
        "--action",
        "never reached",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len(),
        4,
        "init, two steps (done at the second), metrics"
    );
    assert_eq!(lines[0]["init"]["prompt"][0]["content"], "What is 2+3?");
    assert!((lines[1]["step"]["reward"].as_f64().unwrap() - 0.2 / 3.0).abs() < 1e-9);
    assert_eq!(lines[2]["step"]["reward"], 1.0);
    assert_eq!(lines[2]["step"]["done"], true);
}

#[test]
fn bad_inputs_fail_with_clear_errors() {
    let out = skyrl(&["plugin", "inspect", "/nonexistent/plugin.wasm"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));

    let path = plugin("gsm8k");
    let out = skyrl(&[
        "env",
        "run",
        "--plugin",
        path.to_str().unwrap(),
        "--prompt",
        "q",
        "--action",
        "a",
        "--extras",
        "[1]",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--extras must be a JSON object"));
}
