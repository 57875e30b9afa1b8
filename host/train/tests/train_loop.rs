//! End-to-end training loop on the string_transform plugin with a tiny model:
//! finite metrics, checkpoints written, and resume reproducing the next step.
//!
//! Needs `artifacts/plugins/string_transform.wasm` (run `scripts/build-plugins`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::json;
use skyrl_rollout::PluginSet;
use skyrl_runtime::{Plugin, PluginEngine};
use skyrl_train::config::{load_config_str, SkyrlConfig};
use skyrl_train::metrics::StepMetrics;
use skyrl_train::trainer::{RunSummary, TrainOptions, Trainer};
use tch::Tensor;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn envs() -> PluginSet {
    let wasm = repo().join("artifacts/plugins/string_transform.wasm");
    assert!(
        wasm.is_file(),
        "{} is missing: build the plugins first with scripts/build-plugins",
        wasm.display()
    );
    let engine = PluginEngine::shared().expect("plugin engine");
    let plugin = Plugin::load(&engine, &wasm).expect("load string_transform.wasm");
    let mut envs = PluginSet::default();
    envs.insert("string_transform", plugin, json!({}));
    envs
}

/// A very small run rooted at `dir` (tiny model, 4 prompts x 4 samples per step).
fn config(dir: &Path, extra: &[&str]) -> SkyrlConfig {
    let data = repo().join("envs/string_transform/data");
    let mut overrides: Vec<String> = vec![
        format!("data.train_data=['{}']", data.join("train.jsonl").display()),
        format!("data.val_data=['{}']", data.join("val.jsonl").display()),
        format!("trainer.ckpt_path={}", dir.join("ckpts").display()),
        format!("trainer.export_path={}", dir.join("exports").display()),
        format!("trainer.log_path={}", dir.join("logs").display()),
        "trainer.train_batch_size=4".into(),
        "trainer.policy_mini_batch_size=2".into(),
        "trainer.micro_train_batch_size_per_gpu=4".into(),
        "trainer.micro_forward_batch_size_per_gpu=8".into(),
        "trainer.eval_batch_size=50".into(),
        "trainer.eval_before_train=false".into(),
        "trainer.eval_interval=2".into(),
        "trainer.ckpt_interval=1".into(),
        "trainer.resume_mode=none".into(),
        "trainer.max_prompt_length=64".into(),
        "trainer.policy.optimizer_config.lr=1e-3".into(),
        "trainer.policy.optimizer_config.num_warmup_steps=0".into(),
        "trainer.policy.model.init.vocab_size=99".into(),
        "trainer.policy.model.init.intermediate_size=128".into(),
        "trainer.policy.model.init.tokenizer=char".into(),
        "trainer.algorithm.use_kl_loss=true".into(),
        // fp32 without recomputation (the defaults are bf16 and gradient checkpointing).
        "trainer.bf16=false".into(),
        "trainer.gradient_checkpointing=false".into(),
        "generator.n_samples_per_prompt=4".into(),
        "generator.sampling_params.max_generate_length=6".into(),
        "environment.env_class=string_transform".into(),
    ];
    overrides.extend(extra.iter().map(|s| s.to_string()));
    load_config_str("", "<test>", &overrides).expect("valid test config")
}

/// Model init draws from libtorch's global RNG; tests run in parallel, so
/// trainers are built one at a time to keep each seeded init reproducible.
fn trainer(cfg: SkyrlConfig) -> Trainer {
    trainer_with(cfg, envs())
}

/// [`trainer`] with other plugins.
fn trainer_with(cfg: SkyrlConfig, plugins: PluginSet) -> Trainer {
    static INIT: Mutex<()> = Mutex::new(());
    let _guard = INIT.lock().unwrap_or_else(|e| e.into_inner());
    Trainer::new(cfg, plugins).unwrap()
}

/// The string_transform env plus the algorithm plugin `artifacts/plugins/<file>.wasm` as `name`.
fn envs_with_algorithm(name: &str, file: &str) -> PluginSet {
    let wasm = repo().join(format!("artifacts/plugins/{file}.wasm"));
    let plugin = Plugin::load(&PluginEngine::shared().unwrap(), &wasm)
        .unwrap_or_else(|e| panic!("{}: {e} (run scripts/build-plugins)", wasm.display()));
    let mut plugins = envs();
    plugins.insert_algorithm(name, plugin);
    plugins
}

