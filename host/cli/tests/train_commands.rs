//! `skyrl train` and `skyrl model init` end to end through the binary.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_fails_with, skyrl, text};

fn plugin(name: &str) -> PathBuf {
    PathBuf::from(common::plugin(name))
}

/// Overrides shrinking configs/demo.yaml to a couple of tiny steps under `dir`.
fn tiny(dir: &Path) -> Vec<String> {
    vec![
        format!("trainer.ckpt_path={}", dir.join("ckpts").display()),
        format!("trainer.export_path={}", dir.join("exports").display()),
        format!("trainer.log_path={}", dir.join("logs").display()),
        "trainer.train_batch_size=4".into(),
        "trainer.policy_mini_batch_size=4".into(),
        "trainer.micro_train_batch_size_per_gpu=8".into(),
        "trainer.eval_interval=2".into(),
        "trainer.eval_before_train=false".into(),
        "trainer.ckpt_interval=2".into(),
        "generator.n_samples_per_prompt=2".into(),
    ]
}

#[test]
fn train_runs_two_steps_with_plugin_mapping_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let wasm = plugin("string_transform");
    let mapping = format!("string_transform={}", wasm.display());
    let mut args = vec![
        "train",
        "--quiet",
        "--plugin",
        &mapping,
        "--config",
        "configs/demo.yaml",
        "--max-steps",
        "2",
    ];
    let overrides = tiny(dir.path());
    args.extend(overrides.iter().map(String::as_str));
    let out = skyrl(&args);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("trained steps 0..2"), "{}", text(&out));
    let metrics = std::fs::read_to_string(dir.path().join("logs/metrics.jsonl")).unwrap();
    assert_eq!(metrics.lines().count(), 2);
    for line in metrics.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["reward/mean"].as_f64().unwrap().is_finite());
        assert!(v["loss"].as_f64().unwrap().is_finite());
    }
    assert!(dir
        .path()
        .join("ckpts/global_step_2/model.safetensors")
        .is_file());
    assert!(dir.path().join("logs/reward_curve.png").is_file());
    // The tiny model was initialised in the run's export dir.
    assert!(dir.path().join("exports/init_model/config.json").is_file());

    // --resume continues at step 2 (plain path form of --plugin).
    let mut args = vec![
        "train",
        "--quiet",
        "--plugin",
        wasm.to_str().unwrap(),
        "--config",
        "configs/demo.yaml",
        "--max-steps",
        "1",
        "--resume",
    ];
    args.extend(overrides.iter().map(String::as_str));
    let out = skyrl(&args);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("trained steps 2..3"), "{}", text(&out));
}

