//! `skyrl train` over several ranks (Gloo on loopback, one torch thread per
//! rank): 2 ranks against 1 for `ddp` and the sharded strategy, launched by
//! torchrun, with torchrun's variables and with srun's; sharded checkpoints
//! resumed on another world size; a killed rank; launches that must fail
//! before any work. And `skyrl sft` on 2 ranks against 1.

mod common;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{plugin, repo, text};
use skyrl_train::workers::{MemoryPlan, Strategy};
use tch::Tensor;

/// A tiny run under `dir`: 4 prompts x 2 samples per step, mini-batches of
/// 2 prompts, one row per micro-batch on 2 ranks.
fn args(dir: &Path, steps: u64, strategy: &str, world: usize, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "train".into(),
        "--quiet".into(),
        "--plugin".into(),
        plugin("string_transform"),
        "--config".into(),
        "configs/demo.yaml".into(),
        "--max-steps".into(),
        steps.to_string(),
        format!("trainer.ckpt_path={}", dir.join("ckpts").display()),
        format!("trainer.export_path={}", dir.join("exports").display()),
        format!("trainer.log_path={}", dir.join("logs").display()),
        "data.train_data=['envs/string_transform/data/val.jsonl']".into(),
        "trainer.train_batch_size=4".into(),
        "trainer.policy_mini_batch_size=2".into(),
        "trainer.micro_train_batch_size_per_gpu=1".into(),
        "trainer.eval_interval=2".into(),
        "trainer.eval_before_train=false".into(),
        "trainer.ckpt_interval=1".into(),
        "trainer.resume_mode=latest".into(),
        "generator.n_samples_per_prompt=2".into(),
        format!("trainer.strategy={strategy}"),
        format!("trainer.placement.policy_num_gpus_per_node={world}"),
        format!("trainer.placement.ref_num_gpus_per_node={world}"),
        format!("trainer.placement.critic_num_gpus_per_node={world}"),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn skyrl_cmd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_skyrl"));
    c.current_dir(repo())
        .env(
            "SKYRL_CACHE_DIR",
            std::env::temp_dir().join("skyrl-cli-test-cache"),
        )
        .env("OMP_NUM_THREADS", "1")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("SLURM_PROCID")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Which launcher's variables the ranks get.
#[derive(Clone, Copy)]
enum Launcher {
    /// torchrun's RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE.
    Torchrun,
    /// srun's SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE.
    Slurm,
}

/// Starts `world` ranks of `skyrl <args>` with a launcher's variables set by hand.
fn spawn_ranks(world: usize, args: &[String], launcher: Launcher) -> Vec<Child> {
    let port = free_port().to_string();
    let names = match launcher {
        Launcher::Torchrun => ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"],
        Launcher::Slurm => [
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "SLURM_LOCALID",
            "SLURM_NTASKS_PER_NODE",
        ],
    };
    (0..world)
        .map(|r| {
            let mut c = skyrl_cmd();
            c.args(args)
                .env(names[0], r.to_string())
                .env(names[1], world.to_string())
                .env(names[2], r.to_string())
                .env(names[3], world.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port);
            c.spawn().expect("start a rank")
        })
        .collect()
}

/// Runs `world` ranks to the end; asserts each succeeded.
fn run_ranks(world: usize, args: &[String]) -> Vec<Output> {
    run_ranks_with(world, args, Launcher::Torchrun)
}

fn run_ranks_with(world: usize, args: &[String], launcher: Launcher) -> Vec<Output> {
    let outs: Vec<Output> = spawn_ranks(world, args, launcher)
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for (r, o) in outs.iter().enumerate() {
        assert!(o.status.success(), "rank {r} failed: {}", text(o));
    }
    outs
}

/// One process, no launcher.
fn run_single(args: &[String]) -> Output {
    let out = skyrl_cmd().args(args).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    out
}

fn metrics(dir: &Path) -> Vec<BTreeMap<String, f64>> {
    std::fs::read_to_string(dir.join("logs/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn weights(dir: &Path, step: u64) -> BTreeMap<String, Tensor> {
    tensors(&dir.join(format!("ckpts/global_step_{step}/model.safetensors")))
}

/// Every tensor of one safetensors file, by name.
fn tensors(path: &Path) -> BTreeMap<String, Tensor> {
    Tensor::read_safetensors(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .collect()
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-12)
}

/// Per-step losses and rewards, and every weight tensor (relative L2), agree.
fn assert_same_run(a: &Path, b: &Path, steps: u64, what: &str) {
    let (ma, mb) = (metrics(a), metrics(b));
    assert_eq!(ma.len(), mb.len(), "{what}: step count");
    for (step, (x, y)) in ma.iter().zip(&mb).enumerate() {
        assert_eq!(
            x["reward/mean"], y["reward/mean"],
            "{what}: rewards at step {step}"
        );
        for key in ["loss", "grad_norm", "policy/approx_kl"] {
            // The loss (advantages of mean zero) and approx_kl (log-prob
            // differences) are sums that cancel: their fp32 rounding is that
            // of the terms (~1e-7), however small the sum. The grad norm is not.
            let floor = if key == "grad_norm" { 0.0 } else { 1e-6 };
            let d = rel(x[key], y[key]);
            assert!(
                (x[key] - y[key]).abs() <= 1e-5 * x[key].abs().max(y[key].abs()) + floor,
                "{what}: {key} at step {step}: {} vs {} ({d:e})",
                x[key],
                y[key]
            );
        }
    }
    assert_same_weights(a, b, steps, what);
}

/// Every weight tensor of the step-`steps` checkpoints agrees (relative L2),
/// except the key biases: a key bias shifts every score of a query alike, so
/// softmax cancels it and its gradient is rounding noise, which AdamW's
/// normalisation turns into lr-sized steps in any direction.
fn assert_same_weights(a: &Path, b: &Path, steps: u64, what: &str) {
    assert_same_tensors(&weights(a, steps), &weights(b, steps), what);
}

/// [`assert_same_weights`] on two loaded tensor maps.
fn assert_same_tensors(wa: &BTreeMap<String, Tensor>, wb: &BTreeMap<String, Tensor>, what: &str) {
    assert_eq!(wa.len(), wb.len());
    for (name, t) in wa {
        if name.ends_with("k_proj.bias") {
            continue;
        }
        let u = &wb[name];
        let d = (t - u).norm().double_value(&[]) / t.norm().double_value(&[]).max(1e-12);
        assert!(
            d < 1e-5,
            "{what}: weight {name} differs by {d:e} (relative L2)"
        );
    }
}

fn torchrun() -> PathBuf {
    let p = repo().join(".deps/venv/bin/torchrun");
    assert!(
        p.is_file(),
        "{} is missing: scripts/setup installs torch with its launcher",
        p.display()
    );
    p
}

#[test]
fn two_ranks_train_as_one_process_for_ddp_and_fsdp() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, ddp, fsdp) = (
        tmp.path().join("one"),
        tmp.path().join("ddp"),
        tmp.path().join("fsdp"),
    );
    // prompt_mean: the reduction needs the prompts of every rank.
    let red = ["trainer.algorithm.loss_reduction=prompt_mean"];
    run_single(&args(&one, 3, "ddp", 1, &red));
    // ddp through torchrun itself (its agent hosts the store).
    let out = Command::new(torchrun())
        .current_dir(repo())
        .env(
            "SKYRL_CACHE_DIR",
            std::env::temp_dir().join("skyrl-cli-test-cache"),
        )
        .env("OMP_NUM_THREADS", "1")
        .args([
            "--standalone",
            "--nnodes",
            "1",
            "--nproc-per-node",
            "2",
            "--no-python",
        ])
        .arg(env!("CARGO_BIN_EXE_skyrl"))
        .args(args(&ddp, 3, "ddp", 2, &red))
        .output()
        .unwrap();
    assert!(out.status.success(), "torchrun: {}", text(&out));
    // Rank 0 alone reports the run.
    assert_eq!(
        text(&out).matches("trained steps 0..3").count(),
        1,
        "{}",
        text(&out)
    );
    assert_same_run(&one, &ddp, 3, "ddp on 2 ranks");

    let outs = run_ranks(2, &args(&fsdp, 3, "fsdp2", 2, &red));
    assert!(text(&outs[0]).contains("trained steps 0..3"));
    assert!(!text(&outs[1]).contains("trained steps"));
    // The sharded optimizer state: one file per rank and a layout.
    let opt = fsdp.join("ckpts/global_step_3/optimizer");
    for f in ["layout.json", "rank0.safetensors", "rank1.safetensors"] {
        assert!(opt.join(f).is_file(), "{f} missing in {}", opt.display());
    }
    assert_same_run(&one, &fsdp, 3, "fsdp2 on 2 ranks");

    // The memory each rank reports is the accounting of MemoryPlan (docs/distributed.md's table).
    let n: i64 = weights(&one, 3).values().map(|t| t.numel() as i64).sum();
    for (dir, strategy) in [(&ddp, Strategy::Ddp), (&fsdp, Strategy::Sharded)] {
        let plan = MemoryPlan::new(n, 2, strategy, false);
        let m = metrics(dir).pop().unwrap();
        let mib = |b: i64| b as f64 / (1u64 << 20) as f64;
        for (key, want) in [
            ("memory/parameters_mib", plan.parameters),
            ("memory/gradients_peak_mib", plan.gradients_peak),
            ("memory/gradients_at_rest_mib", plan.gradients_at_rest),
            ("memory/optimizer_mib", plan.optimizer),
        ] {
            assert!(
                (m[key] - mib(want)).abs() < 1e-9,
                "{strategy:?} {key}: {} vs {}",
                m[key],
                mib(want)
            );
        }
    }
}

/// LoRA under the sharded strategy: only the adapters are reduced, sharded
/// and checkpointed, and 2 ranks train as one process.
#[test]
fn lora_on_two_ranks_trains_as_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, fsdp) = (tmp.path().join("one"), tmp.path().join("fsdp"));
    let lora = [
        "trainer.policy.model.lora.rank=4",
        "trainer.policy.model.lora.target_modules=[q_proj,v_proj,down_proj]",
        "trainer.policy.optimizer_config.lr=1e-2",
    ];
    run_single(&args(&one, 2, "fsdp2", 1, &lora));
    run_ranks(2, &args(&fsdp, 2, "fsdp2", 2, &lora));
    assert_same_run(&one, &fsdp, 2, "LoRA fsdp2 on 2 ranks");
    let saved = weights(&fsdp, 2);
    assert_eq!(saved.len(), 2 * 3 * 2, "adapters only: {:?}", saved.keys());
    assert!(saved.keys().all(|k| k.contains(".lora_")));
    assert!(fsdp
        .join("ckpts/global_step_2/lora_adapter/adapter_model.safetensors")
        .is_file());
}

