//! [`ProcessGroup`]: rendezvous through a TCPStore and a c10d backend.
//!
//! The store layout copies PyTorch 2.13's `init_process_group(init_method="env://")`:
//! without torchrun's agent store rank 0 hosts a multi-tenant TCPStore at
//! `MASTER_ADDR:MASTER_PORT` and the others connect; with
//! `TORCHELASTIC_USE_AGENT_STORE=True` every rank connects to the agent's store
//! (2.13 adds no per-attempt prefix: the agent makes a new store per restart).
//! The backend then sees `PrefixStore("default_pg") / "0/" / "<device>/"`, the
//! keys Python's default group uses; [`ProcessGroup::store_set`] and friends
//! use the `default_pg` level (Python's `_get_default_store()`).
use std::net::{ToSocketAddrs, UdpSocket};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tch::{Device, Tensor};

use crate::ffi::{self, PgHandle, ShimError, ShimErrorKind, StoreHandle};
use crate::watchdog::Watchdog;
use crate::{DistError, LaunchEnv, Result};

/// The c10d backend that runs the collectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// ProcessGroupGloo: CPU tensors over TCP.
    Gloo,
    /// ProcessGroupNCCL: CUDA tensors on `cuda:<local_rank>`; needs the `nccl`
    /// feature. c10d's NCCL watchdog follows `TORCH_NCCL_ASYNC_ERROR_HANDLING`
    /// (torchrun sets 1, which tears the process down on a timed-out collective).
    Nccl,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Gloo => "gloo",
            Backend::Nccl => "nccl",
        })
    }
}

/// Reduction applied by [`ProcessGroup::all_reduce`] and
/// [`ProcessGroup::reduce_scatter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// Element-wise sum.
    Sum,
    /// Element-wise maximum.
    Max,
    /// Element-wise minimum.
    Min,
    /// Mean over ranks; floating-point tensors only. Gloo has no AVG, so it
    /// runs as Sum followed by a division by the world size.
    Avg,
}

/// A c10d process group over all ranks of the job.
///
/// Collectives block until done, one at a time (an internal mutex serialises
/// callers), so the group is `Send + Sync`. Tensors must live on the CPU for
/// Gloo and on CUDA for NCCL; any dtype c10d supports for the op works (f32,
/// f64, bf16, i64, u8, ...). Non-contiguous tensors are accepted: they go
/// through a contiguous copy, and in-place results are copied back.
///
/// After a collective fails the group is broken (c10d cannot resume a
/// half-finished collective): drop it. Dropping never waits on peers.
pub struct ProcessGroup {
    // Field order is drop order: stop heartbeats, free the backend, then the stores.
    pub(crate) watchdog: Watchdog,
    pub(crate) pg: Mutex<PgHandle>,
    pub(crate) store: StoreHandle,
    pub(crate) env: LaunchEnv,
    backend: Backend,
    timeout: Duration,
}