fn params(trainer: &Trainer) -> Vec<(String, Tensor)> {
    let mut v: Vec<_> = trainer
        .policy()
        .var_store()
        .variables()
        .into_iter()
        .map(|(k, t)| (k, t.detach().copy()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Options of a quiet run of at most `n` steps.
fn steps(n: u64) -> TrainOptions {
    TrainOptions {
        progress: false,
        max_steps: Some(n),
        ..Default::default()
    }
}

/// Trains one step under `dir` with `args`, then resumes from its checkpoint
/// for one more: the resumed trainer and its run (the second step).
fn resume_after_one_step(dir: &Path, args: &[&str]) -> (Trainer, RunSummary) {
    trainer(config(dir, args)).run(&steps(1)).unwrap();
    let mut resume = args.to_vec();
    resume.push("trainer.resume_mode=latest");
    let mut resumed = trainer(config(dir, &resume));
    let run = resumed.run(&steps(1)).unwrap();
    (resumed, run)
}

/// A resumed step equals the uninterrupted one in `keys` (1e-5 relative).
fn assert_same_step(uninterrupted: &StepMetrics, resumed: &StepMetrics, keys: &[&str]) {
    for &key in keys {
        let (a, b) = (uninterrupted[key], resumed[key]);
        assert!(
            (a - b).abs() <= 1e-5 * a.abs().max(1.0),
            "{key}: uninterrupted {a} vs resumed {b}"
        );
    }
}

#[test]
fn two_steps_have_finite_metrics_and_write_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let dumps = ["trainer.dump_data_batch=true", "trainer.hf_save_interval=2"];
    let mut trainer = trainer(config(dir.path(), &dumps));
    let before = params(&trainer);
    let summary = trainer.run(&steps(2)).unwrap();
    assert_eq!(summary.final_step, 2);
    assert_eq!(summary.steps.len(), 2);
    for m in &summary.steps {
        for key in [
            "reward/mean",
            "loss",
            "kl",
            "entropy",
            "grad_norm",
            "lr",
            "response_length/mean",
            "tokens_per_s",
            "time/step",
        ] {
            let v = m.get(key).unwrap_or_else(|| panic!("metric {key} missing"));
            assert!(v.is_finite(), "{key} = {v}");
        }
        assert!(m["grad_norm"] > 0.0, "no gradient flowed");
        assert!((0.0..=1.0).contains(&m["reward/mean"]));
        assert!(m["response_length/mean"] >= 1.0);
        // 4 samples per prompt: 3 of them fork the first one's prompt KV.
        assert!(
            m["engine/prefill_reused_frac"] >= 0.74,
            "{}",
            m["engine/prefill_reused_frac"]
        );
        assert_eq!(m["engine/preemptions"], 0.0);
        assert!(m["engine/kv_peak_usage"] > 0.0 && m["engine/kv_peak_usage"] <= 1.0);
    }
    // Eval ran at step 2 on the whole validation split.
    let (step, eval) = summary.evals.last().expect("an eval at step 2");
    assert_eq!(*step, 2);
    assert_eq!(eval["eval/num_samples"], 100.0);
    // skyrl-train's names: avg_score is the mean reward; per data source too.
    assert!((eval["eval/all/avg_score"] - eval["eval/reward_mean"]).abs() < 1e-12);
    assert!((0.0..=1.0).contains(&eval["eval/all/pass_at_1"]));
    assert!(eval.contains_key("eval/unknown/mean_positive_reward"));
    // The policy changed.
    let after = params(&trainer);
    let moved: f64 = before
        .iter()
        .zip(&after)
        .map(|((_, a), (_, b))| (a - b).abs().max().double_value(&[]))
        .fold(0.0, f64::max);
    assert!(moved > 0.0, "parameters did not change");
    // Checkpoints, metrics and the plot are on disk.
    let ckpts = dir.path().join("ckpts");
    for s in [1, 2] {
        let d = ckpts.join(format!("global_step_{s}"));
        for f in [
            "model.safetensors",
            "optimizer.safetensors",
            "trainer_state.json",
        ] {
            assert!(d.join(f).is_file(), "{} missing", d.join(f).display());
        }
    }
    assert_eq!(
        std::fs::read_to_string(ckpts.join("latest_ckpt_global_step.txt"))
            .unwrap()
            .trim(),
        "2"
    );
    let lines = std::fs::read_to_string(&summary.metrics_path).unwrap();
    assert_eq!(lines.lines().count(), 2);
    let png = summary.plot_path.expect("reward curve drawn");
    assert!(std::fs::metadata(png).unwrap().len() > 1000);
    check_dumps(&dir.path().join("exports"), eval);
}

fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// skyrl-train's dump layout: HF exports every `hf_save_interval` steps, each
/// training batch (`dump_data_batch`), each evaluation (`dump_eval_results`).
fn check_dumps(exports: &Path, eval: &skyrl_train::metrics::StepMetrics) {
    let policy = exports.join("global_step_2/policy");
    assert!(policy.join("config.json").is_file() && policy.join("tokenizer.json").is_file());
    assert!(
        !exports.join("global_step_1").exists(),
        "hf_save_interval=2 skips step 1"
    );
    for step in [1, 2] {
        let rows = json_lines(&exports.join(format!(
            "dumped_data/global_step_{step}_training_input.jsonl"
        )));
        assert_eq!(rows.len(), 16, "4 prompts x 4 samples");
        for r in &rows {
            let n = r["response_ids"].as_array().unwrap().len();
            for k in [
                "loss_mask",
                "rewards",
                "advantages",
                "action_log_probs",
                "base_action_log_probs",
            ] {
                assert_eq!(r[k].as_array().unwrap().len(), n, "{k} per response token");
            }
            assert!(r["uid"].is_string() && !r["prompt_token_ids"].as_array().unwrap().is_empty());
        }
        // GRPO: the 4 samples of a prompt share its uid.
        assert_eq!(rows[0]["uid"], rows[3]["uid"]);
    }
    let evals = exports.join("dumped_evals/global_step_2_evals");
    // The string_transform rows name no data_source.
    let rows = json_lines(&evals.join("unknown.jsonl"));
    assert_eq!(rows.len(), 100);
    let mean = rows
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .sum::<f64>()
        / 100.0;
    assert!(
        (mean - eval["eval/reward_mean"]).abs() < 1e-9,
        "{mean} vs {}",
        eval["eval/reward_mean"]
    );
    assert!(rows
        .iter()
        .all(|r| !r["input_prompt"].as_str().unwrap().is_empty()));
    assert_eq!(rows[0]["env_class"], "string_transform");
    let agg = json_lines(&evals.join("aggregated_results.jsonl"));
    assert_eq!(
        agg[0]["eval/reward_mean"].as_f64().unwrap(),
        eval["eval/reward_mean"]
    );
}

#[test]
fn resume_reproduces_the_next_step() {
    // Reference: two uninterrupted steps.
    let full_dir = tempfile::tempdir().unwrap();
    let mut full = trainer(config(full_dir.path(), &[]));
    let full_run = full.run(&steps(2)).unwrap();
    let full_params = params(&full);

    // One step, stop, then resume for one more.
    let dir = tempfile::tempdir().unwrap();
    let mut first = trainer(config(dir.path(), &[]));
    first.run(&steps(1)).unwrap();
    drop(first);
    let mut resumed = trainer(config(dir.path(), &["trainer.resume_mode=latest"]));
    assert_eq!(resumed.global_step(), 1);
    let resumed_run = resumed.run(&steps(1)).unwrap();
    assert_eq!(resumed_run.start_step, 1);
    assert_eq!(resumed_run.final_step, 2);
    assert!(resumed_run.resumed_from.is_some());

    assert_same_step(
        &full_run.steps[1],
        &resumed_run.steps[0],
        &["reward/mean", "loss", "grad_norm", "response_length/mean"],
    );
    let resumed_params = params(&resumed);
    for ((name, x), (_, y)) in full_params.iter().zip(&resumed_params) {
        let diff = (x - y).abs().max().double_value(&[]);
        assert!(diff < 1e-5, "{name} differs by {diff} after resume");
    }
    // The resumed run appended to the metrics of the first one.
    let lines = std::fs::read_to_string(&resumed_run.metrics_path).unwrap();
    assert_eq!(lines.lines().count(), 2);
}

#[test]
fn kl_in_reward_uses_the_reference_and_checkpoints_the_coefficient() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &[
            "trainer.algorithm.use_kl_loss=false",
            "trainer.algorithm.use_kl_in_reward=true",
            "trainer.algorithm.kl_ctrl.type=adaptive",
            "trainer.algorithm.kl_loss_coef=0.05",
            // k2 = delta^2 / 2 stays accurate in fp32 for tiny deltas (k3 rounds to 0).
            "trainer.algorithm.kl_estimator_type=k2",
        ],
    );
    let mut trainer = trainer(cfg);
    let run = trainer.run(&steps(2)).unwrap();
    let m = &run.steps[1];
    // Step 2 runs after one update, so the policy differs from the reference.
    assert!(m["kl_in_reward/mean_kl"] > 0.0);
    assert!(m["kl_in_reward/coef"].is_finite());
    assert!(
        m["kl_in_reward/coef"] != 0.05,
        "adaptive controller did not move"
    );
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("ckpts/global_step_2/trainer_state.json"))
            .unwrap(),
    )
    .unwrap();
    assert!(state["kl_ctrl_value"].as_f64().is_some());
}

