//! Experiment trackers (`trainer.logger`): TensorBoard event files written
//! natively, MLflow over its REST API, and wandb through its own Python package
//! in a sidecar process; plus the console line. `metrics.jsonl` is written by
//! [`crate::metrics::MetricsLog`] whatever the trackers do.
//!
//! Every remote tracker starts before training (a tracker that cannot start is
//! an error naming it) and then runs on its own thread: a step it cannot deliver
//! is retried with backoff and, at worst, dropped with a warning; training never
//! waits on it or stops for it.

mod delivery;
mod mlflow;
mod tensorboard;
mod tfevents;
mod wandb;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub use delivery::{Delivery, Retry, Sink, Started};
pub use tfevents::{EventWriter, ScalarEvent};

use crate::metrics::StepMetrics;

/// One tracker name of `trainer.logger`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TrackerKind {
    /// `log_path/metrics.jsonl` only (always written; naming it adds nothing).
    Jsonl,
    /// One line of every metric per step on stderr.
    Console,
    /// Event files under `trainer.log_path/tensorboard`.
    Tensorboard,
    /// A run on the MLflow server at `$MLFLOW_TRACKING_URI`.
    Mlflow,
    /// A wandb run (honours `WANDB_MODE`, `WANDB_DIR`, `WANDB_API_KEY`).
    Wandb,
}

impl TrackerKind {
    /// Parses a SkyRL tracker name; the error says what is accepted.
    pub fn parse(name: &str) -> Result<Self, String> {
        Ok(match name {
            "jsonl" => Self::Jsonl,
            "console" => Self::Console,
            "tensorboard" => Self::Tensorboard,
            "mlflow" => Self::Mlflow,
            "wandb" => Self::Wandb,
            "swanlab" => {
                return Err("trainer.logger: `swanlab` is not supported; use tensorboard, mlflow or wandb".into())
            }
            other => {
                return Err(format!(
                    "trainer.logger: unknown tracker `{other}` (known: console, tensorboard, mlflow, wandb, jsonl; \
                     metrics.jsonl is always written)"
                ))
            }
        })
    }

    /// The name as written in the config.
    pub fn name(self) -> &'static str {
        match self {
            Self::Jsonl => "jsonl",
            Self::Console => "console",
            Self::Tensorboard => "tensorboard",
            Self::Mlflow => "mlflow",
            Self::Wandb => "wandb",
        }
    }
}

/// Parses every name of `trainer.logger` (duplicates refused).
pub fn parse_trackers(names: &[String]) -> Result<Vec<TrackerKind>, String> {
    let mut out = Vec::new();
    for n in names {
        let k = TrackerKind::parse(n.trim())?;
        if out.contains(&k) {
            return Err(format!("trainer.logger: `{n}` is listed twice"));
        }
        out.push(k);
    }
    Ok(out)
}

/// How a run ended, as reported to the trackers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Finished,
    Failed,
}

/// What the trackers need to know about the run.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// `trainer.project_name` (wandb project, MLflow experiment).
    pub project: String,
    /// `trainer.run_name`.
    pub run_name: String,
    /// `trainer.log_path`: TensorBoard files and the tracker run ids live here.
    pub log_dir: PathBuf,
    /// The whole config (wandb config, MLflow params, a TensorBoard text summary).
    pub config: serde_json::Value,
    /// A resumed run continues the trackers' runs recorded in `log_dir`.
    pub resuming: bool,
}

/// Run ids of remote trackers, kept in `log_path/trackers.json` so a resumed
/// run appends to the same MLflow / wandb run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RunIds {
    #[serde(default)]
    ids: BTreeMap<String, String>,
}

const RUN_IDS_FILE: &str = "trackers.json";

impl RunIds {
    fn load(dir: &Path) -> Self {
        std::fs::read_to_string(dir.join(RUN_IDS_FILE))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(RUN_IDS_FILE);
        std::fs::write(&path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// The running trackers of one run (rank 0 only).
pub struct Trackers {
    console: bool,
    remote: Vec<Delivery>,
    finished: bool,
}

/// How long [`Trackers::finish`] waits for each tracker to drain.
pub const FINISH_TIMEOUT: Duration = Duration::from_secs(120);

impl Trackers {
    /// No trackers at all (other ranks, tests).
    pub fn none() -> Self {
        Self {
            console: false,
            remote: Vec::new(),
            finished: true,
        }
    }

    /// Starts every tracker in `kinds`; the first that cannot start is an error
    /// naming it (the ones already started are closed as failed).
    pub fn start(kinds: &[TrackerKind], info: &RunInfo) -> Result<Self> {
        let mut ids = match info.resuming {
            true => RunIds::load(&info.log_dir),
            false => RunIds::default(),
        };
        let mut out = Self {
            console: kinds.contains(&TrackerKind::Console),
            remote: Vec::new(),
            finished: false,
        };
        for &kind in kinds {
            let resume_id = ids.ids.get(kind.name()).cloned();
            let info = info.clone();
            let start: Box<dyn FnOnce() -> Result<Started> + Send> = match kind {
                TrackerKind::Console | TrackerKind::Jsonl => continue,
                TrackerKind::Tensorboard => Box::new(move || tensorboard::start(&info)),
                TrackerKind::Mlflow => Box::new(move || mlflow::start(&info, resume_id)),
                TrackerKind::Wandb => Box::new(move || wandb::start(&info, resume_id)),
            };
            let d = Delivery::spawn(kind.name(), Retry::default(), start)
                .with_context(|| format!("trainer.logger: {} cannot start", kind.name()))?;
            if let Some(id) = d.run_id() {
                ids.ids.insert(kind.name().to_string(), id.to_string());
            }
            tracing::info!(tracker = kind.name(), "tracker started");
            out.remote.push(d);
        }
        if !out.remote.is_empty() {
            ids.save(&info.log_dir)?;
        }
        Ok(out)
    }

    /// Whether the console line is wanted.
    pub fn console(&self) -> bool {
        self.console
    }

    /// Hands `metrics` of `step` to every remote tracker (never blocks on them).
    pub fn log(&self, step: u64, metrics: &StepMetrics) {
        for d in &self.remote {
            d.log(step, metrics.clone());
        }
    }

    /// Closes every tracker with `status`, waiting up to [`FINISH_TIMEOUT`] each.
    pub fn finish(&mut self, status: RunStatus) {
        if self.finished {
            return;
        }
        self.finished = true;
        for d in &mut self.remote {
            d.finish(status, FINISH_TIMEOUT);
        }
    }
}

impl Drop for Trackers {
    /// A run that ends without [`Trackers::finish`] (an error) is reported failed.
    fn drop(&mut self) {
        self.finish(RunStatus::Failed);
    }
}

/// The console line of one step: `step N | key value | ...`, every metric.
pub fn console_line(step: u64, metrics: &StepMetrics) -> String {
    let mut line = format!("step {step}");
    for (k, v) in metrics {
        line.push_str(&format!(" | {k} {}", format_value(*v)));
    }
    line
}

fn format_value(v: f64) -> String {
    if v.is_finite() && v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.4}")
    }
}
