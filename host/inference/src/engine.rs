//! The rollout engine: the one handle the generator samples from, over the
//! in-process engine (colocated placement) or a fleet of OpenAI-compatible
//! servers (remote urls, or `skyrl serve` processes the trainer started).

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use skyrl_model::{Completion, EngineStats, InferenceEngine, SampleStream, SamplingParams};

use crate::launcher::LocalServers;
use crate::local::LocalEngine;
use crate::remote::RemoteEngines;

/// The engine(s) behind a [`RolloutEngine`].
// A trainer holds exactly one, so the variants' size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum EngineBackend {
    /// In this process, sharing the trainer's device; concurrent requests are
    /// decoded together and weight syncs land between batches.
    Local(LocalEngine),
    /// OpenAI-compatible servers; `servers` holds the processes this trainer
    /// started (disaggregated local placement), `None` for external urls.
    Remote {
        client: RemoteEngines,
        servers: Option<LocalServers>,
    },
}

/// The engine(s) the generator samples from, with the policy version they serve.
///
/// Shared between the trainer and rollout workers (`Send + Sync`).
pub struct RolloutEngine {
    backend: EngineBackend,
    /// Policy version (training steps whose weights the engines hold).
    version: AtomicU64,
}

impl RolloutEngine {
    /// The in-process engine.
    pub fn local(engine: InferenceEngine) -> Self {
        Self::with_backend(EngineBackend::Local(LocalEngine::new(engine)))
    }

    /// Remote servers (and the processes serving them, when this trainer started them).
    pub fn remote(client: RemoteEngines, servers: Option<LocalServers>) -> Self {
        Self::with_backend(EngineBackend::Remote { client, servers })
    }

    fn with_backend(backend: EngineBackend) -> Self {
        Self {
            backend,
            version: AtomicU64::new(0),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &EngineBackend {
        &self.backend
    }

    /// Policy version the engines serve.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// Records that the engines now serve policy version `v`.
    pub fn set_version(&self, v: u64) {
        self.version.store(v, Ordering::SeqCst);
    }

    /// One completion per prompt; prompt `i` samples from `streams[i]` and
    /// belongs to trajectory `sessions[i]` (remote engines keep a trajectory
    /// on one server). Also returns the policy version that produced them: read
    /// under the engine lock locally; for remote engines, read at the start of
    /// the call (a lower bound, as servers may be updated mid-call).
    pub async fn generate(
        &self,
        prompts: &[Vec<i64>],
        streams: &[SampleStream],
        params: &SamplingParams,
        sessions: &[String],
    ) -> Result<(Vec<Completion>, u64)> {
        match &self.backend {
            EngineBackend::Local(engine) => {
                engine
                    .generate(prompts, streams, params, &self.version)
                    .await
            }
            EngineBackend::Remote { client, .. } => {
                let version = self.version();
                let out = client.generate(prompts, streams, params, sessions).await?;
                Ok((out, version))
            }
        }
    }

    /// Drops the routing state of sessions whose id starts with `prefix`
    /// (the trajectories of one finished generator call).
    pub fn end_sessions(&self, prefix: &str) {
        if let Some(client) = self.remote_client() {
            client.forget_sessions(prefix);
        }
    }

    /// The in-process engine's counters (prefill shared or cached,
    /// preemptions, KV use); `None` for remote engines.
    pub fn engine_stats(&self) -> Option<EngineStats> {
        match &self.backend {
            EngineBackend::Local(engine) => Some(engine.stats()),
            EngineBackend::Remote { .. } => None,
        }
    }

    /// The remote client, when engines are remote.
    pub fn remote_client(&self) -> Option<&RemoteEngines> {
        match &self.backend {
            EngineBackend::Remote { client, .. } => Some(client),
            EngineBackend::Local(_) => None,
        }
    }
}