fn run_steps(cfg: SkyrlConfig, n: u64) -> (Trainer, RunSummary) {
    let mut t = trainer(cfg);
    let summary = t.run(&steps(n)).unwrap();
    (t, summary)
}

#[test]
fn one_step_off_trains_on_batches_one_version_old_reproducibly() {
    let extra = [
        "trainer.training_mode=one_step_off",
        "trainer.eval_interval=-1",
        "trainer.ckpt_interval=-1",
    ];
    let a_dir = tempfile::tempdir().unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let (_, a) = run_steps(config(a_dir.path(), &extra), 3);
    let (_, b) = run_steps(config(b_dir.path(), &extra), 3);
    assert_eq!(a.final_step, 3);
    for (k, m) in a.steps.iter().enumerate() {
        // Batch 0 comes from the initial weights; every later one from the
        // weights of the step before.
        let want = if k == 0 { 0.0 } else { 1.0 };
        assert_eq!(m["async/staleness_max"], want, "step {k}");
        assert_eq!(m["async/staleness_mean"], want, "step {k}");
        assert!(m["loss"].is_finite() && m["grad_norm"] > 0.0);
    }
    // Generation overlaps training but each batch still sees one fixed policy,
    // so two runs agree exactly.
    for (x, y) in a.steps.iter().zip(&b.steps) {
        assert_eq!(x["reward/mean"], y["reward/mean"]);
        assert_eq!(x["loss"], y["loss"]);
    }
}