/// PPO with a critic (`gae`) and DAPO's dynamic sampling on 2 ranks: every
/// rank judges the whole generated batch alike and trains on its share, the
/// replicated critic sums its gradients over the ranks: as one process.
#[test]
fn gae_with_dynamic_sampling_on_two_ranks_trains_as_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    let extra = [
        "trainer.algorithm.advantage_estimator=gae",
        "trainer.algorithm.dynamic_sampling.type=filter",
        // Four samples a prompt: enough groups with reward variance to fill
        // the batch, some without (the filter has work).
        "generator.n_samples_per_prompt=4",
        "trainer.critic_mini_batch_size=2",
        "trainer.critic.optimizer_config.lr=1e-3",
    ];
    run_single(&args(&one, 2, "ddp", 1, &extra));
    run_ranks(2, &args(&two, 2, "ddp", 2, &extra));
    assert_same_run(&one, &two, 2, "gae + dynamic sampling on 2 ranks");
    let dropped: f64 = metrics(&two)
        .iter()
        .map(|m| m["dynamic_sampling/zero_variance_prompts"])
        .sum();
    // The filter was exercised: groups were dropped and more batches drawn.
    assert!(dropped > 0.0, "no zero-variance group in the run");
    for (x, y) in metrics(&one).iter().zip(&metrics(&two)) {
        assert_eq!(x["dynamic_sampling/batches"], y["dynamic_sampling/batches"]);
        for key in [
            "critic/loss",
            "critic/grad_norm",
            "critic/values_mean",
            "critic/returns_mean",
        ] {
            let d = rel(x[key], y[key]);
            assert!(d < 1e-5, "{key}: {} vs {} ({d:e})", x[key], y[key]);
        }
    }
    let critic = |dir: &Path| tensors(&dir.join("ckpts/global_step_2/extra/critic.safetensors"));
    let (a, b) = (critic(&one), critic(&two));
    assert!(a.contains_key("value_head.weight"));
    assert_same_tensors(&a, &b, "critic on 2 ranks");
}

