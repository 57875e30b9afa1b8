//! One sandboxed store: limits applied per call, traps classified, and the
//! instance poisoned after any trap.

use std::sync::Arc;

use wasmtime::{Store, Trap};

use crate::engine::{PluginEngine, EPOCH_TICK};
use crate::error::{GuestErrorKind, PluginError, Result};
use crate::limits::{SandboxLimits, SandboxPolicy};
use crate::network::NetworkGrant;
use crate::state::HostState;
use crate::tool::ToolRouter;

pub(crate) struct Sandbox {
    pub(crate) store: Store<HostState>,
    plugin: String,
    limits: SandboxLimits,
    /// Whether the engine counts fuel (else only the deadline applies).
    metered: bool,
    poisoned: bool,
    /// A call had memory growth denied (even one the guest survived): the
    /// instance's state is suspect, so it is never reused.
    memory_denied: bool,
}

impl Sandbox {
    pub(crate) fn new(
        engine: &PluginEngine,
        plugin: &str,
        limits: &SandboxLimits,
        policy: &SandboxPolicy,
        network: Option<Arc<NetworkGrant>>,
        tools: Option<Arc<ToolRouter>>,
    ) -> Result<Self> {
        if limits.fuel_per_call.is_some() && !engine.is_metered() {
            return Err(PluginError::Host(format!(
                "plugin {plugin}: fuel_per_call is set, but its engine was built without fuel \
                 metering (load it with PluginEngine::shared_metered, or unset fuel_per_call \
                 and rely on the call deadline)"
            )));
        }
        let state = HostState::new(plugin, limits.memory_bytes, policy, network, tools)?;
        let mut store = Store::new(engine.engine(), state);
        store.limiter(|state| &mut state.limiter);
        store.epoch_deadline_trap();
        Ok(Self {
            store,
            plugin: plugin.to_string(),
            limits: limits.clone(),
            metered: engine.is_metered(),
            poisoned: false,
            memory_denied: false,
        })
    }

    pub(crate) fn plugin(&self) -> &str {
        &self.plugin
    }

    /// Run `f` under this call's fuel and deadline, mapping traps to typed
    /// errors. After a trap every later call fails with `Poisoned`.
    pub(crate) fn call<R>(
        &mut self,
        call: &str,
        f: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R> {
        if self.poisoned {
            return Err(PluginError::Poisoned {
                plugin: self.plugin.clone(),
            });
        }
        self.arm()?;
        let result = f(&mut self.store);
        self.memory_denied |= self.store.data().limiter.hit;
        match result {
            Ok(value) => Ok(value),
            Err(err) => {
                self.poisoned = true;
                Err(self.classify(call, err))
            }
        }
    }

    /// Whether another episode may run in this instance: no call trapped
    /// and none had memory growth denied.
    pub(crate) fn reusable(&self) -> bool {
        !self.poisoned && !self.memory_denied
    }

    fn arm(&mut self) -> Result<()> {
        if self.metered {
            let fuel = self.limits.fuel_per_call.unwrap_or(u64::MAX);
            self.store
                .set_fuel(fuel)
                .map_err(|e| PluginError::Host(format!("cannot set fuel: {e:#}")))?;
        }
        let timeout = self.limits.call_timeout();
        let ticks = timeout.as_micros() / EPOCH_TICK.as_micros();
        self.store.set_epoch_deadline(ticks.max(1) as u64);
        let state = self.store.data_mut();
        state.limiter.hit = false;
        state.http.call_deadline = std::time::Instant::now() + timeout;
        Ok(())
    }

    fn classify(&self, call: &str, err: wasmtime::Error) -> PluginError {
        let plugin = self.plugin.clone();
        let call = call.to_string();
        if self.store.data().limiter.hit {
            return PluginError::MemoryLimit {
                plugin,
                call,
                limit_bytes: self.limits.memory_bytes,
            };
        }
        if let Some(limit) = err.downcast_ref::<wasmtime::PoolConcurrencyLimitError>() {
            return PluginError::PoolExhausted {
                plugin,
                reason: limit.to_string(),
            };
        }
        match err.downcast_ref::<Trap>() {
            Some(Trap::OutOfFuel) => PluginError::OutOfFuel {
                plugin,
                call,
                fuel: self.limits.fuel_per_call.unwrap_or(u64::MAX),
            },
            Some(Trap::Interrupt) => PluginError::Timeout {
                plugin,
                call,
                timeout_ms: self.limits.call_timeout_ms,
            },
            Some(Trap::StackOverflow) => PluginError::StackOverflow { plugin, call },
            _ => PluginError::Trap {
                plugin,
                call,
                reason: format!("{err:#}"),
            },
        }
    }

    /// Convert a guest-reported error into a [`PluginError`].
    pub(crate) fn guest_error(
        &self,
        call: &str,
        err: crate::bindings::types::PluginError,
    ) -> PluginError {
        use crate::bindings::types::PluginError as Wit;
        let (kind, message) = match err {
            Wit::InvalidConfig(m) => (GuestErrorKind::InvalidConfig, m),
            Wit::InvalidInput(m) => (GuestErrorKind::InvalidInput, m),
            Wit::Failed(m) => (GuestErrorKind::Failed, m),
        };
        PluginError::Guest {
            plugin: self.plugin.clone(),
            call: call.to_string(),
            kind,
            message,
        }
    }

    /// A guest result that breaks the interface's rules (lengths, counts).
    pub(crate) fn invalid_output(&self, call: &str, problem: String) -> PluginError {
        PluginError::Guest {
            plugin: self.plugin.clone(),
            call: call.to_string(),
            kind: GuestErrorKind::Failed,
            message: format!("invalid output: {problem}"),
        }
    }

    /// Parse a JSON value the guest returned.
    pub(crate) fn parse_json(&self, call: &str, text: &str) -> Result<serde_json::Value> {
        if text.trim().is_empty() {
            return Ok(serde_json::Value::Object(Default::default()));
        }
        serde_json::from_str(text).map_err(|e| PluginError::BadJson {
            plugin: self.plugin.clone(),
            call: call.to_string(),
            reason: e.to_string(),
        })
    }
}
