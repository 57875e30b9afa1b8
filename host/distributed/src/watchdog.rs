//! Dead-rank detection through TCPStore heartbeats.
//!
//! Every rank runs a thread that bumps `heartbeat/<rank>` (under the
//! `skyrl/watchdog/` store prefix) every [`HEARTBEAT_INTERVAL`] over its own
//! store connection. When a collective fails, [`Watchdog::diagnose`] watches
//! the peers' counters for up to [`OBSERVE_WINDOW`] over a third connection:
//! the ranks whose counter did not move are reported as dead. A failing store
//! read means the store's host itself is gone.
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::ffi::{ShimError, StoreHandle};

/// How often each rank bumps its heartbeat counter.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);

/// How long a failed collective watches the peers' heartbeats before naming
/// the silent ones (six heartbeat intervals).
pub const OBSERVE_WINDOW: Duration = Duration::from_secs(3);

/// Timeout of the watchdog's own store connections: a store that does not
/// answer within this is treated as unreachable.
const STORE_TIMEOUT: Duration = Duration::from_secs(2);

fn key(rank: usize) -> String {
    format!("heartbeat/{rank}")
}

/// Stop flag shared with the heartbeat thread.
type StopSignal = Arc<(Mutex<bool>, Condvar)>;

/// The heartbeat thread plus a probe connection for diagnosis.
pub(crate) struct Watchdog {
    rank: usize,
    world_size: usize,
    stop: StopSignal,
    thread: Option<JoinHandle<()>>,
    probe: StoreHandle,
}

impl Watchdog {
    /// Opens two extra connections to `store` and starts beating (the first
    /// beat is synchronous, so peers see this rank from the start).
    pub fn start(store: &StoreHandle, rank: usize, world_size: usize) -> Result<Self, ShimError> {
        let beat = store.clone_connection()?;
        beat.set_timeout(STORE_TIMEOUT)?;
        let probe = store.clone_connection()?;
        probe.set_timeout(STORE_TIMEOUT)?;
        beat.add(&key(rank), 1)?;
        let stop: StopSignal = Arc::new((Mutex::new(false), Condvar::new()));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("skyrl-dist-heartbeat-{rank}"))
            .spawn(move || beat_loop(&beat, rank, &thread_stop))
            .map_err(|e| ShimError {
                kind: crate::ffi::ShimErrorKind::Other,
                message: format!("cannot start the heartbeat thread: {e}"),
            })?;
        Ok(Self {
            rank,
            world_size,
            stop,
            thread: Some(thread),
            probe,
        })
    }

    /// After a failed collective: the peers whose heartbeat did not advance
    /// within [`OBSERVE_WINDOW`] (empty when all are alive; returns early as
    /// soon as every peer has beaten). `Err` when the store is unreachable.
    pub fn diagnose(&self) -> Result<Vec<usize>, ShimError> {
        let peers: Vec<usize> = (0..self.world_size).filter(|&r| r != self.rank).collect();
        let first = self.read(&peers)?;
        let mut silent: Vec<(usize, i64)> = peers.into_iter().zip(first).collect();
        let deadline = Instant::now() + OBSERVE_WINDOW;
        while !silent.is_empty() && Instant::now() < deadline {
            std::thread::sleep(HEARTBEAT_INTERVAL / 2);
            let ranks: Vec<usize> = silent.iter().map(|&(r, _)| r).collect();
            let now = self.read(&ranks)?;
            silent = silent
                .into_iter()
                .zip(now)
                .filter(|&((_, before), after)| after == before)
                .map(|(s, _)| s)
                .collect();
        }
        Ok(silent.into_iter().map(|(r, _)| r).collect())
    }

    /// Current heartbeat counters (`add(key, 0)` does not block on missing keys).
    fn read(&self, ranks: &[usize]) -> Result<Vec<i64>, ShimError> {
        ranks.iter().map(|&r| self.probe.add(&key(r), 0)).collect()
    }
}

fn beat_loop(store: &StoreHandle, rank: usize, stop: &StopSignal) {
    let (lock, cvar) = &**stop;
    let mut warned = false;
    loop {
        let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = cvar
            .wait_timeout_while(guard, HEARTBEAT_INTERVAL, |stopped| !*stopped)
            .unwrap_or_else(|p| p.into_inner());
        if *guard {
            return;
        }
        drop(guard);
        if let Err(e) = store.add(&key(rank), 1) {
            // The store host is gone (or shutting down first); the next
            // collective reports it. Keep trying quietly.
            if !warned {
                tracing::debug!(rank, error = %e.message, "heartbeat could not reach the c10d store");
                warned = true;
            }
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (lock, cvar) = &*self.stop;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cvar.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
