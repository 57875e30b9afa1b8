//! Hugging Face names for models and data sets, resolved offline in a fake hub
//! cache ($HF_HUB_CACHE): `skyrl train` and `skyrl serve` through the binary.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{repo, text};

const COMMIT: &str = "3f1e2d3c4b5a69788796a5b4c3d2e1f001122334";

/// Runs `skyrl` in `cwd` with the hub cache `cache`.
fn skyrl_in(cwd: &Path, cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skyrl"))
        .args(args)
        .current_dir(cwd)
        .env("HF_HUB_CACHE", cache)
        .env(
            "SKYRL_CACHE_DIR",
            std::env::temp_dir().join("skyrl-cli-test-cache"),
        )
        .output()
        .expect("running skyrl")
}

/// `skyrl model init` into `dir`.
fn init_model(dir: &Path, seed: u64) {
    let out = Command::new(env!("CARGO_BIN_EXE_skyrl"))
        .args(["model", "init", "--seed", &seed.to_string(), "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

/// The snapshot folder of `kind--org--name` in `cache`, with `refs/main`
/// naming it (as `huggingface-cli download` leaves it).
fn snapshot(cache: &Path, folder: &str) -> PathBuf {
    let repo_dir = cache.join(folder);
    std::fs::create_dir_all(repo_dir.join("refs")).unwrap();
    std::fs::write(repo_dir.join("refs/main"), COMMIT).unwrap();
    let dir = repo_dir.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn train_takes_the_model_and_data_from_the_hub_cache() {
    let cache = tempfile::tempdir().unwrap();
    let run = tempfile::tempdir().unwrap();
    init_model(&snapshot(cache.path(), "models--org--tiny"), 0);
    let data = snapshot(cache.path(), "datasets--org--strings").join("data");
    std::fs::create_dir_all(&data).unwrap();
    let src = repo().join("envs/string_transform/data");
    std::fs::copy(
        src.join("train.jsonl"),
        data.join("train-00000-of-00001.jsonl"),
    )
    .unwrap();
    std::fs::copy(
        src.join("val.jsonl"),
        data.join("test-00000-of-00001.jsonl"),
    )
    .unwrap();
    // A local folder named like a hub model wins over the cache, where the
    // same name is a snapshot without weights.
    init_model(&run.path().join("local/tiny"), 1);
    snapshot(cache.path(), "models--local--tiny");

    let plugin = common::plugin("string_transform");
    let config = repo().join("configs/demo.yaml").display().to_string();
    let d = run.path();
    let args = [
        "train".to_string(),
        "--quiet".into(),
        "--plugin".into(),
        plugin,
        "--config".into(),
        config,
        "--max-steps".into(),
        "1".into(),
        "trainer.policy.model.init=".into(),
        "trainer.policy.model.path=org/tiny".into(),
        "trainer.ref.model.path=local/tiny".into(),
        "trainer.algorithm.use_kl_loss=true".into(),
        r#"data.train_data=["hf://datasets/org/strings:train"]"#.into(),
        r#"data.val_data=["org/strings:test"]"#.into(),
        format!("trainer.ckpt_path={}", d.join("ckpts").display()),
        format!("trainer.export_path={}", d.join("exports").display()),
        format!("trainer.log_path={}", d.join("logs").display()),
        "trainer.train_batch_size=4".into(),
        "trainer.policy_mini_batch_size=4".into(),
        "trainer.micro_train_batch_size_per_gpu=8".into(),
        "trainer.eval_before_train=false".into(),
        "trainer.eval_interval=2".into(),
        "trainer.ckpt_interval=2".into(),
        "generator.n_samples_per_prompt=2".into(),
    ];
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = skyrl_in(d, cache.path(), &refs);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("trained steps 0..1"), "{}", text(&out));
    assert!(!d.join("exports/init_model").exists(), "no random init");

    // Not in the cache: the error names the cache, the folder and the fix.
    let mut missing = refs.clone();
    for a in missing.iter_mut() {
        if a.starts_with("trainer.policy.model.path=") {
            *a = "trainer.policy.model.path=org/absent";
        }
    }
    let out = skyrl_in(d, cache.path(), &missing);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(t.contains(&cache.path().display().to_string()), "{t}");
    assert!(t.contains("models--org--absent"), "{t}");
    assert!(t.contains("huggingface-cli download org/absent"), "{t}");
}

#[test]
fn serve_takes_a_hub_name_and_reports_it_as_the_model() {
    let cache = tempfile::tempdir().unwrap();
    init_model(&snapshot(cache.path(), "models--org--tiny"), 0);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skyrl"))
        .args(["serve", "--model", "org/tiny", "--port", &port.to_string()])
        .env("HF_HUB_CACHE", cache.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::blocking::Client::new();
    let url = format!("http://127.0.0.1:{port}/v1/models");
    let deadline = Instant::now() + Duration::from_secs(60);
    let models = loop {
        if let Ok(r) = client.get(&url).send() {
            break r.json::<serde_json::Value>().unwrap();
        }
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("skyrl serve --model org/tiny did not come up");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(models["data"][0]["id"], "org/tiny", "{models}");

    let out = skyrl_in(
        cache.path(),
        cache.path(),
        &["serve", "--model", "org/absent@v2", "--port", "0"],
    );
    assert!(!out.status.success());
    let t = text(&out);
    assert!(t.contains("models--org--absent"), "{t}");
    assert!(
        t.contains("huggingface-cli download org/absent --revision v2"),
        "{t}"
    );
}
