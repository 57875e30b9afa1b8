//! Disaggregated local placement: starts engine server child processes on
//! loopback, waits for each to serve, and stops them when dropped. The
//! servers are `skyrl serve` (backend `tch`: free port, reported on stdout)
//! or `vllm serve` (backend `vllm`: a free port chosen here, ready once
//! `/health` answers, with `VLLM_SERVER_DEV_MODE=1` for the control endpoints).

use crate::keys::{ADMIN_KEY_VAR, API_KEY_VAR};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value as Json;
use tracing::{info, warn};

use crate::vllm::{kwarg_flags, VllmProgram};

/// The line `skyrl serve` prints on stdout once it accepts connections,
/// followed by `host:port` (the launcher parses it).
pub const LISTENING_PREFIX: &str = "skyrl serve listening on http://";

/// Which server program runs the engines.
#[derive(Debug, Clone)]
pub enum EngineProgram {
    /// The `skyrl` executable (its `serve` subcommand).
    Skyrl(PathBuf),
    /// `vllm serve`.
    Vllm(VllmProgram),
}

/// `vllm serve` settings (from `generator.inference_engine`).
#[derive(Debug, Clone)]
pub struct VllmLaunch {
    pub tensor_parallel_size: usize,
    pub gpu_memory_utilization: f64,
    /// `--dtype`.
    pub dtype: String,
    pub enforce_eager: bool,
    /// `--weight-transfer-config '{"backend": "nccl"}'` (NCCL weight sync).
    pub nccl_weight_transfer: bool,
    /// The key of `/v1/*`, handed over as `VLLM_API_KEY` (vLLM has no admin key).
    pub api_key: Option<String>,
    /// The trainer's CUDA device (an index into the visible GPUs), which the
    /// servers avoid when there are enough others.
    pub trainer_gpu: Option<usize>,
}

impl Default for VllmLaunch {
    fn default() -> Self {
        Self {
            tensor_parallel_size: 1,
            gpu_memory_utilization: 0.8,
            dtype: "bfloat16".into(),
            enforce_eager: true,
            nccl_weight_transfer: false,
            api_key: None,
            trainer_gpu: None,
        }
    }
}

/// How to start one engine server.
#[derive(Debug, Clone)]
pub struct ServerLaunch {
    pub program: EngineProgram,
    /// Hugging Face model directory to serve.
    pub model: PathBuf,
    /// `--max-num-seqs`.
    pub max_num_seqs: usize,
    /// `--max-num-batched-tokens`.
    pub max_num_batched_tokens: usize,
    /// `--enable-prefix-caching` / `--no-enable-prefix-caching`.
    pub enable_prefix_caching: bool,
    /// Name reported by `/v1/models`.
    pub served_model_name: String,
    /// How long to wait for a server to serve.
    pub startup_timeout: Duration,
    /// `engine_init_kwargs`: extra `vllm serve` arguments, or the built-in
    /// engine's `block_size` / `kv_cache_memory_bytes` for `skyrl serve`.
    pub engine_init_kwargs: BTreeMap<String, Json>,
    /// Settings only `vllm serve` takes.
    pub vllm: VllmLaunch,
    /// `skyrl serve --weights-root`: where checkpoint weight syncs write
    /// (created before the servers start).
    pub weights_root: Option<PathBuf>,
    /// `skyrl serve`'s API and admin keys, handed over in its environment
    /// (`SKYRL_API_KEY`, `SKYRL_ADMIN_KEY`), never on the command line.
    pub skyrl_keys: Option<(String, String)>,
}

/// Engine server processes owned by the trainer (killed on drop).
pub struct LocalServers {
    children: Vec<Child>,
    urls: Vec<String>,
}

impl LocalServers {
    /// Starts `n` servers; fails (stopping any already started) if one exits
    /// or does not serve within the timeout.
    pub fn start(launch: &ServerLaunch, n: usize) -> Result<Self> {
        let mut servers = LocalServers {
            children: Vec::new(),
            urls: Vec::new(),
        };
        let gpus = gpu_blocks(launch, n);
        for k in 0..n {
            let started = match &launch.program {
                EngineProgram::Skyrl(p) => start_skyrl(launch, p),
                EngineProgram::Vllm(v) => start_vllm(launch, v, gpus.as_ref().map(|g| &g[k])),
            };
            let (child, url) =
                started.with_context(|| format!("cannot start inference engine {k} of {n}"))?;
            info!(engine = k, %url, "started inference engine");
            servers.children.push(child);
            servers.urls.push(url);
        }
        Ok(servers)
    }

    /// The servers' base URLs.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }
}

