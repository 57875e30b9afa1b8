//! `skyrl train` with separate inference engines: disaggregated local
//! placement (the trainer starts `skyrl serve` processes) and external servers,
//! both syncing weights through checkpoints after every step.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn skyrl() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_skyrl"));
    c.current_dir(repo()).env(
        "SKYRL_CACHE_DIR",
        std::env::temp_dir().join("skyrl-cli-test-cache"),
    );
    c
}

fn run(args: &[String]) -> Output {
    skyrl().args(args).output().expect("running skyrl")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn http() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::new()
}

/// The first `n` rows of a dataset file, written under `dir`.
fn head(src: &Path, n: usize, dir: &Path, name: &str) -> PathBuf {
    let rows: Vec<&str> = std::fs::read_to_string(src)
        .unwrap()
        .leak()
        .lines()
        .take(n)
        .collect();
    let out = dir.join(name);
    std::fs::write(&out, rows.join("\n") + "\n").unwrap();
    out
}

/// Train args for a two-step run (8 prompts, batch 4) rooted at `dir`.
fn train_args(dir: &Path, extra: &[String]) -> Vec<String> {
    let data = repo().join("envs/string_transform/data");
    let wasm = repo().join("artifacts/plugins/string_transform.wasm");
    assert!(wasm.is_file(), "run scripts/build-plugins first");
    let mut args: Vec<String> = vec![
        "train".into(),
        "--quiet".into(),
        "--plugin".into(),
        format!("string_transform={}", wasm.display()),
        "--config".into(),
        "configs/demo.yaml".into(),
    ];
    args.extend([
        format!(
            "data.train_data=['{}']",
            head(&data.join("train.jsonl"), 8, dir, "train.jsonl").display()
        ),
        format!(
            "data.val_data=['{}']",
            head(&data.join("val.jsonl"), 4, dir, "val.jsonl").display()
        ),
        format!("trainer.ckpt_path={}", dir.join("ckpts").display()),
        format!("trainer.export_path={}", dir.join("exports").display()),
        format!("trainer.log_path={}", dir.join("logs").display()),
        "trainer.epochs=1".into(),
        "trainer.train_batch_size=4".into(),
        "trainer.policy_mini_batch_size=4".into(),
        "trainer.micro_train_batch_size_per_gpu=8".into(),
        "trainer.eval_before_train=false".into(),
        "trainer.eval_interval=-1".into(),
        "trainer.ckpt_interval=-1".into(),
        "generator.n_samples_per_prompt=2".into(),
        "generator.inference_engine.weight_sync_backend=checkpoint".into(),
        "trainer.placement.colocate_all=false".into(),
    ]);
    args.extend(extra.iter().cloned());
    args
}

/// Asserts that `out` failed and says `needle`.
fn assert_fails_with(out: &Output, needle: &str) {
    let t = text(out);
    assert!(!out.status.success(), "expected a failure: {t}");
    assert!(t.contains(needle), "expected `{needle}` in: {t}");
    assert!(!t.contains("panicked"), "{t}");
}

