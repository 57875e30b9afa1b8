//! The `wandb` tracker: a sidecar process running the official `wandb` Python
//! package (`$SKYRL_PYTHON`, else `python3`), driven over JSON lines on its
//! stdin/stdout. wandb's own variables apply (`WANDB_MODE=offline` writes the
//! run locally for a later `wandb sync`, `WANDB_DIR`, `WANDB_API_KEY`). A
//! sidecar that dies mid-run is restarted on the next step and resumes the same
//! run id.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use super::delivery::{Sink, Started};
use super::{RunInfo, RunStatus};
use crate::metrics::StepMetrics;

const SIDECAR: &str = include_str!("wandb_sidecar.py");
/// wandb.init may log in and reach the server: give it time.
const INIT_TIMEOUT: Duration = Duration::from_secs(180);
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts the sidecar and the run (a fresh one, or `resume_id`'s).
pub fn start(info: &RunInfo, resume_id: Option<String>) -> Result<Started> {
    let mut sidecar = Sidecar::spawn()?;
    let id = sidecar.init(info, resume_id)?;
    Ok(Started {
        sink: Box::new(WandbSink {
            info: info.clone(),
            run_id: id.clone(),
            sidecar: Some(sidecar),
        }),
        run_id: Some(id),
    })
}

struct WandbSink {
    info: RunInfo,
    run_id: String,
    sidecar: Option<Sidecar>,
}

impl WandbSink {
    fn sidecar(&mut self) -> Result<&mut Sidecar> {
        if self.sidecar.is_none() {
            tracing::warn!(run_id = %self.run_id, "wandb: restarting the sidecar");
            let mut s = Sidecar::spawn()?;
            s.init(&self.info, Some(self.run_id.clone()))?;
            self.sidecar = Some(s);
        }
        Ok(self.sidecar.as_mut().expect("set above"))
    }
}

impl Sink for WandbSink {
    fn log(&mut self, step: u64, metrics: &StepMetrics) -> Result<()> {
        // JSON has no NaN/inf: those points stay in metrics.jsonl only.
        let values: serde_json::Map<String, Value> = metrics
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let r = self
            .sidecar()?
            .call(&json!({"log": values, "step": step}), STEP_TIMEOUT);
        if r.is_err() {
            self.sidecar = None;
        }
        r.map(|_| ())
    }

    fn finish(&mut self, status: RunStatus) -> Result<()> {
        let code = match status {
            RunStatus::Finished => 0,
            RunStatus::Failed => 1,
        };
        let r = self.sidecar()?.call(&json!({"finish": code}), INIT_TIMEOUT);
        if let Some(mut s) = self.sidecar.take() {
            let _ = s.child.wait();
        }
        r.map(|_| ())
    }
}

struct Sidecar {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<std::io::Result<String>>,
}

impl Sidecar {
    fn spawn() -> Result<Self> {
        let python = std::env::var_os("SKYRL_PYTHON").unwrap_or_else(|| "python3".into());
        let mut child = Command::new(&python)
            .args(["-u", "-c", SIDECAR])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| {
                format!(
                    "cannot run {} for the wandb tracker (set SKYRL_PYTHON to a Python with wandb)",
                    python.to_string_lossy()
                )
            })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout: ChildStdout = child.stdout.take().expect("piped");
        let (tx, replies) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            replies,
        })
    }

    fn init(&mut self, info: &RunInfo, id: Option<String>) -> Result<String> {
        let reply = self.call(
            &json!({"init": {
                "project": info.project,
                "name": info.run_name,
                "id": id,
                "config": info.config,
                "dir": std::env::var("WANDB_DIR").ok(),
            }}),
            INIT_TIMEOUT,
        )?;
        let id = reply["id"]
            .as_str()
            .ok_or_else(|| anyhow!("wandb: init answered without a run id: {reply}"))?;
        tracing::info!(run_id = %id, dir = %reply["dir"], "wandb run");
        Ok(id.to_string())
    }

    /// Sends one message and waits for its answer (an `error` answer is an error).
    fn call(&mut self, msg: &Value, timeout: Duration) -> Result<Value> {
        writeln!(self.stdin, "{msg}")
            .and_then(|_| self.stdin.flush())
            .context("wandb sidecar has exited")?;
        // An import failure answers the first message, whatever it was.
        let line = match self.replies.recv_timeout(timeout) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => bail!("wandb sidecar: {e}"),
            Err(_) => {
                let _ = self.child.kill();
                bail!("wandb sidecar did not answer within {timeout:?}")
            }
        };
        let v: Value = serde_json::from_str(&line)
            .with_context(|| format!("wandb sidecar wrote a non-JSON line: {line}"))?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            bail!("wandb: {e}");
        }
        Ok(v)
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