#[test]
fn sync_mode_trains_on_fresh_rollouts() {
    let dir = tempfile::tempdir().unwrap();
    let (_, s) = run_steps(
        config(
            dir.path(),
            &["trainer.eval_interval=-1", "trainer.ckpt_interval=-1"],
        ),
        2,
    );
    for m in &s.steps {
        assert_eq!(m["async/staleness_max"], 0.0);
    }
    // trainer.logprobs_chunk_size: the LM head in chunks of 3 positions of
    // every row computes the same first step.
    let chunked_dir = tempfile::tempdir().unwrap();
    let extra = [
        "trainer.eval_interval=-1",
        "trainer.ckpt_interval=-1",
        "trainer.logprobs_chunk_size=3",
    ];
    let (_, c) = run_steps(config(chunked_dir.path(), &extra), 1);
    let (x, y) = (&s.steps[0], &c.steps[0]);
    assert_eq!(x["reward/mean"], y["reward/mean"]);
    for key in ["loss", "grad_norm"] {
        let d = (x[key] - y[key]).abs() / x[key].abs().max(1e-12);
        assert!(d < 1e-5, "{key}: {} vs {} ({d:e})", x[key], y[key]);
    }
}

#[test]
fn fully_async_bounds_staleness_and_checkpoints_a_consistent_position() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &[
            "trainer.training_mode=fully_async",
            "trainer.fully_async.max_staleness_steps=1",
            "trainer.fully_async.num_parallel_generation_workers=3",
            "trainer.algorithm.use_tis=true",
            "trainer.eval_interval=-1",
            "trainer.ckpt_interval=2",
        ],
    );
    let (_, s) = run_steps(cfg, 4);
    assert_eq!(s.final_step, 4);
    for (k, m) in s.steps.iter().enumerate() {
        assert!(m["async/staleness_max"] <= 1.0, "step {k}: {m:?}");
        assert!(m["loss"].is_finite() && m["reward/mean"].is_finite());
    }
    assert!(
        s.steps.iter().any(|m| m["async/staleness_max"] == 1.0),
        "with two batches in flight some groups run across a weight update"
    );
    // The checkpoint resumes after the last batch whose groups were all trained on.
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            s.last_checkpoint
                .as_ref()
                .unwrap()
                .join("trainer_state.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let batch = state["data_position"]["batch"].as_u64().unwrap();
    // 16 groups trained; at most 2 batches (8 groups) were ever outstanding.
    assert!((2..=4).contains(&batch), "resume batch {batch}");
}

#[test]
fn step_wise_trajectories_train_one_sample_per_turn() {
    let dir = tempfile::tempdir().unwrap();
    let multi = repo().join("artifacts/plugins/gsm8k_multi_turn.wasm");
    let plugin = Plugin::load(&PluginEngine::shared().unwrap(), &multi).unwrap();
    let mut envs = PluginSet::default();
    // The multi-turn env runs on the string_transform prompts: it never sees
    // a correct `####` answer, so every trajectory takes max_turns turns.
    envs.insert("string_transform", plugin, json!({}));
    let cfg = config(
        dir.path(),
        &[
            "generator.step_wise_trajectories=true",
            "generator.max_turns=2",
            "generator.max_input_length=200",
            "trainer.eval_interval=-1",
            "trainer.ckpt_interval=-1",
        ],
    );
    let mut t = trainer_with(cfg, envs);
    let s = t.run(&steps(1)).unwrap();
    let m = &s.steps[0];
    // One sample per turn of the 4 prompts x 4 samples.
    assert_eq!(m["train/samples"], 16.0 * m["num_turns/mean"], "{m:?}");
    assert!(m["num_turns/mean"] > 1.0, "{m:?}");
    assert!(m["loss"].is_finite() && m["grad_norm"].is_finite());
}

#[test]
fn a_custom_rollout_chat_template_trains_on_retokenized_conversations() {
    let dir = tempfile::tempdir().unwrap();
    let multi = repo().join("artifacts/plugins/gsm8k_multi_turn.wasm");
    let plugin = Plugin::load(&PluginEngine::shared().unwrap(), &multi).unwrap();
    let mut envs = PluginSet::default();
    envs.insert("string_transform", plugin, json!({}));
    let cfg = config(
        dir.path(),
        &[
            "generator.chat_template.name_or_path=qwen3_without_thinking",
            "generator.sampling_params.logprobs=null",
            "generator.max_turns=2",
            "generator.max_input_length=200",
            "trainer.eval_interval=-1",
            "trainer.ckpt_interval=-1",
        ],
    );
    let mut t = trainer_with(cfg, envs);
    let s = t.run(&steps(1)).unwrap();
    let m = &s.steps[0];
    assert_eq!(m["num_turns/mean"], 2.0, "{m:?}");
    assert!(m["loss"].is_finite() && m["grad_norm"].is_finite(), "{m:?}");
}

fn with_generator(envs: &mut PluginSet, name: &str) {
    let wasm = repo().join(format!("artifacts/plugins/{name}.wasm"));
    let plugin = Plugin::load(&PluginEngine::shared().unwrap(), &wasm).unwrap();
    envs.set_generator(plugin);
}

