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

/// One plugin's idle instances.
pub(crate) struct WarmEnvs {
    episodes_per_instance: u32,
    /// Most idle instances kept; more are dropped on close. Each holds a
    /// pooled allocator slot and its resident memory.
    max_idle: usize,
    idle: Mutex<Vec<WarmEnv>>,
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
                idle: Mutex::new(Vec::new()),
            })
        })
    }

    pub(crate) fn episodes_per_instance(&self) -> u32 {
        self.episodes_per_instance
    }

    /// An idle instance, most recently used first (its memory is the most
    /// likely still in cache).
    pub(crate) fn take(&self) -> Option<WarmEnv> {
        self.lock().pop()
    }

    /// Keep `warm` for a later episode when it has episodes left, is
    /// untainted and the pool has room; else drop it.
    pub(crate) fn give_back(&self, warm: WarmEnv) {
        if warm.episodes >= self.episodes_per_instance || !warm.sandbox.reusable() {
            return;
        }
        let mut idle = self.lock();
        if idle.len() < self.max_idle {
            idle.push(warm);
        }
    }

    /// How many instances are idle now.
    pub(crate) fn idle(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<WarmEnv>> {
        // A panic while holding the lock leaves a plain Vec: still usable.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}
