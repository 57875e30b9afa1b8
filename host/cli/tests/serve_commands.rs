//! `skyrl serve` as a real process: OpenAI-compatible completions with token
//! ids and logprobs, chat, pause/resume, weight reload from a checkpoint, and
//! the engine-sizing flags.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn skyrl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_skyrl"))
}

/// An HTTP client (reqwest is built with rustls and no default crypto provider).
fn http() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::new()
}

fn init_model(dir: &Path, seed: u64) -> PathBuf {
    let out = dir.join(format!("tiny{seed}"));
    let status = skyrl()
        .args([
            "model",
            "init",
            "--out",
            out.to_str().unwrap(),
            "--seed",
            &seed.to_string(),
        ])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    out
}

/// A running `skyrl serve`, killed on drop.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(model: &Path) -> Self {
        Self::start_with(model, &[])
    }

    fn start_with(model: &Path, flags: &[&str]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = skyrl()
            .args([
                "serve",
                "--model",
                model.to_str().unwrap(),
                "--port",
                &port.to_string(),
            ])
            .args(flags)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while http()
            .get(format!("{}/health", server.base))
            .send()
            .is_err()
        {
            assert!(Instant::now() < deadline, "skyrl serve did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let resp = http()
            .post(format!("{}{path}", self.base))
            .json(&body)
            .timeout(Duration::from_secs(60))
            .send()
            .unwrap();
        (resp.status().as_u16(), resp.json().unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn greedy(server: &Server) -> Value {
    let (code, body) = server.post(
        "/v1/completions",
        json!({"prompt": [1, 2, 3], "max_tokens": 6, "temperature": 0, "logprobs": 1, "return_token_ids": true}),
    );
    assert_eq!(code, 200, "{body}");
    body
}

#[test]
fn serves_completions_chat_pause_and_weight_reload() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (init_model(dir.path(), 1), init_model(dir.path(), 2));
    let root = dir.path().to_str().unwrap();
    let server = Server::start_with(
        &a,
        &[
            "--max-num-seqs",
            "4",
            "--block-size",
            "8",
            "--no-enable-prefix-caching",
            "--weights-root",
            root,
        ],
    );

    let first = greedy(&server);
    let choice = &first["choices"][0];
    assert_eq!(choice["prompt_token_ids"], json!([1, 2, 3]));
    assert_eq!(choice["token_ids"].as_array().unwrap().len(), 6);
    assert_eq!(choice["finish_reason"], "length");
    let lps = choice["logprobs"]["token_logprobs"].as_array().unwrap();
    assert_eq!(lps.len(), 6);
    assert!(lps.iter().all(|x| x.as_f64().unwrap() < 0.0));
    assert_eq!(first["usage"]["total_tokens"], 9);
    assert_eq!(
        greedy(&server)["choices"],
        first["choices"],
        "greedy is deterministic"
    );

    let (code, chat) = server.post(
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0}),
    );
    assert_eq!(code, 200, "{chat}");
    assert_eq!(chat["choices"][0]["message"]["role"], "assistant");

    // Paused: requests wait; resumed: they finish.
    assert_eq!(server.post("/pause_generation", json!({})).0, 200);
    let base = server.base.clone();
    let waiting = std::thread::spawn(move || {
        http()
            .post(format!("{base}/v1/completions"))
            .json(&json!({"prompt": [1, 2], "max_tokens": 2}))
            .send()
            .unwrap()
            .status()
            .as_u16()
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(!waiting.is_finished(), "generation must wait while paused");
    assert_eq!(server.post("/continue_generation", json!({})).0, 200);
    assert_eq!(waiting.join().unwrap(), 200);

    // Reload weights from another checkpoint: outputs match a server started on it.
    let (code, up) = server.post("/update_weights_from_disk", json!({"model_path": b}));
    assert_eq!(code, 200, "{up}");
    assert_eq!(up["weight_version"], 1);
    let reloaded = greedy(&server);
    assert_eq!(reloaded["weight_version"], 1);
    let reference = Server::start(&b);
    assert_eq!(reloaded["choices"], greedy(&reference)["choices"]);
    assert_ne!(
        reloaded["choices"][0]["logprobs"],
        first["choices"][0]["logprobs"]
    );

    // Bad inputs are OpenAI-style 400s that leave the server serving.
    let (code, err) = server.post(
        "/update_weights_from_disk",
        json!({"model_path": "/nonexistent"}),
    );
    assert_eq!(code, 400);
    // Outside the weights root, directly or through a symbolic link: refused,
    // naming only the requested path; the weights stay.
    let outside = tempfile::tempdir().unwrap();
    let c = init_model(outside.path(), 3);
    std::os::unix::fs::symlink(&c, dir.path().join("link")).unwrap();
    for path in [c.clone(), dir.path().join("link"), dir.path().join("../..")] {
        let (code, err) = server.post("/update_weights_from_disk", json!({"model_path": path}));
        assert_eq!(code, 400, "{path:?}: {err}");
        let msg = err["error"]["message"].as_str().unwrap();
        assert!(msg.contains("--weights-root"), "{msg}");
        if path != c {
            assert!(!msg.contains(c.to_str().unwrap()), "{msg}");
        }
    }
    assert_eq!(greedy(&server)["weight_version"], 1);
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent"),
        "{err}"
    );
    let (code, err) = server.post("/v1/completions", json!({"prompt": [1], "temperature": -1}));
    assert_eq!(code, 400, "{err}");
    let (code, err) = server.post("/v1/completions", json!({"prompt": [1], "n": 5}));
    assert_eq!(code, 400, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_num_seqs = 4"),
        "{err}"
    );
    assert_eq!(greedy(&server)["weight_version"], 1);
}

#[test]
fn a_kv_cache_too_small_for_one_sequence_stops_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let model = init_model(dir.path(), 1);
    let out = skyrl()
        .args(["serve", "--model", model.to_str().unwrap(), "--port", "0"])
        .args(["--kv-cache-memory-bytes", "64KiB"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot hold one sequence"), "{err}");
}

#[test]
fn a_reachable_address_without_keys_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let model = init_model(dir.path(), 1);
    let serve = |extra: &[&str]| {
        skyrl()
            .args(["serve", "--model", model.to_str().unwrap(), "--port", "0"])
            .args(["--host", "0.0.0.0"])
            .args(extra)
            .env_remove("SKYRL_API_KEY")
            .env_remove("SKYRL_ADMIN_KEY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let out = serve(&[]).wait_with_output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--api-key") && err.contains("--insecure-no-auth"),
        "{err}"
    );
    // With the override it starts (and warns).
    let mut child = serve(&["--insecure-no-auth"]);
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(line.contains("0.0.0.0:"), "{line}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--insecure-no-auth"),
        "no warning"
    );
}
