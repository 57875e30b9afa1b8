//! `trainer.logger`: a short run reporting to TensorBoard, a real MLflow server
//! (started on loopback) and wandb in offline mode, each read back with its own
//! Python package and compared with metrics.jsonl; and a tracker that cannot
//! start stopping the run before training.

mod common;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{python, repo, text};
use serde_json::Value;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An `mlflow server` on loopback in its own process group, killed with its
/// workers (uvicorn, job runners) on drop.
struct MlflowServer {
    child: Child,
    uri: String,
}

impl MlflowServer {
    fn start(dir: &Path) -> Self {
        let port = free_port();
        let mlflow = python().with_file_name("mlflow");
        let child = Command::new(&mlflow)
            .args([
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--workers",
                "1",
            ])
            .arg("--backend-store-uri")
            .arg(format!("sqlite:///{}", dir.join("mlflow.db").display()))
            .arg("--default-artifact-root")
            .arg(dir.join("artifacts"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} (scripts/setup installs it): {e}",
                    mlflow.display()
                )
            });
        let uri = format!("http://127.0.0.1:{port}");
        let server = Self { child, uri };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "mlflow server did not start"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }
}

impl Drop for MlflowServer {
    fn drop(&mut self) {
        // `mlflow server` forks workers that outlive a kill of the parent.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn train(dir: &Path, logger: &str, envs: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skyrl"));
    let plugin = format!("string_transform={}", common::plugin("string_transform"));
    cmd.args(["train", "--quiet", "--plugin", &plugin])
        .args(["--config", "configs/demo.yaml", "--max-steps", "2"])
        .arg(format!("trainer.logger={logger}"))
        .arg(format!("trainer.ckpt_path={}", dir.join("ckpts").display()))
        .arg(format!(
            "trainer.export_path={}",
            dir.join("exports").display()
        ))
        .arg(format!("trainer.log_path={}", dir.join("logs").display()))
        .args([
            "trainer.project_name=skyrl-tracker-test",
            "trainer.run_name=tiny-run",
            "trainer.train_batch_size=4",
            "trainer.policy_mini_batch_size=4",
            "trainer.micro_train_batch_size_per_gpu=8",
            "trainer.eval_interval=2",
            "trainer.eval_before_train=false",
            "trainer.ckpt_interval=-1",
            "generator.n_samples_per_prompt=2",
        ])
        .current_dir(repo())
        .env("SKYRL_PYTHON", python())
        .env(
            "SKYRL_CACHE_DIR",
            std::env::temp_dir().join("skyrl-cli-test-cache"),
        );
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("running skyrl")
}

/// metrics.jsonl as step -> {name -> value} (finite values only).
fn jsonl(dir: &Path) -> BTreeMap<u64, BTreeMap<String, f64>> {
    let text = std::fs::read_to_string(dir.join("logs/metrics.jsonl")).unwrap();
    let mut out: BTreeMap<u64, BTreeMap<String, f64>> = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let step = v["step"].as_u64().unwrap();
        for (k, x) in v.as_object().unwrap() {
            if let (true, Some(x)) = (k != "step", x.as_f64()) {
                out.entry(step).or_default().insert(k.clone(), x);
            }
        }
    }
    out
}

/// Runs a Python snippet printing one JSON object of `{step: {name: value}}`.
fn read_back(script: &str, args: &[&str]) -> BTreeMap<u64, BTreeMap<String, f64>> {
    let out = Command::new(python())
        .args(["-c", script])
        .args(args)
        .output()
        .expect("python");
    assert!(out.status.success(), "{}", text(&out));
    let v: BTreeMap<String, BTreeMap<String, f64>> =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    v.into_iter()
        .map(|(k, m)| (k.parse().unwrap(), m))
        .collect()
}

/// Every metric of every step, as the tracker holds it, equals metrics.jsonl
/// (TensorBoard stores f32).
fn assert_same(
    tracker: &str,
    got: &BTreeMap<u64, BTreeMap<String, f64>>,
    want: &BTreeMap<u64, BTreeMap<String, f64>>,
    tol: f64,
) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{tracker}: steps"
    );
    for (step, m) in want {
        let g = &got[step];
        assert_eq!(
            g.keys().collect::<Vec<_>>(),
            m.keys().collect::<Vec<_>>(),
            "{tracker}: names at step {step}"
        );
        for (k, v) in m {
            let d = (g[k] - v).abs();
            assert!(
                d <= tol * v.abs().max(1.0),
                "{tracker}: step {step} {k}: {} vs {v}",
                g[k]
            );
        }
    }
}

const TENSORBOARD: &str = r#"
import json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0, "tensors": 0})
acc.Reload()
out = {}
for tag in acc.Tags()["scalars"]:
    for e in acc.Scalars(tag):
        out.setdefault(str(e.step), {})[tag] = e.value