impl Drop for LocalServers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start_skyrl(launch: &ServerLaunch, program: &Path) -> Result<(Child, String)> {
    check_program(program)?;
    if let Some(dir) = &launch.weights_root {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the weight sync folder {}", dir.display()))?;
    }
    let mut cmd = Command::new(program);
    cmd.arg("serve")
        .arg("--model")
        .arg(&launch.model)
        .args(["--host", "127.0.0.1", "--port", "0"])
        .args(skyrl_flags(launch))
        .args(
            launch
                .weights_root
                .iter()
                .flat_map(|d| ["--weights-root".into(), d.clone().into_os_string()]),
        )
        .env_remove(API_KEY_VAR)
        .env_remove(ADMIN_KEY_VAR);
    if let Some((api, admin)) = &launch.skyrl_keys {
        cmd.env(API_KEY_VAR, api).env(ADMIN_KEY_VAR, admin);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot run {}", program.display()))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent {
                if let Some(addr) = line.strip_prefix(LISTENING_PREFIX) {
                    let _ = tx.send(format!("http://{}", addr.trim()));
                    sent = true;
                }
            }
        }
    });
    match rx.recv_timeout(launch.startup_timeout) {
        Ok(url) => Ok((child, url)),
        Err(_) => {
            let status = child.try_wait().ok().flatten();
            let _ = child.kill();
            let _ = child.wait();
            match status {
                Some(s) => bail!("`skyrl serve` exited ({s}) before listening; see its log above"),
                None => bail!(
                    "`skyrl serve` did not listen within {:?}",
                    launch.startup_timeout
                ),
            }
        }
    }
}

/// `skyrl serve` flags besides model, host and port.
fn skyrl_flags(launch: &ServerLaunch) -> Vec<String> {
    let mut f = vec![
        "--max-num-seqs".into(),
        launch.max_num_seqs.to_string(),
        "--max-num-batched-tokens".into(),
        launch.max_num_batched_tokens.to_string(),
        if launch.enable_prefix_caching {
            "--enable-prefix-caching".into()
        } else {
            "--no-enable-prefix-caching".into()
        },
        "--served-model-name".into(),
        launch.served_model_name.clone(),
    ];
    for (key, flag) in [
        ("block_size", "--block-size"),
        ("kv_cache_memory_bytes", "--kv-cache-memory-bytes"),
    ] {
        if let Some(v) = launch.engine_init_kwargs.get(key).and_then(Json::as_u64) {
            f.push(flag.into());
            f.push(v.to_string());
        }
    }
    f
}

/// `vllm serve` flags besides the model, for a server on `port`.
pub fn vllm_flags(launch: &ServerLaunch, port: u16) -> Result<Vec<String>> {
    let v = &launch.vllm;
    let mut f: Vec<String> = vec![
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        "--served-model-name".into(),
        launch.served_model_name.clone(),
        "--tensor-parallel-size".into(),
        v.tensor_parallel_size.to_string(),
        "--gpu-memory-utilization".into(),
        v.gpu_memory_utilization.to_string(),
        "--max-num-seqs".into(),
        launch.max_num_seqs.to_string(),
        "--max-num-batched-tokens".into(),
        launch.max_num_batched_tokens.to_string(),
        "--dtype".into(),
        v.dtype.clone(),
        if launch.enable_prefix_caching {
            "--enable-prefix-caching".into()
        } else {
            "--no-enable-prefix-caching".into()
        },
    ];
    if v.enforce_eager {
        f.push("--enforce-eager".into());
    }
    if v.nccl_weight_transfer {
        f.push("--weight-transfer-config".into());
        f.push(r#"{"backend": "nccl"}"#.into());
    }
    for (k, val) in &launch.engine_init_kwargs {
        f.extend(kwarg_flags(k, val)?);
    }
    Ok(f)
}

/// `CUDA_VISIBLE_DEVICES` of each of `n` vLLM servers: consecutive blocks of
/// `tensor_parallel_size` visible GPUs, skipping the trainer's when the others
/// suffice; `None` (too few GPUs) leaves the servers to share what they see,
/// each taking its `gpu_memory_utilization` share.
fn gpu_blocks(launch: &ServerLaunch, n: usize) -> Option<Vec<String>> {
    if !matches!(launch.program, EngineProgram::Vllm(_)) {
        return None;
    }
    let visible: Vec<String> = match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(v) if !v.trim().is_empty() => v.split(',').map(|s| s.trim().to_string()).collect(),
        _ => (0..tch::Cuda::device_count())
            .map(|i| i.to_string())
            .collect(),
    };
    let blocks = assign_gpus(
        &visible,
        launch.vllm.trainer_gpu,
        n,
        launch.vllm.tensor_parallel_size,
    );
    if blocks.is_none() {
        warn!(
            gpus = visible.len(),
            needed = n * launch.vllm.tensor_parallel_size,
            "fewer visible GPUs than num_engines x tensor_parallel_size; the vLLM servers share them"
        );
    }
    blocks
}

