//! `skyrl tinker-serve` on two ranks (torchrun's variables, Gloo on
//! loopback, one torch thread each) against one process: the official
//! client's LoRA training gives the same losses, gradient norms and
//! log-probs; a killed rank fails training requests with the reason while
//! rank 0 goes on sampling. And the start-up checks of the command.

mod common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::repo;
use serde_json::Value;
use skyrl_model::{init_tiny_model, Arch, TinySize};

/// Kills the servers when a test ends, passed or not.
struct Servers(Vec<Child>);

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn tinker_serve(model: &Path, data: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_skyrl"));
    c.arg("tinker-serve")
        .arg("--base-model")
        .arg(model)
        .arg("--data-dir")
        .arg(data)
        .args(["--port", "0", "--dist-timeout-s", "60"])
        .env("OMP_NUM_THREADS", "1")
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("SLURM_PROCID")
        .env_remove("SKYRL_TINKER_API_KEY")
        .stderr(Stdio::null());
    c
}

/// Reads rank 0's `listening on` line: the server's url.
fn url_of(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix(skyrl_serve::LISTENING_PREFIX)
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    format!("http://{addr}")
}

/// One process on `data`.
fn one_process(model: &Path, data: &Path) -> (Servers, String) {
    let mut child = tinker_serve(model, data)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let url = url_of(&mut child);
    (Servers(vec![child]), url)
}

/// Two ranks with torchrun's variables, sharing `data`.
fn two_ranks(model: &Path, data: &Path) -> (Servers, String) {
    let port = free_port().to_string();
    let mut ranks: Vec<Child> = (0..2)
        .map(|r| {
            tinker_serve(model, data)
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", "2")
                .env("LOCAL_RANK", r.to_string())
                .env("LOCAL_WORLD_SIZE", "2")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let url = url_of(&mut ranks[0]);
    (Servers(ranks), url)
}

/// Runs a mode of the tinker crate's client script; its last line, parsed.
fn client(args: &[&str]) -> Value {
    let out = Command::new(common::python())
        .arg(repo().join("host/tinker/tests/tinker_client.py"))
        .args(args)
        .env("TINKER_API_KEY", "tml-local")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("run the project venv's python (scripts/setup)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tinker_client.py {args:?}:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("a JSON line")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|x| match x.as_array() {
            Some(row) => row.iter().map(|y| y.as_f64().unwrap()).collect(),
            None => vec![x.as_f64().unwrap()],
        })
        .collect()
}

fn assert_close(what: &str, a: &[f64], b: &[f64]) {
    assert_eq!(a.len(), b.len(), "{what}: {a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        // Sums over ranks add in another order: float rounding only.
        assert!(
            (x - y).abs() <= 1e-5 * x.abs().max(y.abs()) + 1e-6,
            "{what}: {a:?} vs {b:?}"
        );
    }
}

#[test]
fn two_ranks_train_as_one_process_behind_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &model, 0).unwrap();
    let base = model.display().to_string();

    let (one, url) = one_process(&model, &dir.path().join("one"));
    let single = client(&["dp", &url, &base]);
    drop(one);
    let (mut ranks, url) = two_ranks(&model, &dir.path().join("two"));
    let split = client(&["dp", &url, &base]);
    for key in ["losses", "norms", "logprobs"] {
        assert_close(key, &floats(&single[key]), &floats(&split[key]));
    }
    // The losses move: the ranks trained (the same steps).
    let losses = floats(&split["losses"]);
    assert!(losses[3] < losses[0], "{losses:?}");

    // Rank 1 dies: training fails with the reason, sampling goes on.
    let rank1 = &mut ranks.0[1];
    rank1.kill().unwrap();
    rank1.wait().unwrap();
    let killed = std::time::Instant::now();
    let after = client(&["dead", &url, &base]);
    let train = after["train"].as_str().unwrap();
    assert!(train.contains("ranks") && train.contains("[1]"), "{train}");
    // Found by the heartbeats, well before the 60 s timeout.
    assert!(killed.elapsed().as_secs() < 30, "{:?}", killed.elapsed());
    assert_eq!(after["sampled"], 4);
}

#[test]
fn tinker_serve_refuses_bad_keys_and_open_hosts_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &model, 0).unwrap();
    let run = |extra: &[&str]| {
        let out = tinker_serve(&model, &dir.path().join("data"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{extra:?} started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let open = run(&["--host", "0.0.0.0"]);
    assert!(
        open.contains("--api-key") && open.contains("--insecure-no-auth"),
        "{open}"
    );
    let bad = run(&["--api-key", "not-a-tinker-key"]);
    assert!(bad.contains("--api-key") && bad.contains("tml-"), "{bad}");
    let db = run(&["--db", "mysql://u:secret@h/db"]);
    assert!(db.contains("--db") && !db.contains("secret"), "{db}");
}
