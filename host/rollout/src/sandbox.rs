//! Applies `environment.sandbox` (read-only directory and HTTP grants, limits) to
//! the run's plugins, and wires their tool calls to the run's tool plugins.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use anyhow::{bail, Context};
use skyrl_runtime::{NetworkPolicy, Plugin, ReadOnlyDir, SandboxPolicy, ToolRouter};

use crate::config::PluginSandboxConfig;
use skyrl_model::expand_home;

/// Whether any plugin's settings ask for fuel, so the plugins must be loaded
/// on a fuel-metering engine.
pub fn wants_fuel(settings: &BTreeMap<String, PluginSandboxConfig>) -> bool {
    settings.values().any(|s| s.fuel_per_call.is_some())
}

/// The run's sandbox settings, keyed by plugin name or env class; remembers
/// which keys were used so typos are reported.
pub struct SandboxSettings<'a> {
    settings: &'a BTreeMap<String, PluginSandboxConfig>,
    used: BTreeSet<String>,
}

impl<'a> SandboxSettings<'a> {
    /// Wraps `environment.sandbox`.
    pub fn new(settings: &'a BTreeMap<String, PluginSandboxConfig>) -> Self {
        Self {
            settings,
            used: BTreeSet::new(),
        }
    }

    /// `plugin` with the grants and limits keyed by `alias` (its env class or
    /// rubric name) when there are any, else by the plugin's own name.
    pub fn apply(&mut self, plugin: Plugin, alias: Option<&str>) -> anyhow::Result<Plugin> {
        let found = alias
            .and_then(|alias| self.settings.get_key_value(alias))
            .or_else(|| self.settings.get_key_value(plugin.name()));
        let Some((key, config)) = found else {
            return Ok(plugin);
        };
        self.used.insert(key.clone());
        configure(plugin, config).with_context(|| format!("environment.sandbox.{key}"))
    }

    /// Fails when a key matched no plugin (most likely a typo).
    pub fn check_all_used(&self) -> anyhow::Result<()> {
        let unused: Vec<&String> = self
            .settings
            .keys()
            .filter(|k| !self.used.contains(*k))
            .collect();
        if !unused.is_empty() {
            bail!(
                "environment.sandbox has settings for {unused:?}, which match no loaded plugin \
                 (keys are env classes or plugin names)"
            );
        }
        Ok(())
    }
}

fn configure(plugin: Plugin, config: &PluginSandboxConfig) -> anyhow::Result<Plugin> {
    let mut read_only_dirs = Vec::new();
    for grant in &config.read_only_dirs {
        let written = expand_home(&grant.host);
        let host = written
            .canonicalize()
            .with_context(|| format!("read-only grant {}: no such directory", written.display()))?;
        if !host.is_dir() {
            bail!("read-only grant {} is not a directory", host.display());
        }
        let guest = match &grant.guest {
            Some(guest) if !guest.starts_with('/') => {
                bail!("guest path {guest:?} must be absolute, e.g. /data")
            }
            Some(guest) => guest.clone(),
            // The plain-path form: the same absolute path as written (not
            // resolved through symlinks, so it matches the env config's path).
            None => std::path::absolute(&written)
                .with_context(|| format!("read-only grant {}", written.display()))?
                .to_string_lossy()
                .into_owned(),
        };
        read_only_dirs.push(ReadOnlyDir { host, guest });
    }
    let mut limits = plugin.limits().clone();
    if let Some(bytes) = config.memory_bytes {
        limits.memory_bytes = bytes;
    }
    if let Some(ms) = config.call_timeout_ms {
        if ms == 0 {
            bail!("call_timeout_ms must be positive");
        }
        limits.call_timeout_ms = ms;
    }
    if config.fuel_per_call.is_some() {
        if !plugin.engine().is_metered() {
            bail!(
                "fuel_per_call needs plugins loaded on a fuel-metering engine \
                 (skyrl train does so when any environment.sandbox.*.fuel_per_call is set)"
            );
        }
        limits.fuel_per_call = config.fuel_per_call;
    }
    let mut network = NetworkPolicy {
        allowed_hosts: config.allowed_hosts.clone(),
        ..NetworkPolicy::default()
    };
    if let Some(ms) = config.http_timeout_ms {
        network.request_timeout_ms = ms;
    }
    if let Some(bytes) = config.http_max_response_bytes {
        network.max_response_bytes = bytes;
    }
    if network.allowed_hosts.is_empty()
        && (config.http_timeout_ms.is_some() || config.http_max_response_bytes.is_some())
    {
        bail!(
            "http_timeout_ms / http_max_response_bytes are set, but allowed_hosts grants no host"
        );
    }
    if config.episodes_per_instance == Some(0) {
        bail!("episodes_per_instance must be at least 1 (1: a fresh sandbox per episode)");
    }
    let plugin = plugin.with_limits(limits).with_policy(SandboxPolicy {
        read_only_dirs,
        network,
    })?;
    Ok(match config.episodes_per_instance {
        Some(episodes) => plugin.with_episodes_per_instance(episodes),
        None => plugin,
    })
}

/// Routes `plugin`'s tool calls to `tools` when it declares any; a declared
/// tool that no `--tool` plugin provides is an error naming it.
pub fn wire_tools(plugin: Plugin, tools: &Arc<ToolRouter>) -> anyhow::Result<Plugin> {
    let needed = plugin.metadata().info.uses_tools.clone();
    if needed.is_empty() {
        return Ok(plugin);
    }
    let name = plugin.name().to_string();
    plugin.with_tools(tools.clone()).with_context(|| {
        format!("plugin {name} uses tools {needed:?}: pass the plugins that provide them with --tool PATH")
    })
}
