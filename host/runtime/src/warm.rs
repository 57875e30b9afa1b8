//! Warm environment instances kept between episodes, for plugins whose
//! settings allow more than one episode per sandbox.
//!
//! A fresh sandbox per episode is the default. Reusing one skips the
//! instantiation and memory reset (about 1.5 ms for a componentize-py
//! CPython, see bench/README.md) at the cost of the isolation between
//! episodes: guest-level state (module globals, caches) carries over, as it
//! does between episodes in skyrl-gym's single Python process. Only an
//! instance whose episode closed cleanly is kept: a trap, a deadline, or a
//! denied memory growth discards it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::bindings::env_world::EnvironmentPlugin;
use crate::sandbox::Sandbox;

/// An instance between episodes.
pub(crate) struct WarmEnv {
    pub(crate) sandbox: Sandbox,
    pub(crate) bindings: EnvironmentPlugin,
    /// Episodes this instance has started so far.
    pub(crate) episodes: u32,
}

/// Shards of a pool: a thread returns and takes instances in its own shard
/// first, so an instance keeps running on the core whose caches hold its
/// memory and threads do not contend for one lock.
const SHARDS: usize = 16;

thread_local! {
    /// This thread's shard, assigned round-robin on first use.
    static SHARD: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS
    };
}

/// One plugin's idle instances.
pub(crate) struct WarmEnvs {
    episodes_per_instance: u32,
    /// Most idle instances kept; more are dropped on close. Each holds a
    /// pooled allocator slot and its resident memory.
    max_idle: usize,
    /// Idle instances in all shards (bounds them by `max_idle`).
    idle_count: AtomicUsize,
    shards: [Mutex<Vec<WarmEnv>>; SHARDS],
}

impl WarmEnvs {
    /// An empty pool serving each instance `episodes_per_instance` episodes
    /// and keeping at most `max_idle` between episodes; `None` for 0 or 1
    /// (a fresh sandbox per episode needs no pool).
    pub(crate) fn for_episodes(episodes_per_instance: u32, max_idle: usize) -> Option<Arc<Self>> {
        (episodes_per_instance > 1).then(|| {
            Arc::new(Self {
                episodes_per_instance,
                max_idle,
                idle_count: AtomicUsize::new(0),
                shards: std::array::from_fn(|_| Mutex::new(Vec::new())),
            })
        })
    }

    pub(crate) fn episodes_per_instance(&self) -> u32 {
        self.episodes_per_instance
    }

    /// An idle instance: this thread's most recently returned one first (its
    /// memory is the most likely still in cache), else any other shard's.
    pub(crate) fn take(&self) -> Option<WarmEnv> {
        if self.idle_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let own = SHARD.with(|shard| *shard);
        let found = (0..SHARDS).find_map(|i| lock(&self.shards[(own + i) % SHARDS]).pop());
        if found.is_some() {
            self.idle_count.fetch_sub(1, Ordering::AcqRel);
        }
        found
    }

    /// Keep `warm` for a later episode when it has episodes left, is
    /// untainted and the pool has room; else drop it.
    pub(crate) fn give_back(&self, warm: WarmEnv) {
        if warm.episodes >= self.episodes_per_instance || !warm.sandbox.reusable() {
            return;
        }
        let reserved = self
            .idle_count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_idle).then_some(n + 1)
            });
        if reserved.is_ok() {
            lock(&self.shards[SHARD.with(|shard| *shard)]).push(warm);
        }
    }

    /// How many instances are idle now.
    pub(crate) fn idle(&self) -> usize {
        self.idle_count.load(Ordering::Acquire)
    }
}

fn lock(shard: &Mutex<Vec<WarmEnv>>) -> std::sync::MutexGuard<'_, Vec<WarmEnv>> {
    // A panic while holding the lock leaves a plain Vec: still usable.
    shard.lock().unwrap_or_else(|e| e.into_inner())
}
