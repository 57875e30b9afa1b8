//! Where rollouts are generated: the in-process engine (colocated placement)
//! or a fleet of OpenAI-compatible servers (remote urls, or `skyrl serve`
//! processes the trainer starts itself), plus how trained weights reach them.

pub mod launcher;
pub mod nccl;
pub mod placement;
pub mod remote;
pub mod weight_sync;

use anyhow::Result;
use skyrl_model::{Completion, InferenceEngine, SampleStream, SamplingParams};

use launcher::LocalServers;
use remote::RemoteEngines;

/// The engine(s) the generator samples from.
// A trainer holds exactly one, so the variants' size difference costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum RolloutEngine {
    /// In this process, sharing the trainer's device.
    Local(InferenceEngine),
    /// OpenAI-compatible servers; `servers` holds the processes this trainer
    /// started (disaggregated local placement), `None` for external urls.
    Remote {
        client: RemoteEngines,
        servers: Option<LocalServers>,
    },
}

impl RolloutEngine {
    /// One completion per prompt; prompt `i` samples from `streams[i]` and
    /// belongs to trajectory `sessions[i]` (remote engines keep a trajectory
    /// on one server).
    pub async fn generate(
        &self,
        prompts: &[Vec<i64>],
        streams: &[SampleStream],
        params: &SamplingParams,
        sessions: &[String],
    ) -> Result<Vec<Completion>> {
        match self {
            RolloutEngine::Local(engine) => {
                Ok(engine.generate_with_streams(prompts, streams, params)?)
            }
            RolloutEngine::Remote { client, .. } => {
                Ok(client.generate(prompts, streams, params, sessions).await?)
            }
        }
    }

    /// Drops per-trajectory routing state after a batch.
    pub fn end_sessions(&self) {
        if let RolloutEngine::Remote { client, .. } = self {
            client.clear_sessions();
        }
    }

    /// The remote client, when engines are remote.
    pub fn remote(&self) -> Option<&RemoteEngines> {
        match self {
            RolloutEngine::Remote { client, .. } => Some(client),
            RolloutEngine::Local(_) => None,
        }
    }
}
