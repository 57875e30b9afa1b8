//! vLLM as an inference engine: the wire types of the control endpoints
//! SkyRL drives vLLM servers with (`docs/inference.md` has the table), and
//! finding and launching `vllm serve` for `generator.inference_engine.backend: vllm`.
//!
//! Sources: SkyRL 0.3.0 `skyrl/backends/skyrl_train/inference_servers/
//! remote_inference_client.py` (the calls and payloads),
//! `.../weight_sync/broadcast_strategy.py` (`BroadcastInitInfo.to_api_payload`),
//! vLLM 0.20 `vllm/entrypoints/serve/{rlhf,sleep,cache,rpc}/api_router.py`
//! and `vllm/distributed/weight_transfer/nccl_engine.py` (the server side).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// `init_info` of `POST /init_weight_transfer_engine` (NCCL backend): join
/// the group whose rank 0 hosts a torch store at `master_address:master_port`;
/// this server's workers take ranks `rank_offset ..`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcclInitInfo {
    pub master_address: String,
    pub master_port: u16,
    pub rank_offset: i32,
    pub world_size: i32,
}

/// Body of `POST /init_weight_transfer_engine`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitWeightTransferRequest {
    pub init_info: NcclInitInfo,
}

/// vLLM's default packed-broadcast buffer (1 GiB).
pub const DEFAULT_PACKED_BUFFER_BYTES: u64 = 1 << 30;

fn default_packed_buffer() -> u64 {
    DEFAULT_PACKED_BUFFER_BYTES
}

fn default_num_buffers() -> u32 {
    2
}

fn yes() -> bool {
    true
}

/// `update_info` of `POST /update_weights` (and of SkyRL's
/// `/collective_rpc update_weights_nccl`): receive these tensors, in order,
/// by NCCL broadcast from rank 0. With `packed`, consecutive tensors travel
/// as raw bytes in one `uint8` broadcast per buffer: tensors are added while
/// the total is at most `packed_buffer_size_bytes`, and the tensor that
/// takes it over closes the buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightUpdateInfo {
    pub names: Vec<String>,
    /// torch dtype names without `torch.`: `bfloat16`, `float16`, `float32`.
    pub dtype_names: Vec<String>,
    pub shapes: Vec<Vec<i64>>,
    #[serde(default)]
    pub packed: bool,
    #[serde(default = "default_packed_buffer")]
    pub packed_buffer_size_bytes: u64,
    #[serde(default = "default_num_buffers")]
    pub packed_num_buffers: u32,
    /// Hugging Face names (vLLM renames and fuses them while loading).
    #[serde(default = "yes")]
    pub is_checkpoint_format: bool,
}

impl WeightUpdateInfo {
    /// Unpacked metadata for `names` / `dtype_names` / `shapes`.
    pub fn new(names: Vec<String>, dtype_names: Vec<String>, shapes: Vec<Vec<i64>>) -> Self {
        Self {
            names,
            dtype_names,
            shapes,
            packed: false,
            packed_buffer_size_bytes: DEFAULT_PACKED_BUFFER_BYTES,
            packed_num_buffers: 2,
            is_checkpoint_format: true,
        }
    }

    /// What vLLM accepts: only the fields it needs (older servers refuse
    /// unknown ones).
    pub fn to_wire(&self) -> Json {
        let mut v = serde_json::json!({
            "names": self.names,
            "dtype_names": self.dtype_names,
            "shapes": self.shapes,
            "packed": self.packed,
        });
        if self.packed && self.packed_buffer_size_bytes != DEFAULT_PACKED_BUFFER_BYTES {
            v["packed_buffer_size_bytes"] = self.packed_buffer_size_bytes.into();
        }
        v
    }

    /// Index ranges of the packed buffers (by the sender's rule), given each
    /// tensor's byte size.
    pub fn packed_groups(&self, sizes: &[u64]) -> Vec<std::ops::Range<usize>> {
        let mut groups = Vec::new();
        let (mut start, mut total) = (0, 0u64);
        for (i, s) in sizes.iter().enumerate() {
            total += s;
            if total > self.packed_buffer_size_bytes {
                groups.push(start..i + 1);
                start = i + 1;
                total = 0;
            }
        }
        if start < sizes.len() {
            groups.push(start..sizes.len());
        }
        groups
    }
}