/// `skyrl sft` on `world` ranks under `dir`: 7 conversations of unequal
/// length, 4 per step (the second batch of each epoch is short: on 2 ranks
/// the second rank gets one), 2 per micro-batch, evaluated every 2 steps.
fn sft_args(dir: &Path, data: &Path, strategy: &str, world: usize) -> Vec<String> {
    [
        "sft".to_string(),
        "model.path=null".into(),
        "model.init={tokenizer: char, vocab_size: 99}".into(),
        format!("dataset_name={}", data.display()),
        "dataset_split=train".into(),
        format!("eval_dataset_name={}", data.display()),
        "eval_dataset_split=train".into(),
        "eval_interval=2".into(),
        "train_on_what=all_assistant_messages".into(),
        "batch_size=4".into(),
        "micro_train_batch_size_per_gpu=2".into(),
        "num_epochs=2".into(),
        "bf16=false".into(),
        "gradient_checkpointing=false".into(),
        "disable_cache=true".into(),
        "logger=jsonl".into(),
        "optimizer_config.lr=1e-3".into(),
        format!("strategy={strategy}"),
        format!("placement.num_gpus_per_node={world}"),
        format!("ckpt_path={}", dir.join("ckpts").display()),
        "ckpt_interval=2".into(),
        format!("export_path={}", dir.join("exports").display()),
        format!("log_path={}", dir.join("logs").display()),
    ]
    .to_vec()
}