#[test]
fn unknown_config_key_is_a_clear_error() {
    let out = skyrl(&[
        "train",
        "--plugin",
        plugin("string_transform").to_str().unwrap(),
        "--config",
        "configs/demo.yaml",
        "generator.sampling_params.temprature=0.5",
    ]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(t.contains("generator.sampling_params.temprature"), "{t}");
    assert!(t.contains("unknown field"), "{t}");
}

#[test]
fn missing_plugin_names_the_build_script() {
    let out = skyrl(&[
        "train",
        "--plugin",
        "string_transform=/nonexistent/x.wasm",
        "--config",
        "configs/demo.yaml",
    ]);
    assert_fails_with(&out, "scripts/build-plugins");
}

#[test]
fn model_init_writes_a_loadable_model() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("tiny");
    let out = skyrl(&[
        "model",
        "init",
        "--arch",
        "qwen2",
        "--size",
        "tiny",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(out_dir.join(f).is_file(), "{f} missing");
    }
    // And training can start from it via trainer.policy.model.path.
    let run = tempfile::tempdir().unwrap();
    let mut args = vec![
        "train".to_string(),
        "--quiet".into(),
        "--plugin".into(),
        plugin("string_transform").display().to_string(),
        "--config".into(),
        "configs/demo.yaml".into(),
        "--max-steps".into(),
        "1".into(),
        "trainer.policy.model.init=".into(),
        format!("trainer.policy.model.path={}", out_dir.display()),
    ];
    args.extend(tiny(run.path()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = skyrl(&refs);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!run.path().join("exports/init_model").exists());
}

/// `skyrl train` of one step on the demo config with string_transform,
/// `extra` arguments (flags and overrides) and the tiny overrides under `dir`.
fn one_step_args(dir: &Path, extra: &[&str]) -> Vec<String> {
    let env = format!("string_transform={}", plugin("string_transform").display());
    let mut args: Vec<String> = ["train", "--quiet", "--plugin", &env]
        .iter()
        .chain(extra)
        .chain(&["--config", "configs/demo.yaml", "--max-steps", "1"])
        .map(|s| s.to_string())
        .collect();
    args.extend(tiny(dir));
    args
}

#[test]
fn reward_rubric_plugins_are_composed_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let reward = format!("format={}", plugin("format_reward").display());
    let args = one_step_args(
        dir.path(),
        &[
            "--reward",
            &reward,
            "environment.reward_rubric.env_weight=1.0",
            "environment.reward_rubric.components=[{name: format, weight: 0.5}]",
        ],
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = skyrl(&refs);
    assert!(out.status.success(), "{}", text(&out));
    let metrics = std::fs::read_to_string(dir.path().join("logs/metrics.jsonl")).unwrap();
    let m: serde_json::Value = serde_json::from_str(metrics.lines().next().unwrap()).unwrap();
    let (total, env, fmt) = (
        m["reward/mean"].as_f64().unwrap(),
        m["reward/env"].as_f64().unwrap(),
        m["reward/format"].as_f64().unwrap(),
    );
    assert!((total - (env + 0.5 * fmt)).abs() < 1e-5, "{m}");

    // A rubric naming a reward that was not passed is a clear error.
    let mut bad: Vec<&str> = refs.clone();
    bad.retain(|a| !a.starts_with("format=") && *a != "--reward");
    let out = skyrl(&bad);
    assert_fails_with(&out, "--reward format=PATH");
}

#[test]
fn a_generator_plugin_drives_the_rollouts() {
    let dir = tempfile::tempdir().unwrap();
    let generator = plugin("best_of_n").display().to_string();
    let args = one_step_args(
        dir.path(),
        &[
            "--generator",
            &generator,
            "generator.custom_generator.config={n: 3}",
        ],
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = skyrl(&refs);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("trained steps 0..1"), "{}", text(&out));

    // An env plugin passed as --generator is refused with a clear message.
    let mut bad = refs.clone();
    let wrong = plugin("gsm8k").display().to_string();
    let at = bad.iter().position(|a| *a == generator).unwrap();
    bad[at] = &wrong;
    let out = skyrl(&bad);
    assert_fails_with(&out, "not a generator");
}

#[test]
fn eval_scores_a_checkpoint_without_the_training_data() {
    let dir = tempfile::tempdir().unwrap();
    let mapping = format!("string_transform={}", plugin("string_transform").display());
    let overrides = tiny(dir.path());
    let mut args = vec![
        "train",
        "--quiet",
        "--plugin",
        &mapping,
        "--config",
        "configs/demo.yaml",
        "--max-steps",
        "1",
    ];
    args.extend(overrides.iter().map(String::as_str));
    let out = skyrl(&args);
    assert!(out.status.success(), "{}", text(&out));
    let ckpt = dir.path().join("ckpts/global_step_1");
    let ckpt_arg = ckpt.display().to_string();
    let mut eval = vec![
        "eval",
        "--quiet",
        "--plugin",
        &mapping,
        "--config",
        "configs/demo.yaml",
    ];
    eval.extend([
        "--checkpoint",
        &ckpt_arg,
        "data.train_data=[/no/such/train.jsonl]",
    ]);
    eval.extend(overrides.iter().map(String::as_str));
    let out = skyrl(&eval);
    assert!(out.status.success(), "{}", text(&out));
    let m: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let mean = m["eval/reward_mean"].as_f64().unwrap();
    assert!(
        (m["eval/all/avg_score"].as_f64().unwrap() - mean).abs() < 1e-12,
        "{m}"
    );
    assert!(m["eval/all/pass_at_1"].as_f64().is_some(), "{m}");
    let agg = dir
        .path()
        .join("exports/dumped_evals/eval_only/aggregated_results.jsonl");
    assert!(agg.is_file(), "{}", agg.display());

    let bad = dir.path().display().to_string();
    let mut eval = vec![
        "eval",
        "--quiet",
        "--plugin",
        &mapping,
        "--config",
        "configs/demo.yaml",
    ];
    eval.extend(["--checkpoint", bad.as_str()]);
    assert_fails_with(&skyrl(&eval), "not a checkpoint directory");
}

#[test]
fn algorithm_plugins_are_selected_by_name_and_misuse_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let algorithm = format!("rs={}", plugin("ppo_algorithms").display());
    let select = [
        "trainer.algorithm.advantage_estimator=plugin:rs",
        "trainer.algorithm.policy_loss_type=plugin:rs",
    ];
    let args = one_step_args(
        dir.path(),
        &[&["--algorithm", &algorithm][..], &select].concat(),
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = skyrl(&refs);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("trained steps 0..1"), "{}", text(&out));

    // A name no --algorithm provides lists what is available.
    let mut unknown = refs.clone();
    let at = unknown
        .iter()
        .position(|a| a.ends_with("policy_loss_type=plugin:rs"))
        .unwrap();
    unknown[at] = "trainer.algorithm.policy_loss_type=plugin:nope";
    assert_fails_with(&skyrl(&unknown), "unknown policy loss 'plugin:nope'");
    // --algorithm needs NAME=SOURCE.
    let mut unnamed = refs.clone();
    let bare = plugin("ppo_algorithms").display().to_string();
    let at = unnamed.iter().position(|a| *a == algorithm).unwrap();
    unnamed[at] = &bare;
    assert_fails_with(&skyrl(&unnamed), "must be NAME=SOURCE");
    // An environment plugin is not an algorithm.
    let mut wrong = refs.clone();
    let env = format!("rs={}", plugin("gsm8k").display());
    wrong[at] = &env;
    assert_fails_with(
        &skyrl(&wrong),
        "implements neither advantage-plugin nor policy-loss-plugin",
    );
    // Off-policy correction is the plugin's business, not the host's.
    let mut corrected = refs.clone();
    corrected.extend([
        "generator.sampling_params.logprobs=1",
        "trainer.algorithm.off_policy_correction.tis_ratio_type=token",
    ]);
    assert_fails_with(
        &skyrl(&corrected),
        "trainer.algorithm.off_policy_correction",
    );
}
