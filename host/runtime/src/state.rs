//! Per-instance host state: WASI context, memory limiter, host imports.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime::ResourceLimiter;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::bindings::host::{self, LogLevel};
use crate::bindings::types;
use crate::error::{PluginError, Result};
use crate::generator::GeneratorHost;
use crate::limits::SandboxPolicy;
use crate::network::{HttpHooks, NetworkGrant};
use crate::stdio::{Stream, TracingOutput};
use crate::tool::ToolRouter;

/// Denies memory growth past a cap and remembers that it did.
pub(crate) struct MemoryLimiter {
    pub(crate) limit_bytes: usize,
    pub(crate) hit: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.limit_bytes;
        self.hit |= !allowed;
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// Everything one plugin instance's store holds.
pub(crate) struct HostState {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    plugin: Arc<str>,
    tools: Option<Arc<ToolRouter>>,
    /// The trainer side of `llm`/`envs` (generator plugins only).
    pub(crate) generator_host: Option<Arc<dyn GeneratorHost>>,
    http_ctx: WasiHttpCtx,
    /// Outbound HTTP: the plugin's grant and the current call's deadline.
    pub(crate) http: HttpHooks,
}

impl HostState {
    pub(crate) fn new(
        plugin: &str,
        memory_bytes: usize,
        policy: &SandboxPolicy,
        network: Option<Arc<NetworkGrant>>,
        tools: Option<Arc<ToolRouter>>,
    ) -> Result<Self> {
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdout(TracingOutput::new(plugin, Stream::Stdout))
            .stderr(TracingOutput::new(plugin, Stream::Stderr))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            // Granted files are read on the calling thread instead of a
            // tokio blocking-pool hop per read (a SQLite page read cost a
            // thread round trip). Set before the preopens, which copy it.
            .allow_blocking_current_thread(true);
        for dir in &policy.read_only_dirs {
            builder
                .preopened_dir(&dir.host, &dir.guest, FsPerms::ReadOnly)
                .map_err(|e| {
                    PluginError::Host(format!(
                        "cannot grant {} to plugin {plugin} as {}: {e:#}",
                        dir.host.display(),
                        dir.guest
                    ))
                })?;
        }
        let plugin: Arc<str> = plugin.into();
        Ok(Self {
            wasi: builder.build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter {
                limit_bytes: memory_bytes,
                hit: false,
            },
            http_ctx: WasiHttpCtx::new(),
            http: HttpHooks {
                plugin: plugin.clone(),
                grant: network,
                call_deadline: Instant::now(),
            },
            plugin,
            tools,
            generator_host: None,
        })
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http,
        }
    }
}

impl types::Host for HostState {}

impl host::Host for HostState {
    fn log(&mut self, level: LogLevel, message: String) {
        let plugin = &*self.plugin;
        match level {
            LogLevel::Trace => tracing::trace!(target: "skyrl::plugin", plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "skyrl::plugin", plugin, "{message}"),
            LogLevel::Info => tracing::info!(target: "skyrl::plugin", plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "skyrl::plugin", plugin, "{message}"),
            LogLevel::Error => tracing::error!(target: "skyrl::plugin", plugin, "{message}"),
        }
    }

    fn call_tool(
        &mut self,
        name: String,
        args_json: String,
    ) -> std::result::Result<String, String> {
        let Some(router) = &self.tools else {
            return Err(format!("no tools are available to plugin {}", self.plugin));
        };
        router.call(&name, &args_json).map_err(|e| e.to_string())
    }

    fn call_tool_timeout(
        &mut self,
        name: String,
        args_json: String,
        timeout_ms: u32,
    ) -> std::result::Result<String, String> {
        let Some(router) = &self.tools else {
            return Err(format!("no tools are available to plugin {}", self.plugin));
        };
        let timeout = std::time::Duration::from_millis(u64::from(timeout_ms));
        router
            .call_with_timeout(&name, &args_json, Some(timeout))
            .map_err(|e| e.to_string())
    }
}
