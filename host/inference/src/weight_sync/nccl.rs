//! Trainer side of the NCCL weight sync: rank 0 of a group with every
//! inference server, broadcasting each parameter after a pause
//! (pause -> send names/dtypes/shapes -> broadcast -> finish -> resume).

use std::sync::{Arc, Mutex};

use crate::nccl::{self, NcclGroup};
use anyhow::{Context, Result};
use serde_json::json;
use skyrl_model::CausalLm;
use tch::Tensor;

use super::SyncReport;
use crate::remote::RemoteEngines;

/// The trainer's membership of the weight-update group.
pub struct NcclSender {
    group: Arc<Mutex<NcclGroup>>,
}

/// Parameters in a fixed (name) order, contiguous.
fn ordered_params(policy: &CausalLm) -> Vec<(String, Tensor)> {
    policy
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (n, t.detach().contiguous()))
        .collect()
}

impl NcclSender {
    /// Creates the group: rank 0 here, rank `1 + i` for server `i`.
    pub async fn connect(client: &RemoteEngines, policy: &CausalLm) -> Result<Self> {
        nccl::check_available()?;
        let device = nccl::cuda_index(
            policy.device(),
            "the policy",
            " (use generator.inference_engine.weight_sync_backend=checkpoint)",
        )?;
        let id = nccl::new_unique_id()?;
        let world = 1 + client.len() as i32;
        let hex = nccl::encode_unique_id(&id);
        let join = tokio::task::spawn_blocking(move || NcclGroup::join(&id, 0, world, device));
        let servers = client.broadcast_with("/init_weights_update_group", |i| {
            json!({"unique_id": hex, "rank": 1 + i as i32, "world_size": world, "group_name": "skyrl"})
        });
        let (joined, answered) = tokio::join!(join, servers);
        answered.context("inference servers could not join the NCCL group")?;
        let group = joined.context("the NCCL join task failed")??;
        Ok(Self {
            group: Arc::new(Mutex::new(group)),
        })
    }

    /// Broadcasts every parameter of `policy` to the servers.
    pub async fn sync(&self, client: &RemoteEngines, policy: &CausalLm) -> Result<SyncReport> {
        let params = ordered_params(policy);
        let mut names = Vec::with_capacity(params.len());
        let mut dtypes = Vec::with_capacity(params.len());
        let mut shapes = Vec::with_capacity(params.len());
        let mut bytes = 0u64;
        for (n, t) in &params {
            names.push(n.clone());
            dtypes.push(nccl::dtype_name(t.kind())?);
            shapes.push(t.size());
            bytes += (t.numel() * t.kind().elt_size_in_bytes()) as u64;
        }
        client.pause().await?;
        let group = self.group.clone();
        let send = tokio::task::spawn_blocking(move || {
            let g = group.lock().expect("nccl lock");
            for (_, mut t) in params {
                g.broadcast(&mut t, 0)?;
            }
            Ok::<_, nccl::NcclError>(())
        });
        let receive = client.broadcast(
            "/update_weights_from_distributed",
            json!({"names": names, "dtypes": dtypes, "shapes": shapes, "group_name": "skyrl"}),
        );
        let (sent, received) = tokio::join!(send, receive);
        let resumed = client.resume().await;
        sent.context("the NCCL send task failed")??;
        let answers = received?;
        resumed?;
        Ok(SyncReport {
            seconds: 0.0,
            bytes,
            versions: answers
                .iter()
                .map(|a| a["weight_version"].as_u64())
                .collect(),
        })
    }
}
