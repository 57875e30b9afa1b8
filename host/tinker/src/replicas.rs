//! Data parallelism behind the API, when `skyrl tinker-serve` is launched
//! by torchrun (or srun): every rank holds every training model; rank 0
//! serves HTTP and runs the model thread, and sends each training request to
//! the other ranks through the job's TCPStore (a sequence number, the
//! request, and an acknowledgement count, so rank 0 never overwrites a
//! request a rank has not read; ranks poll the store, so an idle server or a
//! long sampling job on rank 0 runs into no collective timeout). A
//! forward-backward splits its datums into contiguous parts, one per rank,
//! and gathers the per-datum results back in order; `optim_step` sums the
//! gradients over the ranks (Tinker's losses are sums) before AdamW, so
//! every rank takes the same step and the models stay identical. Saving and
//! sampling run on rank 0 alone.

use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use skyrl_distributed::{LaunchEnv, ReduceOp};
use skyrl_train::dist::{Dist, RankPlan};
use tch::{Device, Tensor};

use crate::loss::LossFn;
use crate::training::{AdamStep, DatumInput};

/// A request every rank applies.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Replicated {
    Create {
        model_id: String,
        rank: i64,
        seed: u64,
    },
    ForwardBackward {
        model_id: String,
        data: Vec<DatumInput>,
        loss: LossFn,
        backward: bool,
    },
    OptimStep {
        model_id: String,
        adam: AdamStep,
    },
    Load {
        model_id: String,
        source: PathBuf,
        optimizer: bool,
        create: Option<(i64, u64)>,
    },
    Unload {
        model_ids: Vec<String>,
    },
}

const SEQ_KEY: &str = "skyrl_tinker/seq";
const OP_KEY: &str = "skyrl_tinker/op";
const ACK_KEY: &str = "skyrl_tinker/ack";
/// How often a waiting rank asks the store again.
const POLL: Duration = Duration::from_millis(2);
/// How long rank 0 waits for the ranks to take a request before checking
/// their heartbeats.
const LIVENESS_CHECK: Duration = Duration::from_secs(2);

/// This process's ranks: a world of one, or a process group.
pub struct Ranks {
    dist: Dist,
    /// Requests sent (rank 0) or received (the others).
    count: i64,
    timeout: Duration,
}

impl Ranks {
    /// One process.
    pub fn single() -> Self {
        Self {
            dist: Dist::single(),
            count: 0,
            timeout: Duration::from_secs(600),
        }
    }

    /// Joins the ranks the launcher's variables describe (Gloo on CPU, NCCL
    /// on `cuda:LOCAL_RANK`); one process without a launcher. `timeout`
    /// bounds a collective and a rank's wait to take a request.
    pub fn join(timeout: Duration) -> Result<Self> {
        let env = LaunchEnv::from_env().context("cannot read the launcher's variables")?;
        let Some(env) = env.filter(|e| e.world_size > 1) else {
            return Ok(Self::single());
        };
        let per_node = env.local_world_size.max(1);
        let dist = Dist::join(&RankPlan {
            nodes: env.world_size / per_node,
            gpus_per_node: per_node,
            nodes_key: "the launcher's node count",
            gpus_key: "the launcher's ranks per node",
            timeout_s: timeout.as_secs_f64(),
        })?;
        Ok(Self {
            dist,
            count: 0,
            timeout,
        })
    }

    pub fn rank(&self) -> usize {
        self.dist.rank()
    }

    pub fn world(&self) -> usize {
        self.dist.world()
    }

    /// The device this rank's models live on.
    pub fn device(&self) -> Device {
        self.dist.device()
    }

    /// Rank 0 sends `r` to the other ranks, once every rank has taken the
    /// previous request.
    pub fn send(&mut self, r: &Replicated) -> Result<()> {
        let Some(g) = self.dist.group() else {
            return Ok(());
        };
        let others = (self.world() - 1) as i64;
        let started = Instant::now();
        let mut next_check = started + LIVENESS_CHECK;
        while g.store_add(ACK_KEY, 0)? < self.count * others {
            let now = Instant::now();
            if now > started + self.timeout {
                bail!(
                    "a rank did not take request {} within {:?}: it hangs",
                    self.count,
                    self.timeout
                );
            }
            // A rank still busy with the last request (loading a model)
            // keeps its heartbeat; a dead one does not.
            if now > next_check {
                let dead = g.dead_ranks()?;
                if !dead.is_empty() {
                    bail!("rank(s) {dead:?} of {} died", self.world());
                }
                next_check = Instant::now() + LIVENESS_CHECK;
            }
            std::thread::sleep(POLL);
        }
        let bytes = postcard::to_stdvec(r).context("cannot encode a request for the ranks")?;
        g.store_set(OP_KEY, &bytes)?;
        self.count = g.store_add(SEQ_KEY, 1)?;
        Ok(())
    }

    /// A rank other than 0 waits for rank 0's next request (polling the
    /// store: an idle server keeps it waiting without a timeout).
    pub fn receive(&mut self) -> Result<Replicated> {
        let g = self
            .dist
            .group()
            .context("only a rank of several receives requests")?;
        while g.store_add(SEQ_KEY, 0)? <= self.count {
            std::thread::sleep(POLL);
        }
        let bytes = g.store_get(OP_KEY)?;
        self.count += 1;
        g.store_add(ACK_KEY, 1)?;
        postcard::from_bytes(&bytes).context("rank 0 sent an unreadable request")
    }

    /// Every rank's `value`, in rank order.
    pub fn gather<T: Serialize + for<'de> Deserialize<'de>>(&self, value: T) -> Result<Vec<T>> {
        self.dist.all_gather_binary(value)
    }

    /// Sums `grads` over the ranks, in place.
    pub fn sum(&self, grads: &mut [Tensor]) -> Result<()> {
        match self.dist.group() {
            Some(g) if !grads.is_empty() => Ok(g.all_reduce_many(grads, ReduceOp::Sum)?),
            _ => Ok(()),
        }
    }
}

/// The datums of rank `rank` of `world` among `n`: contiguous, the first
/// `n % world` ranks taking one more.
pub fn shard(n: usize, rank: usize, world: usize) -> Range<usize> {
    let (base, extra) = (n / world, n % world);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_datum_once_in_order() {
        for n in 0..9 {
            for world in 1..5 {
                let all: Vec<usize> = (0..world).flat_map(|r| shard(n, r, world)).collect();
                assert_eq!(all, (0..n).collect::<Vec<_>>(), "n={n} world={world}");
            }
        }
        assert_eq!(shard(5, 0, 2), 0..3);
        assert_eq!(shard(5, 1, 2), 3..5);
        assert_eq!(shard(1, 1, 2), 1..1);
    }

    #[test]
    fn requests_survive_the_wire() {
        let r = Replicated::ForwardBackward {
            model_id: "s:train:0".into(),
            data: vec![DatumInput {
                tokens: vec![1, 2],
                targets: vec![2, 3],
                weights: vec![1.0, f32::NAN],
                sampler_logprobs: vec![],
                advantages: vec![],
            }],
            loss: LossFn::Dppo {
                delta_low: 0.1,
                delta_high: 0.3,
            },
            backward: true,
        };
        let back: Replicated = postcard::from_bytes(&postcard::to_stdvec(&r).unwrap()).unwrap();
        match back {
            Replicated::ForwardBackward { data, loss, .. } => {
                assert_eq!(data[0].tokens, [1, 2]);
                assert!(data[0].weights[1].is_nan());
                assert_eq!(
                    loss,
                    LossFn::Dppo {
                        delta_low: 0.1,
                        delta_high: 0.3
                    }
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
