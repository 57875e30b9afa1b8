//! Starting the rollout engine a placement plan asks for: a copy of the
//! policy in this process, `skyrl serve` or `vllm serve` children on
//! loopback, or a client for servers someone else runs (driven with vLLM's
//! control endpoints for `backend: vllm`, SGLang-style ones otherwise).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use skyrl_model::{CausalLm, InferenceEngine, LoadOptions, Tokenizer};

use crate::config::InferenceEngineConfig;
use crate::engine_settings::builtin_engine_settings;
use crate::keys::{key_or_env, random_key, ADMIN_KEY_VAR, API_KEY_VAR};
use crate::launcher::{EngineProgram, LocalServers, ServerLaunch, VllmLaunch};
use crate::placement::{EngineKind, Placement};
use crate::remote::{ControlProtocol, RemoteEngines, RemoteEnginesConfig};
use crate::RolloutEngine;

/// Converts a config value in seconds (negative = 0) into a duration.
pub fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// The `skyrl` executable whose `serve` runs the engines: `program` when
/// given, else this process's executable when it is `skyrl`.
fn engine_program(program: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = program {
        return Ok(p.to_path_buf());
    }
    let exe = std::env::current_exe().context("cannot locate this executable")?;
    if exe.file_stem().is_some_and(|n| n == "skyrl") {
        Ok(exe)
    } else {
        bail!(
            "disaggregated local placement starts `skyrl serve` processes, but this program is \
             {}; run through the `skyrl` CLI or set TrainOptions::engine_program",
            exe.display()
        )
    }
}

/// What the engines serve: the policy (its copy seeds the in-process engine)
/// and its directory (what launched servers load first).
pub struct PolicySource<'a> {
    pub model: &'a CausalLm,
    pub dir: &'a Path,
    /// The `skyrl` executable for launched servers (default: this one).
    pub engine_program: Option<&'a Path>,
    /// Where checkpoint weight syncs write: launched `skyrl serve` processes
    /// may load weights from under it (and nowhere else).
    pub weight_sync_dir: Option<&'a Path>,
}

/// Builds the rollout engine(s) for `placement` with the settings of
/// `generator.inference_engine`.
pub fn start_engines(
    placement: &Placement,
    ie: &InferenceEngineConfig,
    policy: &PolicySource,
) -> Result<RolloutEngine> {
    let engine = EngineKind::parse(&ie.backend)?;
    let api_key = key_or_env(&ie.api_key, API_KEY_VAR);
    let admin_key = key_or_env(&ie.admin_key, ADMIN_KEY_VAR);
    let client_config = |urls: Vec<String>,
                         model: Option<String>,
                         api_key: Option<String>,
                         admin_key: Option<String>| RemoteEnginesConfig {
        model,
        request_timeout: seconds(ie.request_timeout_s),
        max_retries: ie.max_retries,
        retry_backoff: seconds(ie.retry_backoff_s),
        api_key,
        admin_key,
        protocol: match engine {
            EngineKind::Tch => ControlProtocol::Sglang,
            EngineKind::Vllm => ControlProtocol::Vllm,
        },
        ..RemoteEnginesConfig::new(urls)
    };
    Ok(match placement {
        Placement::Colocated => {
            let options = LoadOptions {
                device: policy.model.device(),
                kind: policy.model.kind(),
            };
            let model = policy.model.try_clone(&options)?;
            let settings = builtin_engine_settings(ie, &model)?;
            let engine = InferenceEngine::new(model, Some(Tokenizer::from_dir(policy.dir)?))
                .with_settings(settings)?;
            RolloutEngine::local(engine)
        }
        Placement::LocalServers { num_engines } => {
            let name = ie
                .served_model_name
                .clone()
                .unwrap_or_else(|| "skyrl-policy".into());
            let program = match engine {
                EngineKind::Tch => EngineProgram::Skyrl(engine_program(policy.engine_program)?),
                EngineKind::Vllm => EngineProgram::Vllm(crate::vllm::find_vllm()?),
            };
            // Launched servers get fresh keys unless some are configured (vLLM
            // guards only /v1/* with its one key).
            let fresh_api = api_key.clone().unwrap_or_else(random_key);
            let skyrl_keys = matches!(engine, EngineKind::Tch).then(|| {
                (
                    fresh_api.clone(),
                    admin_key.clone().unwrap_or_else(random_key),
                )
            });
            let launch = ServerLaunch {
                program,
                model: policy.dir.to_path_buf(),
                max_num_seqs: ie.max_num_seqs.max(1),
                max_num_batched_tokens: ie.max_num_batched_tokens.max(1),
                enable_prefix_caching: ie.enable_prefix_caching,
                served_model_name: name.clone(),
                startup_timeout: seconds(ie.engine_startup_timeout_s),
                engine_init_kwargs: ie.engine_init_kwargs.clone(),
                vllm: VllmLaunch {
                    tensor_parallel_size: ie.tensor_parallel_size,
                    gpu_memory_utilization: ie.gpu_memory_utilization,
                    dtype: ie.model_dtype.clone(),
                    enforce_eager: ie.enforce_eager,
                    nccl_weight_transfer: ie.weight_sync_backend == "nccl",
                    api_key: Some(fresh_api.clone()),
                    trainer_gpu: match policy.model.device() {
                        tch::Device::Cuda(i) => Some(i),
                        _ => None,
                    },
                },
                weights_root: policy.weight_sync_dir.map(Path::to_path_buf),
                skyrl_keys: skyrl_keys.clone(),
            };
            let servers = LocalServers::start(&launch, *num_engines)?;
            let (api, admin) = match skyrl_keys {
                Some((api, admin)) => (Some(api), Some(admin)),
                None => (Some(fresh_api), admin_key.clone()),
            };
            let client = RemoteEngines::new(client_config(
                servers.urls().to_vec(),
                Some(name),
                api,
                admin,
            ))?;
            RolloutEngine::remote(client, Some(servers))
        }
        Placement::External { urls } => RolloutEngine::remote(
            RemoteEngines::new(client_config(
                urls.clone(),
                ie.served_model_name.clone(),
                api_key,
                admin_key,
            ))?,
            None,
        ),
    })
}
