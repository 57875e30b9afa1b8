//! Trainer side of the NCCL weight sync: rank 0 of a group with every
//! inference server, broadcasting each parameter after a pause
//! (pause -> send names/dtypes/shapes -> broadcast -> finish -> resume).
//!
//! Two ways in, by the fleet's [`ControlProtocol`]: SGLang-style servers get
//! the NCCL unique id in `/init_weights_update_group` and one rank each;
//! vLLM servers report their worker count (`/get_world_size`), are sent
//! `/init_weight_transfer_engine` with a rank offset, and fetch the id from
//! the torch store this side hosts (vLLM's `StatelessProcessGroup`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::nccl::stateless::UniqueIdHost;
use crate::nccl::{self, NcclGroup};
use crate::remote::ControlProtocol;
use crate::vllm::{NcclInitInfo, WeightUpdateInfo};
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

/// Parameters in a fixed (name) order, contiguous; LoRA adapters merged in.
fn ordered_params(policy: &CausalLm) -> Vec<(String, Tensor)> {
    policy
        .merged_parameters()
        .into_iter()
        .map(|(n, t)| (n, t.detach().contiguous()))
        .collect()
}

/// Rank offset of each server (the trainer is rank 0) and the world size,
/// from each server's worker count.
pub fn rank_offsets(world_sizes: &[usize]) -> (Vec<i32>, i32) {
    let mut next = 1;
    let offsets = world_sizes
        .iter()
        .map(|&w| {
            let o = next;
            next += w as i32;
            o
        })
        .collect();
    (offsets, next)
}

impl NcclSender {
    /// Creates the group: rank 0 here, the servers' workers after it.
    pub async fn connect(client: &RemoteEngines, policy: &CausalLm) -> Result<Self> {
        nccl::check_available()?;
        let device = nccl::cuda_index(
            policy.device(),
            "the policy",
            " (use generator.inference_engine.weight_sync_backend=checkpoint)",
        )?;
        let group = match client.protocol() {
            ControlProtocol::Sglang => Self::connect_sglang(client, device).await?,
            ControlProtocol::Vllm => Self::connect_vllm(client, device).await?,
        };
        Ok(Self {
            group: Arc::new(Mutex::new(group)),
        })
    }

    /// Server `i` joins as rank `1 + i`; the unique id travels in the request.
    async fn connect_sglang(client: &RemoteEngines, device: usize) -> Result<NcclGroup> {
        let id = nccl::new_unique_id()?;
        let world = 1 + client.len() as i32;
        let hex = nccl::encode_unique_id(&id);
        let join = tokio::task::spawn_blocking(move || NcclGroup::join(&id, 0, world, device));
        let servers = client.broadcast_with("/init_weights_update_group", |i| {
            json!({"unique_id": hex, "rank": 1 + i as i32, "world_size": world, "group_name": "skyrl"})
        });
        let (joined, answered) = tokio::join!(join, servers);
        answered.context("inference servers could not join the NCCL group")?;
        Ok(joined.context("the NCCL join task failed")??)
    }

    /// vLLM's rendezvous: this side hosts the store, every server's workers
    /// join after the ones before, and all warm up together.
    async fn connect_vllm(client: &RemoteEngines, device: usize) -> Result<NcclGroup> {
        let sizes = client
            .world_sizes()
            .await
            .context("vLLM servers did not report their world size (are they started with VLLM_SERVER_DEV_MODE=1?)")?;
        let (offsets, world) = rank_offsets(&sizes);
        let address = client.local_address()?;
        let id = nccl::new_unique_id()?;
        let host = UniqueIdHost::start(SocketAddr::new(address, 0), &id)?;
        let port = host.port();
        let join = tokio::task::spawn_blocking(move || {
            let group = NcclGroup::join(&id, 0, world, device)?;
            group.warm_up()?;
            Ok::<_, nccl::NcclError>(group)
        });
        let servers = client.broadcast_with("/init_weight_transfer_engine", |i| {
            json!({"init_info": NcclInitInfo {
                master_address: address.to_string(),
                master_port: port,
                rank_offset: offsets[i],
                world_size: world,
            }})
        });
        let (joined, answered) = tokio::join!(join, servers);
        drop(host);
        answered.context(
            "vLLM servers could not join the NCCL group (start them with \
             --weight-transfer-config '{\"backend\": \"nccl\"}')",
        )?;
        Ok(joined.context("the NCCL join task failed")??)
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
            dtypes.push(nccl::dtype_name(t.kind())?.to_string());
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
        let (path, body) = match client.protocol() {
            ControlProtocol::Sglang => (
                "/update_weights_from_distributed",
                json!({"names": names, "dtypes": dtypes, "shapes": shapes, "group_name": "skyrl"}),
            ),
            ControlProtocol::Vllm => (
                "/update_weights",
                json!({"update_info": WeightUpdateInfo::new(names, dtypes, shapes).to_wire()}),
            ),
        };
        let receive = client.broadcast(path, body);
        let (sent, received) = tokio::join!(send, receive);
        let reset = match (client.protocol(), &received) {
            (ControlProtocol::Vllm, Ok(_)) => client.reset_prefix_cache().await,
            _ => Ok(()),
        };
        let resumed = client.resume().await;
        sent.context("the NCCL send task failed")??;
        let answers = received?;
        reset?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_take_consecutive_rank_blocks() {
        assert_eq!(rank_offsets(&[1, 1]), (vec![1, 2], 3));
        assert_eq!(rank_offsets(&[2, 4, 1]), (vec![1, 3, 7], 8));
    }
}
