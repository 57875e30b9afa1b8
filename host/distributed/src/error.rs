//! The crate's error type: every message names the rank, the operation and
//! what to try next.
use thiserror::Error;

/// Errors from the launch environment, the rendezvous, collectives and the store.
#[derive(Debug, Error)]
pub enum DistError {
    /// A launcher variable is missing, malformed or inconsistent.
    #[error("launch environment: {var}: {message}")]
    Env {
        /// The variable at fault (e.g. `MASTER_ADDR`).
        var: String,
        /// What is wrong and how to fix it.
        message: String,
    },

    /// Creating or joining the TCPStore or the process group failed.
    #[error(
        "rank {rank} of {world_size}: rendezvous at {addr} failed: {message}. \
         Check that all {world_size} ranks were started with the same MASTER_ADDR/MASTER_PORT, \
         that the port is free and reachable, or raise the timeout"
    )]
    Rendezvous {
        /// This process's rank.
        rank: usize,
        /// Expected number of ranks.
        world_size: usize,
        /// `host:port` of the store.
        addr: String,
        /// c10d's message.
        message: String,
    },

    /// `Backend::Nccl` was asked for but the crate was built without it.
    #[error(
        "this build of skyrl-distributed has no NCCL support: rebuild with `--features nccl` \
         (needs a CUDA torch and the CUDA/NCCL headers) or use Backend::Gloo"
    )]
    NcclUnavailable,

    /// A tensor was rejected before reaching c10d (device, shape, dtype).
    #[error("rank {rank}: {op}: {message}")]
    InvalidTensor {
        /// The operation (e.g. `all_gather`).
        op: &'static str,
        /// This process's rank.
        rank: usize,
        /// What is wrong with the tensor.
        message: String,
    },

    /// A collective failed while every peer still looked alive (a timeout,
    /// mismatched collectives across ranks, or an unsupported dtype/op).
    #[error(
        "rank {rank}: {op} failed: {message}. All ranks still send heartbeats: check that every \
         rank issues the same collectives in the same order with matching shapes and dtypes, \
         or raise the timeout"
    )]
    Collective {
        /// The operation.
        op: &'static str,
        /// This process's rank.
        rank: usize,
        /// c10d's message.
        message: String,
    },

    /// A collective failed and these ranks stopped sending heartbeats.
    #[error(
        "{} of {world_size} stopped responding during {op} ({message}); seen from rank {rank}. \
         Look at that rank's log for its own error (or an OOM kill) and restart the job",
        ranks_phrase(dead)
    )]
    RankFailed {
        /// The ranks whose heartbeat stopped.
        dead: Vec<usize>,
        /// World size.
        world_size: usize,
        /// The operation.
        op: &'static str,
        /// This process's rank.
        rank: usize,
        /// c10d's message.
        message: String,
    },

    /// The TCPStore could not be reached: its host died or the network broke.
    #[error(
        "rank {rank}: {op} failed and the c10d store hosted by {host} is unreachable ({message}), \
         so {host} most likely died. Look at its log and restart the job"
    )]
    StoreUnreachable {
        /// The operation.
        op: &'static str,
        /// This process's rank.
        rank: usize,
        /// Who hosts the store, e.g. "rank 0 at 10.0.0.1:29500".
        host: String,
        /// c10d's message.
        message: String,
    },

    /// A store operation failed (typically `store_get` timing out).
    #[error(
        "rank {rank}: store {op} of key {key:?} failed: {message}. A get waits for another rank \
         to set the key: check that it does, or raise the timeout"
    )]
    Store {
        /// `set`, `get`, `add` or `check`.
        op: &'static str,
        /// The key.
        key: String,
        /// This process's rank.
        rank: usize,
        /// c10d's message.
        message: String,
    },
}

/// "rank 1" or "ranks 1, 3".
fn ranks_phrase(ranks: &[usize]) -> String {
    let list: Vec<String> = ranks.iter().map(usize::to_string).collect();
    match list.len() {
        1 => format!("rank {}", list[0]),
        _ => format!("ranks {}", list.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_failed_reads_naturally() {
        let e = DistError::RankFailed {
            dead: vec![1],
            world_size: 2,
            op: "all_reduce",
            rank: 0,
            message: "Connection closed by peer".into(),
        };
        let s = e.to_string();
        assert!(
            s.starts_with(
                "rank 1 of 2 stopped responding during all_reduce (Connection closed by peer)"
            ),
            "{s}"
        );
        let e = DistError::RankFailed {
            dead: vec![1, 3],
            world_size: 4,
            op: "barrier",
            rank: 0,
            message: "x".into(),
        };
        assert!(e
            .to_string()
            .starts_with("ranks 1, 3 of 4 stopped responding during barrier"));
    }
}