cfg = acc.Tensors("config")[0].tensor_proto.string_val[0].decode()
assert '"project_name": "skyrl-tracker-test"' in cfg, cfg
print(json.dumps(out))
"#;

const MLFLOW: &str = r#"
import json, sys
from mlflow.tracking import MlflowClient
c = MlflowClient(sys.argv[1])
exp = c.get_experiment_by_name("skyrl-tracker-test")
runs = c.search_runs([exp.experiment_id])
assert len(runs) == 1, runs
r = runs[0]
assert r.info.run_name == "tiny-run", r.info.run_name
assert r.info.status == "FINISHED", r.info.status
assert r.data.params["trainer.run_name"] == "tiny-run"
assert r.data.params["generator.n_samples_per_prompt"] == "2"
out = {}
for key in r.data.metrics:
    for m in c.get_metric_history(r.info.run_id, key):
        out.setdefault(str(m.step), {})[key] = m.value
print(json.dumps(out))
"#;

/// Scans wandb's offline run file (LevelDB log framing around wandb's Record
/// protobufs) for history records and the config.
const WANDB: &str = r#"
import glob, json, struct, sys
from wandb.proto import wandb_internal_pb2 as pb
runs = glob.glob(sys.argv[1] + "/wandb/offline-run-*/run-*.wandb")
assert len(runs) == 1, runs
data = open(runs[0], "rb").read()
assert data[:4] == b":W&B", data[:7]
BLOCK, pos, buf, out, config = 32768, 7, b"", {}, {}
while pos + 7 <= len(data):
    if BLOCK - pos % BLOCK < 7:
        pos += BLOCK - pos % BLOCK
        continue
    _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
    buf += data[pos + 7:pos + 7 + length]
    pos += 7 + length
    if kind in (1, 4):
        rec = pb.Record()
        rec.ParseFromString(buf)
        buf = b""
        which = rec.WhichOneof("record_type")
        if which == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
            step = items.pop("_step", rec.history.step.num)
            out[str(step)] = {k: v for k, v in items.items() if not k.startswith("_")}
        elif which in ("config", "run"):
            updates = rec.config.update if which == "config" else rec.run.config.update
            for u in updates:
                config[u.key or "/".join(u.nested_key)] = json.loads(u.value_json)
assert config.get("trainer", {}).get("run_name") == "tiny-run", sorted(config)
print(json.dumps(out))
"#;

#[test]
fn tensorboard_mlflow_and_wandb_hold_every_step_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let mlflow = MlflowServer::start(dir.path());
    let wandb_dir = dir.path().join("wandb-runs");
    std::fs::create_dir_all(&wandb_dir).unwrap();
    let out = train(
        dir.path(),
        "[console,tensorboard,mlflow,wandb]",
        &[
            ("MLFLOW_TRACKING_URI", mlflow.uri.clone()),
            ("WANDB_MODE", "offline".into()),
            ("WANDB_DIR", wandb_dir.display().to_string()),
            ("WANDB_SILENT", "true".into()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    // The console line of each step.
    assert!(text(&out).contains("step 2 | "), "{}", text(&out));
    let want = jsonl(dir.path());
    assert_eq!(want.len(), 2, "two steps in metrics.jsonl");

    let tb = read_back(
        TENSORBOARD,
        &[&dir.path().join("logs/tensorboard").display().to_string()],
    );
    assert_same("tensorboard", &tb, &want, 1e-6);
    let ml = read_back(MLFLOW, &[&mlflow.uri]);
    assert_same("mlflow", &ml, &want, 1e-12);
    let wb = read_back(WANDB, &[&wandb_dir.display().to_string()]);
    assert_same("wandb", &wb, &want, 1e-12);

    let ids: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("logs/trackers.json")).unwrap(),
    )
    .unwrap();
    assert!(
        ids["ids"]["mlflow"].is_string() && ids["ids"]["wandb"].is_string(),
        "{ids}"
    );
}

#[test]
fn a_tracker_that_cannot_start_stops_the_run_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port(); // nothing listens there
    let out = train(
        dir.path(),
        "[tensorboard,mlflow]",
        &[("MLFLOW_TRACKING_URI", format!("http://127.0.0.1:{port}"))],
    );
    common::assert_fails_with(&out, "trainer.logger: mlflow cannot start");
    let metrics =
        std::fs::read_to_string(dir.path().join("logs/metrics.jsonl")).unwrap_or_default();
    assert_eq!(metrics.lines().count(), 0, "no step ran: {metrics}");

    let out = train(dir.path(), "[tensorboard,swanlab]", &[]);
    common::assert_fails_with(&out, "`swanlab` is not supported");
}