fn one_step(cfg: SkyrlConfig, envs: PluginSet) -> RunSummary {
    let mut t = trainer_with(cfg, envs);
    t.run(&steps(1)).unwrap()
}

#[test]
fn best_of_n_generator_plugin_beats_single_samples() {
    let extra = [
        "trainer.eval_interval=-1",
        "trainer.ckpt_interval=-1",
        "generator.custom_generator.config={n: 8}",
    ];
    let dir = tempfile::tempdir().unwrap();
    let plain = one_step(config(dir.path(), &extra), envs());
    let dir = tempfile::tempdir().unwrap();
    let mut e = envs();
    with_generator(&mut e, "best_of_n");
    let best = one_step(config(dir.path(), &extra), e);
    let (p, b) = (&plain.steps[0], &best.steps[0]);
    // Each of the 16 trajectories is the best of 8 partial-credit samples.
    assert!(
        b["reward/mean"] > p["reward/mean"],
        "best-of-8 {} vs single {}",
        b["reward/mean"],
        p["reward/mean"]
    );
    assert!(b["loss"].is_finite() && b["grad_norm"] > 0.0, "{b:?}");
    assert_eq!(b["num_turns/mean"], 1.0);
}

#[test]
fn tree_search_generator_plugin_runs_multi_turn_episodes() {
    let dir = tempfile::tempdir().unwrap();
    let multi = repo().join("artifacts/plugins/gsm8k_multi_turn.wasm");
    let mut e = PluginSet::default();
    e.insert(
        "string_transform",
        Plugin::load(&PluginEngine::shared().unwrap(), &multi).unwrap(),
        json!({}),
    );
    with_generator(&mut e, "tree_search");
    let cfg = config(
        dir.path(),
        &[
            "trainer.eval_interval=-1",
            "trainer.ckpt_interval=-1",
            "generator.max_turns=2",
            "generator.max_input_length=200",
            "generator.custom_generator.config={width: 2, branch: 2}",
        ],
    );
    let s = one_step(cfg, e);
    let m = &s.steps[0];
    // The multi-turn env never finishes early here, so every beam takes both
    // turns, with the observation between them masked out.
    assert_eq!(m["num_turns/mean"], 2.0, "{m:?}");
    assert!(m["loss"].is_finite() && m["grad_norm"] > 0.0, "{m:?}");
}

/// `trainer.gradient_checkpointing` recomputes each decoder layer in the
/// backward without changing fp32 results; `trainer.bf16` trains bf16
/// weights (fp32 master weights in the optimizer) within bf16 tolerance of fp32.
#[test]
fn gradient_checkpointing_is_exact_and_bf16_stays_close_to_fp32() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str]| run_steps(config(&dir.path().join(name), extra), 2);
    let (fp32, fp32_run) = run("fp32", &[]);
    let (ckpt, ckpt_run) = run("ckpt", &["trainer.gradient_checkpointing=true"]);
    for ((n, a), (_, b)) in params(&fp32).iter().zip(params(&ckpt)) {
        let d = (a - &b).abs().max().double_value(&[]);
        assert!(d <= 1e-6, "checkpointing changed {n} by {d}");
    }
    for (a, b) in fp32_run.steps.iter().zip(&ckpt_run.steps) {
        assert!((a["loss"] - b["loss"]).abs() <= 1e-6 * a["loss"].abs().max(1e-3));
        assert!((a["grad_norm"] - b["grad_norm"]).abs() <= 1e-5 * a["grad_norm"]);
    }
    let (bf16, bf16_run) = run(
        "bf16",
        &["trainer.bf16=true", "trainer.gradient_checkpointing=true"],
    );
    assert_eq!(bf16.policy().kind(), tch::Kind::BFloat16);
    for (a, b) in fp32_run.steps.iter().zip(&bf16_run.steps) {
        // bf16 keeps 8 bits of mantissa: 2^-8 relative per value.
        for key in ["loss", "grad_norm", "entropy", "policy/approx_kl"] {
            let tol = 0.02 * a[key].abs() + 2e-3;
            assert!(
                (a[key] - b[key]).abs() <= tol,
                "{key}: fp32 {} bf16 {}",
                a[key],
                b[key]
            );
        }
    }
    for ((n, a), (_, b)) in params(&fp32).iter().zip(params(&bf16)) {
        let d = (a - b.to_kind(tch::Kind::Float))
            .abs()
            .max()
            .double_value(&[]);
        assert!(d <= 1e-2, "bf16 weight {n} is {d} away from fp32");
    }
}

/// Largest element-wise difference between two models' weights.
fn max_diff(a: &skyrl_model::CausalLm, b: &skyrl_model::CausalLm) -> f64 {
    a.named_parameters()
        .iter()
        .zip(b.named_parameters())
        .map(|((na, x), (nb, y))| {
            assert_eq!(na, &nb);
            (x - y).abs().max().double_value(&[])
        })
        .fold(0.0, f64::max)
}