/// Blocks of `tp` entries of `visible` for `n` servers, without entry
/// `avoid` when the rest suffice.
fn assign_gpus(
    visible: &[String],
    avoid: Option<usize>,
    n: usize,
    tp: usize,
) -> Option<Vec<String>> {
    let tp = tp.max(1);
    let others: Vec<&String> = visible
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != avoid)
        .map(|(_, g)| g)
        .collect();
    let pool: Vec<&String> = if others.len() >= n * tp {
        others
    } else if visible.len() >= n * tp {
        visible.iter().collect()
    } else {
        return None;
    };
    Some(
        (0..n)
            .map(|k| {
                pool[k * tp..(k + 1) * tp]
                    .iter()
                    .map(|g| g.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect(),
    )
}

/// A free loopback port (released for the server to take).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn start_vllm(
    launch: &ServerLaunch,
    program: &VllmProgram,
    gpus: Option<&String>,
) -> Result<(Child, String)> {
    let port = free_port()?;
    let mut cmd = program.command(&launch.model);
    cmd.args(vllm_flags(launch, port)?)
        .env("VLLM_SERVER_DEV_MODE", "1")
        .env_remove("VLLM_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    if let Some(g) = gpus {
        cmd.env("CUDA_VISIBLE_DEVICES", g);
    }
    // vLLM reads its `--api-key` from here too; the environment keeps it out of `ps`.
    if let Some(k) = &launch.vllm.api_key {
        cmd.env("VLLM_API_KEY", k);
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {program:?}"))?;
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("`vllm serve` exited ({status}) before serving; see its log above");
        }
        if health_ok(port) {
            return Ok((child, url));
        }
        if start.elapsed() >= launch.startup_timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "`vllm serve` did not answer /health within {:?} (raise \
                 generator.inference_engine.engine_startup_timeout_s; loading a model can take minutes)",
                launch.startup_timeout
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Whether `GET /health` on loopback `port` answers 200.
fn health_ok(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}

fn check_program(p: &Path) -> Result<()> {
    if !p.is_file() {
        bail!(
            "cannot start local inference engines: {} does not exist \
             (disaggregated placement runs `skyrl serve` processes)",
            p.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn launch(program: EngineProgram) -> ServerLaunch {
        ServerLaunch {
            program,
            model: "/m".into(),
            max_num_seqs: 8,
            max_num_batched_tokens: 512,
            enable_prefix_caching: false,
            served_model_name: "policy".into(),
            startup_timeout: Duration::from_secs(1),
            engine_init_kwargs: BTreeMap::new(),
            vllm: VllmLaunch::default(),
            weights_root: None,
            skyrl_keys: None,
        }
    }

    #[test]
    fn vllm_gets_every_setting_as_a_flag() {
        let mut l = launch(EngineProgram::Vllm(VllmProgram::Cli("vllm".into())));
        l.vllm.tensor_parallel_size = 2;
        l.vllm.nccl_weight_transfer = true;
        l.engine_init_kwargs
            .insert("max_model_len".into(), json!(2048));
        let f = vllm_flags(&l, 1234).unwrap().join(" ");
        for want in [
            "--port 1234",
            "--tensor-parallel-size 2",
            "--gpu-memory-utilization 0.8",
            "--max-num-seqs 8",
            "--max-num-batched-tokens 512",
            "--no-enable-prefix-caching",
            "--served-model-name policy",
            "--dtype bfloat16",
            "--enforce-eager",
            r#"--weight-transfer-config {"backend": "nccl"}"#,
            "--max-model-len 2048",
        ] {
            assert!(f.contains(want), "{want} missing from {f}");
        }
        let cmd = VllmProgram::Python("py".into()).command(Path::new("/m"));
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            ["-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]
        );
    }

    #[test]
    fn servers_get_gpu_blocks_away_from_the_trainer() {
        let gpus: Vec<String> = (0..4).map(|i| i.to_string()).collect();
        assert_eq!(assign_gpus(&gpus, Some(0), 3, 1).unwrap(), ["1", "2", "3"]);
        assert_eq!(assign_gpus(&gpus, Some(0), 2, 2).unwrap(), ["0,1", "2,3"]);
        assert_eq!(assign_gpus(&gpus, None, 1, 2).unwrap(), ["0,1"]);
        assert!(assign_gpus(&gpus, Some(0), 3, 2).is_none());
    }

    #[test]
    fn skyrl_serve_gets_batching_and_caching_flags() {
        let mut l = launch(EngineProgram::Skyrl("skyrl".into()));
        l.engine_init_kwargs.insert("block_size".into(), json!(32));
        let f = skyrl_flags(&l).join(" ");
        assert!(f.contains("--max-num-batched-tokens 512"), "{f}");
        assert!(f.contains("--block-size 32"), "{f}");
        assert!(f.contains("--no-enable-prefix-caching"), "{f}");
    }

    #[test]
    fn a_vllm_that_exits_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("vllm");
        std::fs::write(&fake, "#!/bin/sh\nexit 3\n").unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&fake)
            .status()
            .unwrap();
        let l = launch(EngineProgram::Vllm(VllmProgram::Cli(fake)));
        let e = LocalServers::start(&l, 1).err().unwrap();
        assert!(format!("{e:#}").contains("exited"), "{e:#}");
    }
}