fn metrics(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("logs/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A `skyrl serve` process, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(model: &Path) -> Self {
        Self::start_with(model, &[])
    }

    fn start_with(model: &Path, flags: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = skyrl()
            .args(["serve", "--model", model.to_str().unwrap(), "--port", "0"])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix(skyrl_serve::LISTENING_PREFIX)
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let url = format!("http://{addr}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while http().get(format!("{url}/health")).send().is_err() {
            assert!(Instant::now() < deadline, "server did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        Server { child, url }
    }

    /// Greedy token ids and their log-probs.
    fn greedy(&self, prompt: &[i64]) -> (Vec<i64>, Vec<f32>) {
        let v: Value = http()
            .post(format!("{}/v1/completions", self.url))
            .json(
                &json!({"prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": true,
                          "return_token_ids": true, "logprobs": 0}),
            )
            .send()
            .unwrap()
            .json()
            .unwrap();
        let c = &v["choices"][0];
        (
            serde_json::from_value(c["token_ids"].clone()).unwrap(),
            serde_json::from_value(c["logprobs"]["token_logprobs"].clone()).unwrap(),
        )
    }

    /// POSTs `body` to `path` and expects a 400 whose message says `needle`.
    fn expect_bad_request(&self, path: &str, body: Value, needle: &str) {
        let r = http()
            .post(format!("{}{path}", self.url))
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{path}");
        let body: Value = r.json().unwrap();
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(needle), "{path}: {body}");
    }

    fn weight_version(&self) -> u64 {
        let v: Value = http()
            .get(format!("{}/get_weight_version", self.url))
            .send()
            .unwrap()
            .json()
            .unwrap();
        v["weight_version"].as_u64().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn disaggregated_local_engines_train_with_checkpoint_sync() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&train_args(
        dir.path(),
        &["generator.inference_engine.num_engines=2".into()],
    ));
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("trained steps 0..2"), "{}", text(&out));
    let m = metrics(dir.path());
    assert_eq!(m.len(), 2);
    for (k, step) in m.iter().enumerate() {
        // Version 1 is the sync at start-up; each step adds one.
        assert_eq!(
            step["inference/weight_version"],
            json!(k as f64 + 2.0),
            "{step}"
        );
        assert!(step["weight_sync/bytes"].as_f64().unwrap() > 10_000.0);
        assert!(step["time/weight_sync"].as_f64().unwrap() > 0.0);
        for e in 0..2 {
            let served = step[format!("inference/engine{e}/requests")]
                .as_f64()
                .unwrap();
            assert!(served > 0.0, "engine {e} served nothing: {step}");
        }
    }
    // Only the newest weight-sync checkpoint is kept.
    let kept: Vec<String> = std::fs::read_dir(dir.path().join("exports/weight_sync"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(kept, vec!["v3".to_string()]);
}

#[test]
fn external_servers_follow_the_trained_policy() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("start");
    let init = run(&[
        "model".into(),
        "init".into(),
        "--out".into(),
        model.display().to_string(),
        "--seed".into(),
        "5".into(),
    ]);
    assert!(init.status.success(), "{}", text(&init));
    // The servers load weights only from the trainer's sync folder.
    let sync = dir.path().join("sync");
    std::fs::create_dir_all(&sync).unwrap();
    let root = ["--weights-root", sync.to_str().unwrap()];
    let servers = [
        Server::start_with(&model, &root),
        Server::start_with(&model, &root),
    ];
    let prompt = [5i64, 6, 7, 8];
    let before = servers[0].greedy(&prompt);
    let urls = format!(
        "generator.inference_engine.remote_urls=['{}', '{}']",
        servers[0].url, servers[1].url
    );
    let out = run(&train_args(
        dir.path(),
        &[
            "generator.inference_engine.run_engines_locally=false".into(),
            urls,
            format!("trainer.policy.model.path={}", model.display()),
            "trainer.policy.model.init=null".into(),
            // Rewards of a random model are all 0 (no GRPO signal); the entropy
            // bonus still moves the weights.
            "trainer.policy.optimizer_config.num_warmup_steps=0".into(),
            "trainer.algorithm.use_entropy_loss=true".into(),
            "trainer.algorithm.entropy_loss_coef=1.0".into(),
            format!(
                "generator.inference_engine.weight_sync_path={}",
                dir.path().join("sync").display()
            ),
        ],
    ));
    assert!(out.status.success(), "{}", text(&out));
    for s in &servers {
        assert_eq!(s.weight_version(), 3, "start-up sync + one per step");
    }
    // The servers now produce what a server started on the exported policy produces.
    let exported = Server::start(&dir.path().join("exports/final_model"));
    let want = exported.greedy(&prompt);
    let max_diff = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max)
    };
    for s in &servers {
        let got = s.greedy(&prompt);
        assert_eq!(got.0, want.0);
        assert!(
            max_diff(&got.1, &want.1) < 1e-5,
            "{:?} vs {:?}",
            got.1,
            want.1
        );
    }
    assert!(
        max_diff(&before.1, &want.1) > 1e-4,
        "training changed the weights: {:?} vs {:?}",
        before.1,
        want.1
    );
}

#[test]
fn placement_mistakes_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&train_args(
        dir.path(),
        &["generator.inference_engine.run_engines_locally=false".into()],
    ));
    assert_fails_with(&out, "needs generator.inference_engine.remote_urls");

    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let start = Instant::now();
    let out = run(&train_args(
        dir.path(),
        &[
            "generator.inference_engine.run_engines_locally=false".into(),
            format!("generator.inference_engine.remote_urls=['http://{dead}']"),
            "generator.inference_engine.engine_startup_timeout_s=1".into(),
        ],
    ));
    assert_fails_with(&out, "inference servers not ready");
    assert!(start.elapsed() < Duration::from_secs(30));

    let out = run(&train_args(
        dir.path(),
        &["trainer.placement.colocate_all=true".into()],
    ));
    assert_fails_with(&out, "needs separate engines");
}

#[test]
fn nccl_sync_without_cuda_is_a_clear_error() {
    if tch::Cuda::is_available() {
        // This checks the CPU-machine error path only; NCCL itself needs one GPU
        // per rank (the trainer and each server).
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = run(&train_args(
        dir.path(),
        &["generator.inference_engine.weight_sync_backend=nccl".into()],
    ));
    assert_fails_with(&out, "weight sync to the inference engines failed");
    assert_fails_with(&out, "nccl weight sync: no CUDA device");

    // The server endpoints say the same.
    let model = dir.path().join("m");
    assert!(run(&[
        "model".into(),
        "init".into(),
        "--out".into(),
        model.display().to_string()
    ])
    .status
    .success());
    let server = Server::start(&model);
    server.expect_bad_request(
        "/init_weights_update_group",
        json!({"unique_id": "00".repeat(128), "rank": 1, "world_size": 2}),
        "no CUDA device",
    );
    server.expect_bad_request(
        "/update_weights_from_distributed",
        json!({"names": ["a"], "dtypes": ["float32"], "shapes": [[1]]}),
        "no weight update group",
    );
}
