//! This process's place in a data-parallel run: the c10d process group of
//! the policy ranks (launched by torchrun or srun), the device each rank
//! trains on, which rows of a batch are this rank's, and the small
//! exchanges the trainer needs (sums of scalars, JSON records, tensors
//! padded to a common width). A single process is a world of one: every
//! exchange is then the identity and no group exists.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use skyrl_distributed::{Backend, LaunchEnv, ProcessGroup, ReduceOp};
use tch::{Device, Kind, Tensor};

use crate::config::SkyrlConfig;

/// The ranks a config plans for, and the keys that say so (for errors).
#[derive(Debug, Clone)]
pub struct RankPlan<'a> {
    pub nodes: usize,
    pub gpus_per_node: usize,
    /// The config key of `nodes` (e.g. `trainer.placement.policy_num_nodes`).
    pub nodes_key: &'a str,
    /// The config key of `gpus_per_node`.
    pub gpus_key: &'a str,
    /// Seconds a collective or the rendezvous may wait for another rank.
    pub timeout_s: f64,
}

/// The policy ranks of this run and this process's rank among them.
pub struct Dist {
    group: Option<ProcessGroup>,
    rank: usize,
    world: usize,
    device: Device,
}

impl Dist {
    /// One process: rank 0 of 1 on the first GPU, else the CPU.
    pub fn single() -> Self {
        Self {
            group: None,
            rank: 0,
            world: 1,
            device: Device::cuda_if_available(),
        }
    }

    /// How many ranks the launcher started (1 without a launcher), read from
    /// its variables without joining anything.
    pub fn launched_world() -> Result<usize> {
        let env = LaunchEnv::from_env().context("cannot read the launcher's variables")?;
        Ok(env.map_or(1, |e| e.world_size))
    }

    /// `rank R of W` when a launcher started several ranks (to prefix errors).
    pub fn launch_label() -> Option<String> {
        let env = LaunchEnv::from_env().ok().flatten()?;
        (env.world_size > 1).then(|| format!("rank {} of {}", env.rank, env.world_size))
    }

    /// Joins the run described by the launcher's variables (torchrun's
    /// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or SLURM's), checked against
    /// `trainer.placement.policy_num_nodes` × `policy_num_gpus_per_node`.
    /// Gloo on CPU, NCCL on `cuda:<LOCAL_RANK>`.
    pub fn from_env(cfg: &SkyrlConfig) -> Result<Self> {
        let p = &cfg.trainer.placement;
        Self::join(&RankPlan {
            nodes: p.policy_num_nodes,
            gpus_per_node: p.policy_num_gpus_per_node,
            nodes_key: "trainer.placement.policy_num_nodes",
            gpus_key: "trainer.placement.policy_num_gpus_per_node",
            timeout_s: cfg.trainer.dist_timeout_s,
        })
    }