#[test]
fn update_ref_every_epoch_copies_the_policy_and_survives_resume() {
    // 8 rows: two batches of 4 per epoch, two epochs.
    let dir = tempfile::tempdir().unwrap();
    let src = repo().join("envs/string_transform/data/train.jsonl");
    let rows: Vec<String> = std::fs::read_to_string(src)
        .unwrap()
        .lines()
        .take(8)
        .map(str::to_string)
        .collect();
    let data = dir.path().join("train8.jsonl");
    std::fs::write(&data, rows.join("\n")).unwrap();
    let data_arg = format!("data.train_data=['{}']", data.display());
    let base = [
        data_arg.as_str(),
        "trainer.epochs=2",
        "trainer.eval_interval=-1",
        "trainer.ckpt_interval=1",
    ];

    let mut on = base.to_vec();
    on.push("trainer.update_ref_every_epoch=true");
    let mut t = trainer(config(dir.path(), &on));
    t.run(&steps(1)).unwrap();
    // Mid-epoch: the reference is still the initial model.
    assert!(max_diff(t.policy(), t.reference().unwrap()) > 0.0);
    t.run(&steps(1)).unwrap();
    // End of epoch 0: the reference is the policy.
    assert_eq!(max_diff(t.policy(), t.reference().unwrap()), 0.0);
    let ref_after_epoch0: Vec<_> = t
        .reference()
        .unwrap()
        .named_parameters()
        .into_iter()
        .map(|(n, x)| (n, x.copy()))
        .collect();
    drop(t);
    // A resumed run (from step 2) gets the updated reference back, not the initial one.
    let mut resume = on.clone();
    resume.push("trainer.resume_mode=latest");
    let mut r = trainer(config(dir.path(), &resume));
    assert_eq!(r.global_step(), 2);
    for ((n, x), (_, y)) in r
        .reference()
        .unwrap()
        .named_parameters()
        .iter()
        .zip(&ref_after_epoch0)
    {
        assert_eq!((x - y).abs().max().double_value(&[]), 0.0, "{n}");
    }
    // The last epoch's end does not update it.
    r.run(&steps(2)).unwrap();
    assert_eq!(r.global_step(), 4);
    assert!(max_diff(r.policy(), r.reference().unwrap()) > 0.0);

    // Without the key the reference never moves.
    let off_dir = tempfile::tempdir().unwrap();
    let mut off = trainer(config(off_dir.path(), &base));
    let initial: Vec<_> = off
        .reference()
        .unwrap()
        .named_parameters()
        .into_iter()
        .map(|(n, x)| (n, x.copy()))
        .collect();
    off.run(&steps(2)).unwrap();
    for ((n, x), (_, y)) in off
        .reference()
        .unwrap()
        .named_parameters()
        .iter()
        .zip(&initial)
    {
        assert_eq!((x - y).abs().max().double_value(&[]), 0.0, "{n}");
    }
}

#[test]
fn prompts_longer_than_max_prompt_length_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let src = repo().join("envs/string_transform/data/train.jsonl");
    let mut rows: Vec<serde_json::Value> = std::fs::read_to_string(src)
        .unwrap()
        .lines()
        .take(8)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Half the prompts far over trainer.max_prompt_length (64 tokens).
    for r in rows.iter_mut().skip(4) {
        r["prompt"][0]["content"] = json!(format!("copy: {}", "ab".repeat(100)));
    }
    let data = dir.path().join("mixed.jsonl");
    let text: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    std::fs::write(&data, text.join("\n")).unwrap();
    let arg = format!("data.train_data=['{}']", data.display());
    // 4 rows left: one batch of 4 per epoch (8 rows would make two).
    let t = trainer(config(dir.path(), &[arg.as_str()]));
    assert_eq!(t.total_steps(), 1);
    let t = trainer(config(
        dir.path(),
        &[arg.as_str(), "trainer.max_prompt_length=400"],
    ));
    assert_eq!(t.total_steps(), 2);
}

#[test]
fn dynamic_sampling_fills_the_batch_with_groups_that_have_signal() {
    for kind in ["filter", "replace"] {
        let dir = tempfile::tempdir().unwrap();
        let ds = format!("trainer.algorithm.dynamic_sampling.type={kind}");
        let mut t = trainer(config(
            dir.path(),
            &[ds.as_str(), "trainer.eval_interval=-1"],
        ));
        let s = t.run(&steps(1)).unwrap();
        let m = &s.steps[0];
        assert!(m["dynamic_sampling/batches"] >= 1.0, "{kind}");
        assert!(
            m.contains_key("dynamic_sampling/zero_variance_prompts"),
            "{kind}"
        );
        // Still train_batch_size prompts x n_samples_per_prompt.
        assert_eq!(m["train/samples"], 16.0, "{kind}");
    }
    // n_samples_per_prompt = 1 has no groups to judge: refused before training.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &[
            "trainer.algorithm.dynamic_sampling.type=filter",
            "generator.n_samples_per_prompt=1",
            "trainer.micro_train_batch_size_per_gpu=1",
            "trainer.algorithm.advantage_estimator=reinforce++",
        ],
    );
    let e = Trainer::new(cfg, envs()).err().expect("refused");
    assert!(
        format!("{e:#}").contains("n_samples_per_prompt >= 2"),
        "{e:#}"
    );
}

