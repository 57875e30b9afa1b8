//! Resumable training checkpoints, written atomically.
//!
//! Layout under `trainer.ckpt_path`:
//! ```text
//! global_step_<N>/model.safetensors       policy weights (its LoRA adapters, with LoRA)
//! global_step_<N>/lora_adapter/           with LoRA: the adapter in PEFT's format
//! global_step_<N>/optimizer.safetensors   AdamW moments (+ fp32 master weights) + step
//! global_step_<N>/optimizer/layout.json   or, sharded (`fsdp`): the flat layout and world size,
//! global_step_<N>/optimizer/rank<R>.safetensors   and each rank's shard of master/moments
//! global_step_<N>/extra/<name>.safetensors optional (critic, critic optimiser, ...)
//! global_step_<N>/trainer_state.json      step, data position, seed, KL ctrl, metrics
//! latest_ckpt_global_step.txt             N of the newest complete checkpoint
//! ```
//! A checkpoint is assembled in a hidden staging directory and renamed into
//! place, so a crash never leaves a half-written `global_step_<N>`. Several
//! ranks write into the same staging directory (each its optimizer shard);
//! rank 0 writes the rest and commits. A sharded optimizer state is read
//! back as the per-parameter state, whatever world size wrote it, so a run
//! resumes on any number of ranks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::dataset::DataPosition;
use crate::optim::flat::FlatLayout;

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
    let staging = prepare_staging(root, data.state.global_step)?;
    write_staged(&staging, data)?;
    commit_staged(root, &staging, data.state.global_step, keep)
}

/// The directory of step `step`'s checkpoint under `root`.
pub fn step_dir(root: &Path, step: u64) -> PathBuf {
    root.join(step_dir_name(step))
}

/// The staging directory of step `step`'s checkpoint (the same on every rank).
pub fn staging_dir(root: &Path, step: u64) -> PathBuf {
    root.join(format!(".tmp-{}", step_dir_name(step)))
}

/// Creates an empty staging directory for step `step` (rank 0, before the
/// other ranks write their shards).
pub fn prepare_staging(root: &Path, step: u64) -> Result<PathBuf> {
    std::fs::create_dir_all(root)
        .with_context(|| format!("cannot create checkpoint dir {}", root.display()))?;
    let tmp = staging_dir(root, step);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    std::fs::create_dir_all(tmp.join("extra"))?;
    Ok(tmp)
}

/// Writes named tensors as safetensors (CPU, contiguous).
fn write_tensors(path: &Path, tensors: &[(String, Tensor)]) -> Result<()> {
    let cpu: Vec<(String, Tensor)> = tensors
        .iter()
        .map(|(n, t)| {
            (
                n.clone(),
                t.detach().to_device(tch::Device::Cpu).contiguous(),
            )
        })
        .collect();
    Tensor::write_safetensors(&cpu, path)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes the model, the optimizer state (unless empty: a sharded one is
/// written by [`write_optimizer_shard`]), extra groups and the trainer state
/// into `staging`.
pub fn write_staged(staging: &Path, data: &CheckpointData) -> Result<()> {
    write_tensors(&staging.join("model.safetensors"), data.model)?;
    if !data.optimizer.is_empty() {
        write_tensors(&staging.join("optimizer.safetensors"), data.optimizer)?;
    }
    for (name, tensors) in data.extra {
        if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
            bail!("invalid extra checkpoint group name `{name}`");
        }
        write_tensors(
            &staging.join("extra").join(format!("{name}.safetensors")),
            tensors,
        )?;
    }
    let state = serde_json::to_vec_pretty(data.state)?;
    std::fs::write(staging.join("trainer_state.json"), state)?;
    Ok(())
}

/// Writes rank `rank`'s shard of a sharded optimizer state into `staging`;
/// rank 0 also writes the layout.
pub fn write_optimizer_shard(
    staging: &Path,
    rank: usize,
    layout: &FlatLayout,
    shard: &[(String, Tensor)],
) -> Result<()> {
    let dir = staging.join("optimizer");
    std::fs::create_dir_all(&dir)?;
    if rank == 0 {
        std::fs::write(dir.join("layout.json"), serde_json::to_vec_pretty(layout)?)?;
    }
    write_tensors(&dir.join(format!("rank{rank}.safetensors")), shard)
}

/// Moves `staging` into place as step `step`, updates the latest marker and prunes.
pub fn commit_staged(root: &Path, staging: &Path, step: u64, keep: i64) -> Result<PathBuf> {
    let final_dir = step_dir(root, step);
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir)
            .with_context(|| format!("cannot replace {}", final_dir.display()))?;
    }
    std::fs::rename(staging, &final_dir)
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

/// The per-parameter optimizer state of a sharded checkpoint: every rank's
/// flat shard joined and cut back into `exp_avg.<name>`, `exp_avg_sq.<name>`,
/// `master.<name>` and `step`.
fn read_sharded_optimizer(dir: &Path) -> Result<Vec<(String, Tensor)>> {
    let layout_path = dir.join("layout.json");
    let layout: FlatLayout = serde_json::from_slice(
        &std::fs::read(&layout_path)
            .with_context(|| format!("cannot read {}", layout_path.display()))?,
    )
    .with_context(|| format!("{} is malformed", layout_path.display()))?;
    let mut parts: BTreeMap<String, Vec<Tensor>> = BTreeMap::new();
    let mut step = None;
    for rank in 0..layout.world {
        let path = dir.join(format!("rank{rank}.safetensors"));
        let shard = Tensor::read_safetensors(&path).with_context(|| {
            format!(
                "cannot read {} (a checkpoint written by {} ranks needs every shard)",
                path.display(),
                layout.world
            )
        })?;
        for (name, t) in shard {
            if name == "step" {
                step = Some(t);
            } else {
                parts.entry(name).or_default().push(t);
            }
        }
    }
    let mut out = vec![(
        "step".to_string(),
        step.context("sharded optimizer state has no `step`")?,
    )];
    for (prefix, shards) in parts {
        let flat = Tensor::cat(&shards, 0);
        for (name, t) in layout.unflatten(&flat)? {
            out.push((format!("{prefix}.{name}"), t.copy()));
        }
    }
    Ok(out)
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
            let dir = step_dir(root, *s);
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
            let dir = step_dir(ckpt_root, step);
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
        optimizer: if dir.join("optimizer.safetensors").is_file() {
            read(&dir.join("optimizer.safetensors"))?
        } else {
            read_sharded_optimizer(&dir.join("optimizer"))?
        },
        extra,
        state,
    })
}