#[test]
fn sft_on_two_ranks_trains_as_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("chat.jsonl");
    let rows: String = (0..7)
        .map(|i| {
            let msgs = serde_json::json!([
                {"role": "user", "content": format!("q{i}")},
                {"role": "assistant", "content": "ab".repeat(i + 1)},
                {"role": "user", "content": "more"},
                {"role": "assistant", "content": "z".repeat(7 - i)},
            ]);
            format!("{}\n", serde_json::json!({"messages": msgs}))
        })
        .collect();
    std::fs::write(&data, rows).unwrap();
    let one = tmp.path().join("one");
    run_single(&sft_args(&one, &data, "ddp", 1));
    for strategy in ["ddp", "fsdp"] {
        let two = tmp.path().join(strategy);
        let outs = run_ranks(2, &sft_args(&two, &data, strategy, 2));
        assert!(
            text(&outs[0]).contains("trained steps 0..4"),
            "{}",
            text(&outs[0])
        );
        assert!(!text(&outs[1]).contains("trained steps"));
        let (ma, mb) = (metrics(&one), metrics(&two));
        assert_eq!(ma.len(), mb.len());
        for (x, y) in ma.iter().zip(&mb) {
            for key in ["train/loss", "train/grad_norm", "eval/eval_loss"] {
                if let (Some(a), Some(b)) = (x.get(key), y.get(key)) {
                    assert!(rel(*a, *b) < 1e-5, "{strategy}: {key} {a} vs {b}");
                }
            }
        }
        assert!(
            mb.iter()
                .filter(|m| m.contains_key("eval/eval_loss"))
                .count()
                >= 2
        );
        assert_same_weights(&one, &two, 4, strategy);
    }
}

