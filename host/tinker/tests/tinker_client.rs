//! The official `tinker` client (pinned by scripts/setup) against the service
//! on a tiny model on loopback: supervised and RL loops that learn, sampler
//! weights that survive a server restart, and bad requests that fail with
//! the field named while the server keeps serving.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use skyrl_model::{init_tiny_model, Arch, LoadOptions, TinySize};
use skyrl_tinker::{serve_blocking, start, ServeOptions};

/// The project venv's Python (with `tinker`), or `$SKYRL_PYTHON`.
fn python() -> PathBuf {
    let p = std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/python")
        });
    assert!(
        p.exists(),
        "the Tinker client tests need Python with `tinker` (scripts/setup): set SKYRL_PYTHON (tried {})",
        p.display()
    );
    p
}

/// A tiny random model in `dir/model`, served under its path as its name.
fn tiny_model(dir: &Path) -> PathBuf {
    let model = dir.join("model");
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &model, 0).unwrap();
    model
}

/// Starts a server on `data_dir` (its own store connection and model
/// thread) on a free loopback port; returns its url.
fn server(model: &Path, data_dir: &Path) -> String {
    let state = start(&ServeOptions {
        base_dir: model.to_path_buf(),
        base_name: model.display().to_string(),
        db: None,
        data_dir: data_dir.to_path_buf(),
        options: LoadOptions {
            device: tch::Device::Cpu,
            kind: tch::Kind::Float,
        },
    })
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || serve_blocking(state, listener).unwrap());
    url
}

/// Runs a mode of tinker_client.py; its last stdout line, parsed.
fn client(args: &[&str]) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tinker_client.py");
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .env("TINKER_API_KEY", "tml-local")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("run the project venv's python (scripts/setup)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tinker_client.py {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("a JSON line")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn supervised_and_rl_loops_learn_through_the_official_client() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let url = server(&model, &dir.path().join("data"));
    let base = model.display().to_string();

    let sft = client(&["sft", &url, &base]);
    let losses = floats(&sft["losses"]);
    assert_eq!(losses.len(), 10);
    assert!(
        losses[9] < 0.85 * losses[0],
        "cross_entropy losses {losses:?}"
    );

    // 16 samples per iteration, 10 iterations: the share of rewarded tokens
    // starts near half and climbs.
    let rl = client(&["rl", &url, &base]);
    let rewards = floats(&rl["rewards"]);
    let first: f64 = rewards[..3].iter().sum::<f64>() / 3.0;
    let last: f64 = rewards[7..].iter().sum::<f64>() / 3.0;
    assert!(last > first + 0.15, "rewards {rewards:?}");
}

#[test]
fn sampler_weights_and_results_survive_a_restart_and_bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let data = dir.path().join("data");
    let base = model.display().to_string();
    let first = server(&model, &data);
    let saved = client(&["save", &first, &base]);
    assert_eq!(saved["tokens"].as_array().unwrap().len(), 6);
    // One log-prob per prompt token, none for the first.
    let prompt_lp = saved["prompt_logprobs"].as_array().unwrap();
    assert!(prompt_lp[0].is_null() && prompt_lp[1..].iter().all(Value::is_f64));

    // A second server on the same state: the saved weights sample the same
    // tokens with the same log-probs, and request 1 (create_model) is still answered.
    let second = server(&model, &data);
    let again = client(&["resample", &second, saved["path"].as_str().unwrap()]);
    assert_eq!(again["tokens"], saved["tokens"]);
    let (a, b) = (floats(&saved["logprobs"]), floats(&again["logprobs"]));
    assert!(
        a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-5),
        "{a:?} vs {b:?}"
    );
    let old = client(&["retrieve", &second, "1"]);
    assert_eq!(old["body"]["type"], "create_model", "{old}");

    let errors = client(&["errors", &second, &base]);
    for key in [
        "vocab",
        "context",
        "lengths",
        "policy_inputs",
        "sampler_path",
        "num_samples",
        "big_body",
    ] {
        assert!(errors["errors"][key].is_string(), "{key}: {errors}");
    }
    assert!(floats(&errors["after"])[0].is_finite());
}

#[test]
fn saved_state_resumes_exactly_with_its_optimizer() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let url = server(&model, &dir.path().join("data"));
    let out = client(&["state", &url, &model.display().to_string()]);
    let (after, resumed) = (floats(&out["after"]), floats(&out["resumed"]));
    // The resumed client's two steps are the original's next two steps.
    for (a, b) in after.iter().zip(&resumed) {
        assert!((a - b).abs() <= 1e-5 * a.abs(), "{after:?} vs {resumed:?}");
    }
    // Without the optimizer state the first step is the same (same weights),
    // the second differs (fresh Adam moments).
    let fresh = floats(&out["fresh_optimizer"]);
    assert!((fresh[0] - after[0]).abs() <= 1e-5 * after[0].abs());
    assert!(
        (fresh[1] - after[1]).abs() > 1e-5 * after[1].abs(),
        "{fresh:?} vs {after:?}"
    );
    let path = out["path"].as_str().unwrap();
    assert!(path.ends_with("/weights/ckpt"), "{path}");
    assert!(
        out["listed"].as_array().unwrap().iter().any(|p| p == path),
        "{out}"
    );
    assert_eq!(out["lora_rank"], 8);
    let closed = out["closed"].as_str().unwrap();
    assert!(
        closed.starts_with("400") && closed.contains("finished"),
        "{closed}"
    );
}