#[test]
fn gae_trains_a_critic_that_checkpoints_and_resumes_exactly() {
    let gae = [
        "trainer.algorithm.advantage_estimator=gae",
        "trainer.algorithm.use_kl_loss=false",
        "trainer.critic.optimizer_config.lr=1e-3",
        "trainer.critic_mini_batch_size=2",
        "trainer.eval_interval=-1",
    ];
    let full_dir = tempfile::tempdir().unwrap();
    let mut full = trainer(config(full_dir.path(), &gae));
    let full_run = full.run(&steps(2)).unwrap();
    for m in &full_run.steps {
        for k in [
            "critic/loss",
            "critic/grad_norm",
            "critic/values_mean",
            "critic/returns_mean",
            "critic/vf_clipfrac",
        ] {
            assert!(m[k].is_finite(), "{k} = {}", m[k]);
        }
        assert!(
            m["critic/grad_norm"] > 0.0,
            "no gradient reached the critic"
        );
    }
    // The critic moved: its values for the same kind of batch change after training.
    assert_ne!(
        full_run.steps[0]["critic/values_mean"],
        full_run.steps[1]["critic/values_mean"]
    );
    let ckpt = full_dir.path().join("ckpts/global_step_1/extra");
    assert!(
        ckpt.join("critic.safetensors").is_file()
            && ckpt.join("critic_optimizer.safetensors").is_file()
    );

    // Stop after one step and resume: the second step (critic included) is the same.
    let dir = tempfile::tempdir().unwrap();
    let (_, resumed) = resume_after_one_step(dir.path(), &gae);
    assert_same_step(
        &full_run.steps[1],
        &resumed.steps[0],
        &["critic/loss", "critic/values_mean", "loss", "grad_norm"],
    );

    // A critic with another vocabulary is refused before training.
    let bad_dir = tempfile::tempdir().unwrap();
    let mut bad = gae.to_vec();
    bad.extend([
        "trainer.critic.model.init.vocab_size=120",
        "trainer.critic.model.init.tokenizer=char",
    ]);
    let e = Trainer::new(config(bad_dir.path(), &bad), envs())
        .err()
        .expect("refused");
    assert!(format!("{e:#}").contains("vocabulary"), "{e:#}");
}

#[test]
fn a_failing_algorithm_plugin_ends_the_run_with_its_last_checkpoint_intact() {
    let dir = tempfile::tempdir().unwrap();
    // 16 rows per step in 2 mini-batches of 2 micro-batches: 4 loss calls
    // per step, so the plugin traps on the first call of step 2.
    let cfg = config(
        dir.path(),
        &[
            "trainer.algorithm.policy_loss_type=plugin:bad",
            "trainer.algorithm.plugin_options={bad: {mode: trap, fail_after: 4}}",
        ],
    );
    let mut t = trainer_with(cfg, envs_with_algorithm("bad", "bad_algorithm"));
    let err = t.run(&steps(3)).expect_err("the plugin traps in step 2");
    let text = format!("{err:#}");
    assert!(text.contains("policy loss plugin `bad` failed"), "{text}");
    assert!(text.contains("trapped"), "{text}");
    drop(t);
    // Step 1's checkpoint is the latest and resumes.
    let ckpts = dir.path().join("ckpts");
    assert!(ckpts.join("global_step_1/trainer_state.json").is_file());
    assert!(!ckpts.join("global_step_2").exists());
    let resumed = trainer(config(dir.path(), &["trainer.resume_mode=latest"]));
    assert_eq!(resumed.global_step(), 1);
}

#[test]
fn an_algorithm_plugin_estimator_gets_a_critic_when_its_model_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &[
            "trainer.algorithm.advantage_estimator=plugin:rs",
            "trainer.algorithm.plugin_options={rs: {estimator: gae}}",
            "trainer.algorithm.use_kl_loss=false",
            "trainer.critic.model.init.vocab_size=99",
            "trainer.critic.model.init.intermediate_size=128",
            "trainer.critic.model.init.tokenizer=char",
            "trainer.critic_mini_batch_size=2",
            "trainer.eval_interval=-1",
        ],
    );
    let mut t = trainer_with(cfg, envs_with_algorithm("rs", "ppo_algorithms"));
    let run = t.run(&steps(1)).unwrap();
    let m = &run.steps[0];
    // The plugin's GAE returns were the critic's targets.
    assert!(
        m["critic/grad_norm"] > 0.0,
        "no gradient reached the critic"
    );
    assert!(m["critic/returns_mean"].is_finite() && m["critic/loss"].is_finite());
    assert!(dir
        .path()
        .join("ckpts/global_step_1/extra/critic.safetensors")
        .is_file());
}

/// The local engine's weights after the last sync, by name.
fn engine_weights(trainer: &Trainer) -> Vec<(String, Tensor)> {
    match trainer.rollout_engine().backend() {
        skyrl_inference::EngineBackend::Local(e) => e
            .blocking_lock()
            .model()
            .named_parameters()
            .into_iter()
            .map(|(n, t)| (n, t.detach().copy()))
            .collect(),
        _ => panic!("the test runs the built-in engine"),
    }
}