impl ProcessGroup {
    /// Rendezvous through the TCPStore described by `env` and create the
    /// backend. `timeout` bounds the rendezvous, every collective (Gloo's
    /// `Options::timeout`) and blocking store reads.
    ///
    /// Gloo binds to the first of: the interfaces in `GLOO_SOCKET_IFNAME`
    /// (comma-separated, as PyTorch), else the local address the kernel routes
    /// to `MASTER_ADDR` from (`createDeviceForHostname`; 127.0.0.1 on
    /// loopback, the right NIC across hosts, without depending on what this
    /// machine's hostname resolves to), else `createDefaultDevice`.
    pub fn init(env: &LaunchEnv, backend: Backend, timeout: Duration) -> Result<Self> {
        if backend == Backend::Nccl && !ffi::has_nccl() {
            return Err(DistError::NcclUnavailable);
        }
        let rdzv = |e: ShimError| DistError::Rendezvous {
            rank: env.rank,
            world_size: env.world_size,
            addr: env.store_addr(),
            message: e.message.trim_end_matches('.').to_string(),
        };
        let is_server = !env.use_agent_store && env.rank == 0;
        let tcp = StoreHandle::tcp(
            &env.master_addr,
            env.master_port,
            env.world_size,
            is_server,
            timeout,
        )
        .map_err(rdzv)?;
        let mut env = env.clone();
        if env.master_port == 0 {
            env.master_port = tcp.port().map_err(rdzv)?;
        }
        let store = tcp.prefixed("default_pg").map_err(rdzv)?;
        let device = if backend == Backend::Nccl {
            "cuda/"
        } else {
            "cpu/"
        };
        let backend_store = store
            .prefixed("0/")
            .and_then(|s| s.prefixed(device))
            .map_err(rdzv)?;
        let watchdog = tcp
            .prefixed("skyrl/watchdog/")
            .and_then(|s| Watchdog::start(&s, env.rank, env.world_size))
            .map_err(rdzv)?;
        let pg = match backend {
            Backend::Gloo => {
                let ifnames = std::env::var("GLOO_SOCKET_IFNAME")
                    .ok()
                    .filter(|v| !v.is_empty());
                let hostname = match ifnames {
                    Some(_) => None,
                    None => route_to(&env.master_addr, env.master_port),
                };
                tracing::debug!(
                    rank = env.rank,
                    ?ifnames,
                    ?hostname,
                    "creating ProcessGroupGloo"
                );
                PgHandle::gloo(
                    &backend_store,
                    env.rank,
                    env.world_size,
                    timeout,
                    ifnames.as_deref(),
                    hostname.as_deref(),
                )
            }
            Backend::Nccl => PgHandle::nccl(&backend_store, env.rank, env.world_size, timeout),
        }
        .map_err(rdzv)?;
        Ok(Self {
            watchdog,
            pg: Mutex::new(pg),
            store,
            env,
            backend,
            timeout,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.env.rank
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.env.world_size
    }

    /// Rank on this node.
    pub fn local_rank(&self) -> usize {
        self.env.local_rank
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The timeout given to [`ProcessGroup::init`].
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The launch description (with the actual store port when it was 0).
    pub fn launch_env(&self) -> &LaunchEnv {
        &self.env
    }

    /// Where control tensors (bytes, lengths) live for this backend.
    pub(crate) fn control_device(&self) -> Device {
        match self.backend {
            Backend::Gloo => Device::Cpu,
            Backend::Nccl => Device::Cuda(self.env.local_rank),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, PgHandle> {
        self.pg.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Rejects tensors on the wrong device for the backend.
    pub(crate) fn check_device(&self, op: &'static str, t: &Tensor) -> Result<()> {
        let ok = match self.backend {
            Backend::Gloo => t.device() == Device::Cpu,
            Backend::Nccl => matches!(t.device(), Device::Cuda(_)),
        };
        if ok {
            return Ok(());
        }
        Err(self.invalid(
            op,
            format!(
                "the {} backend needs tensors on {}, got {:?}",
                self.backend,
                self.wanted(),
                t.device()
            ),
        ))
    }

    fn wanted(&self) -> &'static str {
        match self.backend {
            Backend::Gloo => "the CPU",
            Backend::Nccl => "a CUDA device",
        }
    }

    pub(crate) fn invalid(&self, op: &'static str, message: String) -> DistError {
        DistError::InvalidTensor {
            op,
            rank: self.env.rank,
            message,
        }
    }

    /// Runs `f` on a contiguous version of `t` (a copy when needed, written
    /// back afterwards) under the collective lock; maps failures.
    pub(crate) fn in_place(
        &self,
        op: &'static str,
        t: &mut Tensor,
        f: impl FnOnce(&mut PgHandle, &mut Tensor) -> std::result::Result<(), ShimError>,
    ) -> Result<()> {
        let result = {
            let mut pg = self.lock();
            if t.is_contiguous() {
                f(&mut pg, t)
            } else {
                let mut c = t.contiguous();
                let r = f(&mut pg, &mut c);
                if r.is_ok() {
                    t.copy_(&c);
                }
                r
            }
        };
        result.map_err(|e| self.collective_error(op, e))
    }

    /// The ranks whose heartbeats have stopped (watched for up to
    /// [`crate::watchdog::OBSERVE_WINDOW`]); empty when every rank is alive.
    /// For a rank waiting on its peers outside a collective (e.g. polling
    /// the store), which a dead peer would otherwise leave waiting.
    pub fn dead_ranks(&self) -> Result<Vec<usize>> {
        self.watchdog
            .diagnose()
            .map_err(|e| DistError::StoreUnreachable {
                op: "dead_ranks",
                rank: self.env.rank,
                host: self.env.store_host(),
                message: e.message,
            })
    }

    /// Turns a failed collective into an error naming the dead ranks, if any.
    pub(crate) fn collective_error(&self, op: &'static str, e: ShimError) -> DistError {
        let rank = self.env.rank;
        match self.watchdog.diagnose() {
            Ok(dead) if dead.is_empty() => DistError::Collective {
                op,
                rank,
                message: e.message,
            },
            Ok(dead) => DistError::RankFailed {
                dead,
                world_size: self.env.world_size,
                op,
                rank,
                message: e.message,
            },
            Err(store) => DistError::StoreUnreachable {
                op,
                rank,
                host: self.env.store_host(),
                message: format!("{}; store: {}", e.message, store.message),
            },
        }
    }

    /// Maps a failed store operation.
    pub(crate) fn store_error(&self, op: &'static str, key: &str, e: ShimError) -> DistError {
        let rank = self.env.rank;
        match e.kind {
            ShimErrorKind::Network => DistError::StoreUnreachable {
                op,
                rank,
                host: self.env.store_host(),
                message: e.message,
            },
            _ => DistError::Store {
                op,
                key: key.into(),
                rank,
                message: e.message,
            },
        }
    }
}

/// The local address the kernel would use to reach `host` (no packet is sent).
fn route_to(host: &str, port: u16) -> Option<String> {
    let target = (host, port.max(1)).to_socket_addrs().ok()?.next()?;
    let bind = if target.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect(target).ok()?;
    Some(socket.local_addr().ok()?.ip().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_group_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ProcessGroup>();
    }

    #[test]
    fn route_to_loopback_is_loopback() {
        assert_eq!(route_to("127.0.0.1", 29500).as_deref(), Some("127.0.0.1"));
    }

    #[test]
    fn single_process_group_runs_collectives() {
        tch::set_num_threads(1);
        let pg = ProcessGroup::init(&LaunchEnv::single(), Backend::Gloo, Duration::from_secs(10))
            .unwrap();
        assert_ne!(pg.launch_env().master_port, 0);
        let mut t = Tensor::from_slice(&[1.0f32, 2.0]);
        pg.all_reduce(&mut t, ReduceOp::Avg).unwrap();
        assert_eq!(Vec::<f32>::try_from(&t).unwrap(), vec![1.0, 2.0]);
        pg.barrier().unwrap();
        assert_eq!(pg.store_add("k", 5).unwrap(), 5);
    }

    #[cfg(not(feature = "nccl"))]
    #[test]
    fn nccl_without_feature_is_refused() {
        assert!(!ffi::has_nccl());
        let e = ProcessGroup::init(&LaunchEnv::single(), Backend::Nccl, Duration::from_secs(1))
            .err()
            .unwrap();
        assert!(e.to_string().contains("no NCCL support"), "{e}");
    }
}
