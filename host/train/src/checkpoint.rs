//! Resumable training checkpoints, written atomically.
//!
//! Layout under `trainer.ckpt_path`:
//! ```text
//! global_step_<N>/model.safetensors       policy weights
//! global_step_<N>/optimizer.safetensors   AdamW moments + step
//! global_step_<N>/extra/<name>.safetensors optional (critic, critic optimiser, ...)
//! global_step_<N>/trainer_state.json      step, data position, seed, KL ctrl, metrics
//! latest_ckpt_global_step.txt             N of the newest complete checkpoint
//! ```
//! A checkpoint is assembled in a hidden temp directory and renamed into place,
//! so a crash never leaves a half-written `global_step_<N>`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::dataset::DataPosition;

/// Name of the file that records the newest checkpoint step (as in skyrl-train).
pub const LATEST_FILE: &str = "latest_ckpt_global_step.txt";

/// Non-tensor training state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainerState {
    pub global_step: u64,
    pub data_position: DataPosition,
    pub seed: u64,
    /// Current in-reward KL coefficient, if a controller is used.
    pub kl_ctrl_value: Option<f64>,
    /// Last logged metrics.
    pub metrics: BTreeMap<String, f64>,
    /// Anything else the trainer wants back (e.g. the resolved config).
    #[serde(default)]
    pub extra: serde_json::Value,
}

/// Everything that goes into one checkpoint.
pub struct CheckpointData<'a> {
    pub model: &'a [(String, Tensor)],
    pub optimizer: &'a [(String, Tensor)],
    /// Additional named tensor groups, e.g. `critic`, `critic_optimizer`.
    pub extra: &'a [(&'a str, &'a [(String, Tensor)])],
    pub state: &'a TrainerState,
}

/// A checkpoint read back from disk.
pub struct LoadedCheckpoint {
    pub dir: PathBuf,
    pub model: Vec<(String, Tensor)>,
    pub optimizer: Vec<(String, Tensor)>,
    pub extra: BTreeMap<String, Vec<(String, Tensor)>>,
    pub state: TrainerState,
}

fn step_dir_name(step: u64) -> String {
    format!("global_step_{step}")
}

/// Writes checkpoint `data.state.global_step` under `root`, updates the latest
/// marker and prunes to the newest `keep` checkpoints (`keep < 0` keeps all).
/// Returns the checkpoint directory.
pub fn save_checkpoint(root: &Path, data: &CheckpointData, keep: i64) -> Result<PathBuf> {
    std::fs::create_dir_all(root)
        .with_context(|| format!("cannot create checkpoint dir {}", root.display()))?;
    let step = data.state.global_step;
    let final_dir = root.join(step_dir_name(step));
    let tmp = root.join(format!(
        ".tmp-{}-{}",
        step_dir_name(step),
        std::process::id()
    ));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    std::fs::create_dir_all(tmp.join("extra"))?;
    let write = |name: &Path, tensors: &[(String, Tensor)]| -> Result<()> {
        let cpu: Vec<(String, Tensor)> = tensors
            .iter()
            .map(|(n, t)| {
                (
                    n.clone(),
                    t.detach().to_device(tch::Device::Cpu).contiguous(),
                )
            })
            .collect();
        Tensor::write_safetensors(&cpu, name)
            .with_context(|| format!("cannot write {}", name.display()))
    };
    write(&tmp.join("model.safetensors"), data.model)?;
    write(&tmp.join("optimizer.safetensors"), data.optimizer)?;
    for (name, tensors) in data.extra {
        if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
            bail!("invalid extra checkpoint group name `{name}`");
        }
        write(
            &tmp.join("extra").join(format!("{name}.safetensors")),
            tensors,
        )?;
    }
    let state = serde_json::to_vec_pretty(data.state)?;
    std::fs::write(tmp.join("trainer_state.json"), state)?;
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir)
            .with_context(|| format!("cannot replace {}", final_dir.display()))?;
    }
    std::fs::rename(&tmp, &final_dir)
        .with_context(|| format!("cannot move checkpoint into {}", final_dir.display()))?;
    let latest_tmp = root.join(format!(".{LATEST_FILE}.tmp"));
    std::fs::write(&latest_tmp, step.to_string())?;
    std::fs::rename(&latest_tmp, root.join(LATEST_FILE))?;
    if keep > 0 {
        prune(root, keep as usize)?;
    }
    tracing::info!("saved checkpoint {}", final_dir.display());
    Ok(final_dir)
}

/// Steps of the complete checkpoints under `root`, ascending.
pub fn list_checkpoints(root: &Path) -> Result<Vec<u64>> {
    let mut steps = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return Ok(steps);
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_prefix("global_step_"))
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        if entry.path().join("trainer_state.json").is_file() {
            steps.push(n);
        }
    }
    steps.sort_unstable();
    Ok(steps)
}

fn prune(root: &Path, keep: usize) -> Result<()> {
    let steps = list_checkpoints(root)?;
    if steps.len() > keep {
        for s in &steps[..steps.len() - keep] {
            let dir = root.join(step_dir_name(*s));
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot prune {}", dir.display()))?;
        }
    }
    Ok(())
}

/// Which checkpoint to resume from: `none`/null → none; `latest` → the step in
/// the latest marker (none if absent); `from_path` → `resume_path`, which must exist.
pub fn resolve_resume(
    ckpt_root: &Path,
    resume_mode: Option<&str>,
    resume_path: Option<&str>,
) -> Result<Option<PathBuf>> {
    match resume_mode {
        None | Some("none") => Ok(None),
        Some("latest") => {
            let marker = ckpt_root.join(LATEST_FILE);
            let Ok(text) = std::fs::read_to_string(&marker) else {
                return Ok(None);
            };
            let step: u64 = text
                .trim()
                .parse()
                .with_context(|| format!("{} does not hold a step number", marker.display()))?;
            let dir = ckpt_root.join(step_dir_name(step));
            if !dir.join("trainer_state.json").is_file() {
                bail!(
                    "{} points at step {step} but {} is not a complete checkpoint",
                    marker.display(),
                    dir.display()
                );
            }
            Ok(Some(dir))
        }
        Some("from_path") => {
            let p = PathBuf::from(resume_path.context("resume_mode=from_path needs resume_path")?);
            if !p.join("trainer_state.json").is_file() {
                bail!(
                    "{} is not a checkpoint directory (no trainer_state.json)",
                    p.display()
                );
            }
            Ok(Some(p))
        }
        Some(other) => bail!("unknown resume_mode `{other}`"),
    }
}

/// Reads a checkpoint directory written by [`save_checkpoint`].
pub fn load_checkpoint(dir: &Path) -> Result<LoadedCheckpoint> {
    let read = |name: &Path| {
        Tensor::read_safetensors(name).with_context(|| format!("cannot read {}", name.display()))
    };
    let state_path = dir.join("trainer_state.json");
    let state: TrainerState = serde_json::from_slice(
        &std::fs::read(&state_path)
            .with_context(|| format!("cannot read {}", state_path.display()))?,
    )
    .with_context(|| format!("{} is malformed", state_path.display()))?;
    let mut extra = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("extra")) {
        for entry in entries {
            let path = entry?.path();
            if let Some(stem) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".safetensors"))
            {
                extra.insert(stem.to_string(), read(&path)?);
            }
        }
    }
    Ok(LoadedCheckpoint {
        dir: dir.to_path_buf(),
        model: read(&dir.join("model.safetensors"))?,
        optimizer: read(&dir.join("optimizer.safetensors"))?,
        extra,
        state,
    })
}