    /// Joins the run described by the launcher's variables, which must have
    /// started the ranks `plan` asks for.
    pub fn join(plan: &RankPlan) -> Result<Self> {
        let env = LaunchEnv::from_env().context("cannot read the launcher's variables")?;
        let planned = plan.nodes * plan.gpus_per_node;
        let Some(env) = env.filter(|e| e.world_size > 1) else {
            if planned > 1 {
                bail!(
                    "{} ({}) x {} ({}) = {planned} ranks, but this process was started alone \
                     (no RANK/WORLD_SIZE); launch with `torchrun --no-python --nproc-per-node {} \
                     skyrl ...` (docs/distributed.md)",
                    plan.nodes_key,
                    plan.nodes,
                    plan.gpus_key,
                    plan.gpus_per_node,
                    plan.gpus_per_node
                );
            }
            return Ok(Self::single());
        };
        check_placement(plan, &env)?;
        let device = if tch::Cuda::is_available() {
            Device::Cuda(env.local_rank)
        } else {
            Device::Cpu
        };
        let backend = match device {
            Device::Cuda(_) => Backend::Nccl,
            _ => Backend::Gloo,
        };
        let timeout = Duration::from_secs_f64(plan.timeout_s.max(1.0));
        let group = ProcessGroup::init(&env, backend, timeout).with_context(|| {
            format!(
                "rank {} of {} could not join the {backend} process group",
                env.rank, env.world_size
            )
        })?;
        tracing::info!(
            rank = env.rank,
            world = env.world_size,
            %backend,
            "joined the process group"
        );
        Ok(Self {
            rank: env.rank,
            world: env.world_size,
            group: Some(group),
            device,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Rank 0 writes logs, metrics, plots, checkpoints' shared parts and exports.
    pub fn is_main(&self) -> bool {
        self.rank == 0
    }

    /// The device this rank trains on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The process group (none in a single process).
    pub fn group(&self) -> Option<&ProcessGroup> {
        self.group.as_ref()
    }

    /// Element-wise sum of `xs` over ranks.
    pub fn sum_f64(&self, xs: &[f64]) -> Result<Vec<f64>> {
        self.reduce_f64(xs, ReduceOp::Sum)
    }

    /// Element-wise maximum of `xs` over ranks.
    pub fn max_f64(&self, xs: &[f64]) -> Result<Vec<f64>> {
        self.reduce_f64(xs, ReduceOp::Max)
    }

    fn reduce_f64(&self, xs: &[f64], op: ReduceOp) -> Result<Vec<f64>> {
        let Some(g) = &self.group else {
            return Ok(xs.to_vec());
        };
        let mut t = Tensor::from_slice(xs).to_device(self.collective_device());
        g.all_reduce(&mut t, op)?;
        Ok(Vec::<f64>::try_from(t.to_device(Device::Cpu))?)
    }

    /// Every rank's `value`, in rank order (sent as JSON).
    pub fn all_gather_json<T: Serialize + DeserializeOwned + Clone>(
        &self,
        value: &T,
    ) -> Result<Vec<T>> {
        let Some(g) = &self.group else {
            return Ok(vec![value.clone()]);
        };
        let parts = g.all_gather_bytes(&serde_json::to_vec(value)?)?;
        parts
            .iter()
            .map(|p| serde_json::from_slice(p).context("a rank sent an unreadable record"))
            .collect()
    }

    /// Every rank's `value`, in rank order, sent in postcard's binary
    /// encoding: compact, and floats arrive bit for bit (NaN and infinities
    /// included), for records as large as a batch of rollouts.
    pub fn all_gather_binary<T: Serialize + DeserializeOwned>(&self, value: T) -> Result<Vec<T>> {
        let Some(g) = &self.group else {
            return Ok(vec![value]);
        };
        let bytes = postcard::to_stdvec(&value).context("cannot encode a record for the ranks")?;
        let parts = g.all_gather_bytes(&bytes)?;
        parts
            .iter()
            .map(|p| postcard::from_bytes(p).context("a rank sent an unreadable record"))
            .collect()
    }

    /// Every rank's `[n, w]` fp32 `t` (same `n` everywhere, widths may
    /// differ), right-padded with zeros to the widest and stacked in rank
    /// order: `[world, n, W]`.
    pub fn all_gather_rows(&self, t: &Tensor) -> Result<Tensor> {
        let Some(g) = &self.group else {
            return Ok(t.unsqueeze(0));
        };
        let (n, w) = (t.size()[0], t.size()[1]);
        let widest = self.max_f64(&[w as f64])?[0] as i64;
        let dev = self.collective_device();
        let padded = t
            .to_kind(Kind::Float)
            .constant_pad_nd([0, widest - w])
            .to_device(dev)
            .contiguous();
        let mut out = Tensor::zeros([self.world as i64 * n * widest], (Kind::Float, dev));
        g.all_gather(&mut out, &padded.view([-1]))?;
        Ok(out
            .view([self.world as i64, n, widest])
            .to_device(t.device()))
    }

    /// Runs `f` on rank 0 first and on the other ranks after it finished
    /// (e.g. writing a file the others then read). An error on rank 0
    /// reaches the others as a failed barrier naming it.
    pub fn main_first<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        if self.is_main() {
            let out = f()?;
            self.barrier()?;
            Ok(out)
        } else {
            self.barrier()
                .context("rank 0 failed while preparing what the other ranks need")?;
            f()
        }
    }

    /// Waits for every rank.
    pub fn barrier(&self) -> Result<()> {
        if let Some(g) = &self.group {
            g.barrier()?;
        }
        Ok(())
    }

    /// Where collectives' tensors must live: the GPU for NCCL, else the CPU.
    pub fn collective_device(&self) -> Device {
        match self.group.as_ref().map(ProcessGroup::backend) {
            Some(Backend::Nccl) => self.device,
            _ => Device::Cpu,
        }
    }
}

/// The launched world must be the planned one.
fn check_placement(plan: &RankPlan, env: &LaunchEnv) -> Result<()> {
    let planned = plan.nodes * plan.gpus_per_node;
    let (nodes_key, gpus_key) = (plan.nodes_key, plan.gpus_key);
    if env.world_size != planned {
        bail!(
            "the launcher started {} ranks ({} per node), but {nodes_key} ({}) x {gpus_key} ({}) \
             = {planned}; set {nodes_key}={} {gpus_key}={}",
            env.world_size,
            env.local_world_size,
            plan.nodes,
            plan.gpus_per_node,
            env.world_size / env.local_world_size.max(1),
            env.local_world_size
        );
    }
    if env.local_world_size != plan.gpus_per_node {
        bail!(
            "the launcher started {} ranks per node, but {gpus_key} = {}",
            env.local_world_size,
            plan.gpus_per_node
        );
    }
    Ok(())
}

/// Which rows of a batch a rank trains on, SkyRL-style: every mini-batch of
/// `mini_rows` rows is split into `world` contiguous equal parts, part `r`
/// going to rank `r`. Returns the global row indices of `rank`, in order.
pub fn rank_rows(total_rows: usize, mini_rows: usize, rank: usize, world: usize) -> Vec<usize> {
    let mut rows = Vec::with_capacity(total_rows / world.max(1));
    let mut start = 0;
    while start < total_rows {
        let len = mini_rows.min(total_rows - start);
        let part = len / world;
        rows.extend(start + rank * part..start + (rank + 1) * part);
        start += len;
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mini_batch_is_split_evenly_in_rank_order() {
        // 2 mini-batches of 4 rows over 2 ranks.
        assert_eq!(rank_rows(8, 4, 0, 2), vec![0, 1, 4, 5]);
        assert_eq!(rank_rows(8, 4, 1, 2), vec![2, 3, 6, 7]);
        // One rank takes everything.
        assert_eq!(rank_rows(6, 3, 0, 1), (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn single_process_exchanges_are_the_identity() {
        let d = Dist::single();
        assert_eq!(d.sum_f64(&[1.0, 2.0]).unwrap(), vec![1.0, 2.0]);
        assert_eq!(d.all_gather_json(&"x".to_string()).unwrap(), vec!["x"]);
        let t = Tensor::from_slice(&[1.0f32, 2.0]).view([1, 2]);
        assert_eq!(d.all_gather_rows(&t).unwrap().size(), vec![1, 1, 2]);
    }
}
