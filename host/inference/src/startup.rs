//! Starting the rollout engine a placement plan asks for: a copy of the
//! policy in this process, `skyrl serve` children on loopback, or a client
//! for servers someone else runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use skyrl_model::{CausalLm, InferenceEngine, LoadOptions, Tokenizer};

use crate::config::InferenceEngineConfig;
use crate::launcher::{LocalServers, ServerLaunch};
use crate::placement::Placement;
use crate::remote::{RemoteEngines, RemoteEnginesConfig};
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
}

/// Builds the rollout engine(s) for `placement` with the settings of
/// `generator.inference_engine`.
pub fn start_engines(
    placement: &Placement,
    ie: &InferenceEngineConfig,
    policy: &PolicySource,
) -> Result<RolloutEngine> {
    let client_config = |urls: Vec<String>, model: Option<String>| RemoteEnginesConfig {
        model,
        request_timeout: seconds(ie.request_timeout_s),
        max_retries: ie.max_retries,
        retry_backoff: seconds(ie.retry_backoff_s),
        api_key: ie.api_key.clone(),
        ..RemoteEnginesConfig::new(urls)
    };
    Ok(match placement {
        Placement::Colocated => {
            let options = LoadOptions {
                device: policy.model.device(),
                kind: policy.model.kind(),
            };
            let engine = InferenceEngine::new(
                policy.model.try_clone(&options)?,
                Some(Tokenizer::from_dir(policy.dir)?),
            )
            .with_max_batch(ie.max_num_seqs.max(1));
            RolloutEngine::local(engine)
        }
        Placement::LocalServers { num_engines } => {
            let name = ie
                .served_model_name
                .clone()
                .unwrap_or_else(|| "skyrl-policy".into());
            let launch = ServerLaunch {
                program: engine_program(policy.engine_program)?,
                model: policy.dir.to_path_buf(),
                max_num_seqs: ie.max_num_seqs.max(1),
                served_model_name: name.clone(),
                startup_timeout: seconds(ie.engine_startup_timeout_s),
            };
            let servers = LocalServers::start(&launch, *num_engines)?;
            let client = RemoteEngines::new(client_config(servers.urls().to_vec(), Some(name)))?;
            RolloutEngine::remote(client, Some(servers))
        }
        Placement::External { urls } => RolloutEngine::remote(
            RemoteEngines::new(client_config(urls.clone(), ie.served_model_name.clone()))?,
            None,
        ),
    })
}