#[test]
fn sharded_checkpoints_resume_on_another_world_size() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole");
    run_single(&args(&whole, 3, "fsdp2", 1, &[]));
    // 2 ranks, then 1.
    let down = tmp.path().join("down");
    run_ranks(2, &args(&down, 2, "fsdp2", 2, &[]));
    let out = run_single(&args(&down, 1, "fsdp2", 1, &[]));
    assert!(text(&out).contains("trained steps 2..3"), "{}", text(&out));
    assert_same_run(&whole, &down, 3, "2 ranks then 1");
    // 1 rank, then 2 (launched as srun would: SLURM's variables).
    let up = tmp.path().join("up");
    run_single(&args(&up, 2, "fsdp2", 1, &[]));
    let outs = run_ranks_with(2, &args(&up, 1, "fsdp2", 2, &[]), Launcher::Slurm);
    assert!(
        text(&outs[0]).contains("trained steps 2..3"),
        "{}",
        text(&outs[0])
    );
    assert_same_run(&whole, &up, 3, "1 rank then 2");
}

#[test]
fn a_killed_rank_stops_the_other_with_its_name() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = args(tmp.path(), 100_000, "ddp", 2, &["trainer.ckpt_interval=-1"]);
    a.retain(|x| x != "--quiet");
    let mut ranks = spawn_ranks(2, &a, Launcher::Torchrun);
    // Wait for training to start (rank 0's first metrics line), then kill -9 rank 1.
    let log = tmp.path().join("logs/metrics.jsonl");
    let start = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|s| s.lines().count() >= 1) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "training never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    ranks[1].kill().unwrap();
    let killed = Instant::now();
    let survivor = ranks.remove(0).wait_with_output().unwrap();
    let took = killed.elapsed();
    let _ = ranks[0].wait();
    assert!(
        !survivor.status.success(),
        "rank 0 should fail: {}",
        text(&survivor)
    );
    let msg = text(&survivor);
    assert!(
        msg.contains("rank 0 of 2") && msg.contains("rank 1 of 2 stopped responding"),
        "{msg}"
    );
    assert!(
        took < Duration::from_secs(60),
        "rank 0 took {took:?} to stop"
    );
}

#[test]
fn bad_launches_fail_before_any_work() {
    let tmp = tempfile::tempdir().unwrap();
    // WORLD_SIZE without MASTER_ADDR.
    let out = skyrl_cmd()
        .args(args(tmp.path(), 1, "ddp", 2, &[]))
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .output()
        .unwrap();
    common::assert_fails_with(&out, "MASTER_ADDR");
    // A strategy that does not exist, or that this trainer does not run.
    let out = skyrl_cmd()
        .args(args(tmp.path(), 1, "megatron", 1, &[]))
        .output()
        .unwrap();
    common::assert_fails_with(&out, "trainer.strategy=megatron is not supported");
    // More ranks than trajectories in a mini-batch (refused by the config check).
    let out = skyrl_cmd()
        .args(args(
            tmp.path(),
            1,
            "ddp",
            4,
            &[
                "trainer.policy_mini_batch_size=1",
                "generator.n_samples_per_prompt=1",
            ],
        ))
        .env("RANK", "0")
        .env("WORLD_SIZE", "4")
        .env("LOCAL_WORLD_SIZE", "4")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", free_port().to_string())
        .output()
        .unwrap();
    common::assert_fails_with(
        &out,
        "must be divisible by the policy data-parallel size (4)",
    );
    // Ranks the placement does not plan for.
    let out = skyrl_cmd()
        .args(args(tmp.path(), 1, "ddp", 1, &[]))
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .env("LOCAL_WORLD_SIZE", "2")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", free_port().to_string())
        .output()
        .unwrap();
    common::assert_fails_with(&out, "trainer.placement.policy_num_gpus_per_node=2");
    assert!(
        !tmp.path().join("logs/metrics.jsonl").exists(),
        "no work was done"
    );
}