#[test]
fn lora_trains_only_the_adapters_serves_merged_weights_and_resumes_exactly() {
    let lora = [
        "trainer.policy.model.lora.rank=4",
        "trainer.policy.model.lora.alpha=8",
        "trainer.policy.model.lora.target_modules=[q_proj,v_proj,up_proj]",
        "trainer.policy.optimizer_config.lr=1e-2",
        "trainer.eval_interval=-1",
    ];
    let full_dir = tempfile::tempdir().unwrap();
    let mut full = trainer(config(full_dir.path(), &lora));
    let base = params(&full);
    let full_run = full.run(&steps(2)).unwrap();
    // The base weights never move; the adapters do.
    for ((name, before), (_, after)) in base.iter().zip(params(&full)) {
        assert!(before.equal(&after), "base weight {name} changed");
    }
    let adapters = full.policy().trainable_parameters();
    assert_eq!(adapters.len(), 2 * 3 * 2, "2 layers x 3 modules x (A, B)");
    for (name, t) in adapters.iter().filter(|(n, _)| n.contains("lora_B")) {
        assert!(
            t.abs().max().double_value(&[]) > 0.0,
            "{name} did not train"
        );
    }
    // The engine serves W + (alpha/r) B A: the merged weights.
    let merged = full.policy().merged_parameters();
    let served = engine_weights(&full);
    assert_eq!(merged.len(), served.len());
    let mut changed = 0;
    for ((n, m), (ns, s)) in merged.iter().zip(&served) {
        assert_eq!(n, ns);
        let d = (m - s).abs().max().double_value(&[]);
        assert!(
            d < 1e-6,
            "engine weight {n} differs from the merged policy by {d}"
        );
        let base_w = &base.iter().find(|(b, _)| b == n).unwrap().1;
        changed += usize::from(!base_w.equal(s));
    }
    assert_eq!(
        changed,
        2 * 3,
        "only the adapted layers change in the engine"
    );
    // The optimizer holds state for the adapters only.
    let last = full_run.steps.last().unwrap();
    let adapter_mib =
        adapters.iter().map(|(_, t)| t.numel()).sum::<usize>() as f64 * 4.0 / (1u64 << 20) as f64;
    assert!(
        last["memory/optimizer_mib"] <= 3.0 * adapter_mib + 1e-9,
        "optimizer state {} MiB for {adapter_mib} MiB of adapters",
        last["memory/optimizer_mib"]
    );
    // Checkpoints hold the adapter in PEFT's format.
    let peft = full_dir.path().join("ckpts/global_step_2/lora_adapter");
    let peft_config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(peft.join("adapter_config.json")).unwrap())
            .unwrap();
    assert_eq!(peft_config["r"], json!(4));
    assert_eq!(peft_config["peft_type"], json!("LORA"));
    assert_eq!(
        peft_config["target_modules"],
        json!(["q_proj", "up_proj", "v_proj"])
    );
    assert!(peft.join("adapter_model.safetensors").is_file());

    // Stop after one step and resume: the second step is the same.
    let dir = tempfile::tempdir().unwrap();
    let (resumed, resumed_run) = resume_after_one_step(dir.path(), &lora);
    assert_same_step(
        &full_run.steps[1],
        &resumed_run.steps[0],
        &["loss", "grad_norm", "reward/mean"],
    );
    for ((n, x), (_, y)) in adapters.iter().zip(resumed.policy().trainable_parameters()) {
        let d = (x - y).abs().max().double_value(&[]);
        assert!(d < 1e-5, "{n} differs by {d} after resume");
    }

    // Bad LoRA settings are refused before training.
    let bad_dir = tempfile::tempdir().unwrap();
    let mut bad = lora.to_vec();
    bad.push("trainer.policy.model.lora.target_modules=[lm_head]");
    let e = Trainer::new(config(bad_dir.path(), &bad), envs())
        .err()
        .expect("lm_head refused");
    assert!(format!("{e:#}").contains("does not adapt"), "{e:#}");
}

#[test]
fn gae_with_a_lora_critic_trains_its_adapters_and_value_head() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        &[
            "trainer.algorithm.advantage_estimator=gae",
            "trainer.algorithm.use_kl_loss=false",
            "trainer.critic.optimizer_config.lr=1e-3",
            "trainer.critic.model.lora.rank=2",
            "trainer.critic_mini_batch_size=2",
            "trainer.policy.model.lora.rank=2",
            "trainer.eval_interval=-1",
        ],
    );
    let (_, run) = run_steps(cfg, 1);
    let m = &run.steps[0];
    assert!(m["critic/loss"].is_finite() && m["critic/grad_norm"] > 0.0);
    let saved =
        skyrl_train::checkpoint::load_checkpoint(&dir.path().join("ckpts/global_step_1")).unwrap();
    let critic = &saved.extra["critic"];
    assert!(critic.iter().any(|(n, _)| n == "value_head.weight"));
    assert!(critic.iter().any(|(n, _)| n.ends_with("lora_A.weight")));
    assert!(
        !critic.iter().any(|(n, _)| n.starts_with("model.")),
        "frozen backbone weights were checkpointed"
    );
}
