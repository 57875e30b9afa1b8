//! Generation/training overlap of the three training modes, side by side in
//! one run on the same config (string_transform, tiny model): wall time, how
//! long the trainer sat idle waiting for rollouts (the GPU-idle-equivalent
//! fraction on CPU), and how much generation overlapped training.
//!
//! Run: `cargo bench -p skyrl-train --bench training_modes` (needs
//! `artifacts/plugins/string_transform.wasm` from scripts/build-plugins).

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;
use skyrl_rollout::PluginSet;
use skyrl_runtime::{Plugin, PluginEngine};
use skyrl_train::config::load_config_str;
use skyrl_train::trainer::{TrainOptions, Trainer};

const STEPS: u64 = 10;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn envs() -> PluginSet {
    let wasm = repo().join("artifacts/plugins/string_transform.wasm");
    assert!(
        wasm.is_file(),
        "{} is missing: run scripts/build-plugins",
        wasm.display()
    );
    let plugin = Plugin::load(&PluginEngine::shared().unwrap(), &wasm).unwrap();
    let mut envs = PluginSet::default();
    envs.insert("string_transform", plugin, json!({}));
    envs
}

struct Outcome {
    wall: f64,
    train: f64,
    generate: f64,
    wait: f64,
    reward: f64,
    staleness: f64,
}

fn run(mode: &str) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let data = repo().join("envs/string_transform/data");
    let overrides: Vec<String> = vec![
        format!("data.train_data=['{}']", data.join("train.jsonl").display()),
        format!("data.val_data=['{}']", data.join("val.jsonl").display()),
        format!("trainer.ckpt_path={}", dir.path().join("c").display()),
        format!("trainer.export_path={}", dir.path().join("e").display()),
        format!("trainer.log_path={}", dir.path().join("l").display()),
        format!("trainer.training_mode={mode}"),
        "trainer.fully_async.max_staleness_steps=1".into(),
        "trainer.fully_async.num_parallel_generation_workers=8".into(),
        "trainer.train_batch_size=8".into(),
        "trainer.policy_mini_batch_size=8".into(),
        "trainer.micro_train_batch_size_per_gpu=64".into(),
        "trainer.micro_forward_batch_size_per_gpu=64".into(),
        "trainer.eval_interval=-1".into(),
        "trainer.ckpt_interval=-1".into(),
        "trainer.resume_mode=none".into(),
        "trainer.max_prompt_length=64".into(),
        "trainer.algorithm.use_tis=true".into(),
        // fp32 without recomputation (the defaults are bf16 and gradient checkpointing).
        "trainer.bf16=false".into(),
        "trainer.gradient_checkpointing=false".into(),
        "trainer.policy.model.init.vocab_size=99".into(),
        "trainer.policy.model.init.tokenizer=char".into(),
        "trainer.policy.optimizer_config.lr=2e-3".into(),
        "generator.n_samples_per_prompt=8".into(),
        "generator.sampling_params.max_generate_length=16".into(),
        "environment.env_class=string_transform".into(),
    ];
    let cfg = load_config_str("", "<bench>", &overrides).unwrap();
    let mut trainer = Trainer::new(cfg, envs()).unwrap();
    let start = Instant::now();
    let s = trainer
        .run(&TrainOptions {
            max_steps: Some(STEPS),
            ..Default::default()
        })
        .unwrap();
    let wall = start.elapsed().as_secs_f64();
    let sum = |k: &str| s.steps.iter().map(|m| m[k]).sum::<f64>();
    Outcome {
        wall,
        train: sum("time/train"),
        generate: sum("time/generate"),
        wait: sum("time/wait_for_rollouts"),
        reward: sum("reward/mean") / s.steps.len() as f64,
        staleness: sum("async/staleness_mean") / s.steps.len() as f64,
    }
}

fn main() {
    // One torch thread per thread: the rollout worker and the trainer can each use a core.
    tch::set_num_threads(1);
    // Warm-up (plugin compile cache, first torch kernels), not reported.
    run("sync");
    let modes = ["sync", "one_step_off", "fully_async"];
    let outcomes: Vec<Outcome> = modes.iter().map(|m| run(m)).collect();
    println!();
    println!(
        "{STEPS} steps x 8 prompts x 8 samples (16 tokens), tiny model, string_transform, 1 torch thread per thread"
    );
    println!(
        "{:<14} {:>8} {:>8} {:>10} {:>8} {:>10} {:>10} {:>8}",
        "mode", "wall s", "train s", "gen work s", "wait s", "idle frac", "staleness", "reward"
    );
    for (m, o) in modes.iter().zip(&outcomes) {
        // idle frac: share of wall time the trainer sat waiting for rollouts
        // (a GPU trainer would be idle then). gen work: summed generation time
        // of all rollout units (concurrent units overlap, so it can exceed wall).
        println!(
            "{m:<14} {:>8.2} {:>8.2} {:>10.2} {:>8.2} {:>10.3} {:>10.2} {:>8.3}",
            o.wall,
            o.train,
            o.generate,
            o.wait,
            o.wait / o.wall,
            o.staleness,
            o.reward
        );
    }
    let base = outcomes[0].wall;
    for (m, o) in modes.iter().zip(&outcomes).skip(1) {
        println!("{m} vs sync: {:.2}x wall-clock speed-up", base / o.wall);
    }
}