/// Body of `POST /update_weights`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UpdateWeightsRequest {
    pub update_info: WeightUpdateInfo,
}

/// Body of vLLM's `POST /collective_rpc`: run `method` on every worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CollectiveRpc {
    pub method: String,
    #[serde(default)]
    pub args: Vec<Json>,
    #[serde(default)]
    pub kwargs: BTreeMap<String, Json>,
    #[serde(default)]
    pub timeout: Option<f64>,
}

/// How to run `vllm serve`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VllmProgram {
    /// The `vllm` executable: `vllm serve <model> ...`.
    Cli(PathBuf),
    /// A Python that imports vllm: `python -m vllm.entrypoints.openai.api_server --model <model> ...`.
    Python(PathBuf),
}

impl VllmProgram {
    /// The command serving `model`; flags follow.
    pub fn command(&self, model: &Path) -> Command {
        match self {
            VllmProgram::Cli(p) => {
                let mut c = Command::new(p);
                c.arg("serve").arg(model);
                c
            }
            VllmProgram::Python(p) => {
                let mut c = Command::new(p);
                c.args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
                    .arg(model);
                c
            }
        }
    }
}

/// The Python to look for vLLM in: `$SKYRL_PYTHON`, else `python3`.
pub fn configured_python() -> PathBuf {
    std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// An executable called `name` on `path` (a `PATH`-style list).
fn on_path(name: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Finds vLLM: `python` when it imports `vllm`, else `vllm` on `path`; the
/// error names `generator.inference_engine.backend`.
pub fn find_vllm_with(python: &Path, path: Option<&std::ffi::OsStr>) -> Result<VllmProgram> {
    let imports = Command::new(python)
        .args(["-c", "import vllm"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if imports {
        return Ok(VllmProgram::Python(python.to_path_buf()));
    }
    if let Some(cli) = on_path("vllm", path) {
        return Ok(VllmProgram::Cli(cli));
    }
    bail!(
        "generator.inference_engine.backend=vllm starts `vllm serve` processes, but vLLM is not \
         installed: `{} -c 'import vllm'` failed and there is no `vllm` on PATH (pip install vllm, \
         or set SKYRL_PYTHON to a Python that has it; or use backend=tch, or run the servers \
         yourself and list them in remote_urls with run_engines_locally=false)",
        python.display()
    )
}

/// [`find_vllm_with`] for this process's `$SKYRL_PYTHON`/`python3` and `PATH`.
pub fn find_vllm() -> Result<VllmProgram> {
    find_vllm_with(&configured_python(), std::env::var_os("PATH").as_deref())
}

/// `vllm serve` flags the launcher sets itself; `engine_init_kwargs` may not
/// repeat them (the config key that sets each is named in the refusal).
pub const MANAGED_FLAGS: &[(&str, &str)] = &[
    ("model", "trainer.policy.model"),
    ("host", "(loopback, chosen by the launcher)"),
    ("port", "(a free port, chosen by the launcher)"),
    (
        "served_model_name",
        "generator.inference_engine.served_model_name",
    ),
    (
        "tensor_parallel_size",
        "generator.inference_engine.tensor_parallel_size",
    ),
    (
        "gpu_memory_utilization",
        "generator.inference_engine.gpu_memory_utilization",
    ),
    ("max_num_seqs", "generator.inference_engine.max_num_seqs"),
    (
        "max_num_batched_tokens",
        "generator.inference_engine.max_num_batched_tokens",
    ),
    (
        "enable_prefix_caching",
        "generator.inference_engine.enable_prefix_caching",
    ),
    ("enforce_eager", "generator.inference_engine.enforce_eager"),
    ("dtype", "generator.inference_engine.model_dtype"),
    ("api_key", "generator.inference_engine.api_key"),
    (
        "weight_transfer_config",
        "generator.inference_engine.weight_sync_backend",
    ),
];

/// `--flag value` arguments for one `engine_init_kwargs` entry (`true`:
/// the bare flag, `false`: `--no-flag`, objects and lists as JSON).
pub fn kwarg_flags(key: &str, value: &Json) -> Result<Vec<String>> {
    let flag = key.replace('_', "-");
    if flag.is_empty() || flag.starts_with('-') || flag.contains(char::is_whitespace) {
        bail!("generator.inference_engine.engine_init_kwargs: `{key}` is not a vLLM argument name");
    }
    Ok(match value {
        Json::Bool(true) => vec![format!("--{flag}")],
        Json::Bool(false) => vec![format!("--no-{flag}")],
        Json::Null => bail!(
            "generator.inference_engine.engine_init_kwargs.{key} is null; remove it to keep vLLM's default"
        ),
        Json::String(s) => vec![format!("--{flag}"), s.clone()],
        Json::Number(n) => vec![format!("--{flag}"), n.to_string()],
        other => vec![format!("--{flag}"), other.to_string()],
    })
}

/// Refuses `engine_init_kwargs` keys the launcher sets from other config keys.
pub fn check_kwargs(kwargs: &BTreeMap<String, Json>) -> Result<()> {
    for (k, v) in kwargs {
        let norm = k.replace('-', "_");
        if let Some((_, owner)) = MANAGED_FLAGS.iter().find(|(f, _)| *f == norm) {
            bail!(
                "generator.inference_engine.engine_init_kwargs.{k} is set by the launcher; \
                 use {owner} instead"
            );
        }
        kwarg_flags(k, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn update_info_round_trips_and_packs_like_vllm() {
        let info: WeightUpdateInfo = serde_json::from_value(json!({
            "names": ["a", "b", "c"], "dtype_names": ["bfloat16", "bfloat16", "bfloat16"],
            "shapes": [[2], [3], [4]], "packed": true, "packed_buffer_size_bytes": 5
        }))
        .unwrap();
        assert!(info.is_checkpoint_format);
        // 2 + 3 = 5 fits; 4 more goes over 5 and closes the second buffer.
        assert_eq!(info.packed_groups(&[2, 3, 4]), vec![0..3]);
        assert_eq!(info.packed_groups(&[4, 4, 1]), vec![0..2, 2..3]);
        assert_eq!(info.packed_groups(&[9]), vec![0..1]);
        let unpacked =
            WeightUpdateInfo::new(vec!["x".into()], vec!["float32".into()], vec![vec![1]]);
        assert_eq!(
            unpacked.to_wire(),
            json!({"names": ["x"], "dtype_names": ["float32"], "shapes": [[1]], "packed": false})
        );
        assert!(serde_json::from_value::<WeightUpdateInfo>(json!({
            "names": [], "dtype_names": [], "shapes": [], "extra": 1
        }))
        .is_err());
    }

    #[test]
    fn kwargs_become_flags_and_managed_ones_are_refused() {
        assert_eq!(
            kwarg_flags("max_model_len", &json!(4096)).unwrap(),
            ["--max-model-len", "4096"]
        );
        assert_eq!(
            kwarg_flags("trust_remote_code", &json!(true)).unwrap(),
            ["--trust-remote-code"]
        );
        assert_eq!(
            kwarg_flags("enable_chunked_prefill", &json!(false)).unwrap(),
            ["--no-enable-chunked-prefill"]
        );
        assert_eq!(
            kwarg_flags("compilation_config", &json!({"level": 0})).unwrap(),
            ["--compilation-config", "{\"level\":0}"]
        );
        let mut k = BTreeMap::new();
        k.insert("tensor-parallel-size".to_string(), json!(2));
        let e = check_kwargs(&k).unwrap_err().to_string();
        assert!(
            e.contains("generator.inference_engine.tensor_parallel_size"),
            "{e}"
        );
        assert!(check_kwargs(&BTreeMap::from([("seed".to_string(), json!(1))])).is_ok());
    }

    #[test]
    fn missing_vllm_is_refused_by_key() {
        let e = find_vllm_with(
            Path::new("/nonexistent/python"),
            Some("/nonexistent".as_ref()),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("generator.inference_engine.backend"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("vllm");
        std::fs::write(&fake, "#!/bin/sh\n").unwrap();
        let found = find_vllm_with(
            Path::new("/nonexistent/python"),
            Some(dir.path().as_os_str()),
        );
        assert_eq!(found.unwrap(), VllmProgram::Cli(fake));
    }
}
