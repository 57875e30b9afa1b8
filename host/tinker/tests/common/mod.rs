//! Helpers of the service's integration tests: a tiny model, an in-process
//! server on loopback, the official client's script, a throw-away Postgres.

#![allow(dead_code)]

pub mod postgres;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use skyrl_model::{init_tiny_model, Arch, LoadOptions, TinySize};
use skyrl_tinker::{serve_blocking, start, ServeOptions};

/// The project venv's Python (with `tinker`), or `$SKYRL_PYTHON`.
pub fn python() -> PathBuf {
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
pub fn tiny_model(dir: &Path) -> PathBuf {
    let model = dir.join("model");
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &model, 0).unwrap();
    model
}

/// What a test server on `data_dir` (and the database `db`, default
/// SQLite in it) needs, without an API key.
pub fn options(model: &Path, data_dir: &Path, db: Option<&str>) -> ServeOptions {
    ServeOptions {
        base_dir: model.to_path_buf(),
        base_name: model.display().to_string(),
        db: db.map(str::to_string),
        data_dir: data_dir.to_path_buf(),
        api_key: None,
        options: LoadOptions {
            device: tch::Device::Cpu,
            kind: tch::Kind::Float,
        },
    }
}

/// Starts a server (its own store connection and model thread) on a free
/// loopback port; returns its url.
pub fn serve(opts: &ServeOptions) -> String {
    let state = start(opts).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || serve_blocking(state, listener).unwrap());
    url
}

/// [`serve`] of [`options`].
pub fn server(model: &Path, data_dir: &Path, db: Option<&str>) -> String {
    serve(&options(model, data_dir, db))
}

/// Runs a mode of tinker_client.py; its last stdout line, parsed.
pub fn client(args: &[&str]) -> Value {
    client_with_key(args, "tml-local")
}

/// [`client`] with `TINKER_API_KEY` set to `key`.
pub fn client_with_key(args: &[&str], key: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tinker_client.py");
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .env("TINKER_API_KEY", key)
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

pub fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The restart check, on `data` and the database `db`: a server saves
/// sampler weights (a greedy sample with prompt log-probs); a second server
/// on the same state samples the same tokens with the same log-probs from
/// them and still answers request 1 (create_model). The second server's url.
pub fn restart_keeps_saved_weights(model: &Path, data: &Path, db: Option<&str>) -> String {
    let base = model.display().to_string();
    let first = server(model, data, db);
    let saved = client(&["save", &first, &base]);
    assert_eq!(saved["tokens"].as_array().unwrap().len(), 6);
    // One log-prob per prompt token, none for the first.
    let prompt_lp = saved["prompt_logprobs"].as_array().unwrap();
    assert!(prompt_lp[0].is_null() && prompt_lp[1..].iter().all(Value::is_f64));

    let second = server(model, data, db);
    let again = client(&["resample", &second, saved["path"].as_str().unwrap()]);
    assert_eq!(again["tokens"], saved["tokens"]);
    let (a, b) = (floats(&saved["logprobs"]), floats(&again["logprobs"]));
    assert!(
        a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-5),
        "{a:?} vs {b:?}"
    );
    let old = client(&["retrieve", &second, "1"]);
    assert_eq!(old["body"]["type"], "create_model", "{old}");
    second
}
