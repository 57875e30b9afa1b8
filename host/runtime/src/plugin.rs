//! A loaded, compiled, linked plugin component, ready to instantiate.

use std::path::Path;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use crate::bindings::advantage_world::AdvantagePluginPre;
use crate::bindings::env_world::EnvironmentPluginPre;
use crate::bindings::generator_world::GeneratorPluginPre;
use crate::bindings::policy_loss_world::PolicyLossPluginPre;
use crate::bindings::reward_world::RewardPluginPre;
use crate::bindings::tool_world::ToolPluginPre;
use crate::bindings::types;
use crate::cache::CacheOutcome;
use crate::engine::PluginEngine;
use crate::error::{PluginError, Result};
use crate::limits::{SandboxLimits, SandboxPolicy};
use crate::metadata::{self, PluginInfo, PluginKind, PluginMetadata, World};
use crate::network::NetworkGrant;
use crate::sandbox::Sandbox;
use crate::state::HostState;
use crate::tool::ToolRouter;
use crate::warm::WarmEnvs;

/// A plugin component with its metadata, linked against the host.
///
/// Instantiating is cheap (pre-linked `InstancePre`, pooled memory); every
/// [`EnvInstance`](crate::EnvInstance) gets a fresh sandbox unless
/// [`Plugin::with_episodes_per_instance`] allows reuse.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) engine: PluginEngine,
    metadata: Arc<PluginMetadata>,
    cache_outcome: CacheOutcome,
    pub(crate) pres: Arc<WorldPres>,
    pub(crate) limits: SandboxLimits,
    pub(crate) policy: SandboxPolicy,
    /// `policy.network` compiled; `None` when no host is granted.
    pub(crate) network: Option<Arc<NetworkGrant>>,
    pub(crate) tools: Option<Arc<ToolRouter>>,
    /// Idle env sandboxes kept between episodes; `None`: a fresh sandbox
    /// per episode (the default).
    pub(crate) warm: Option<Arc<WarmEnvs>>,
}

/// Pre-linked instantiators for each world the component implements.
pub(crate) struct WorldPres {
    pub(crate) env: Option<EnvironmentPluginPre<HostState>>,
    pub(crate) tool: Option<ToolPluginPre<HostState>>,
    pub(crate) reward: Option<RewardPluginPre<HostState>>,
    pub(crate) generator: Option<GeneratorPluginPre<HostState>>,
    pub(crate) advantage: Option<AdvantagePluginPre<HostState>>,
    pub(crate) policy_loss: Option<PolicyLossPluginPre<HostState>>,
}

impl Plugin {
    /// Load a component from a `.wasm` file.
    pub fn load(engine: &PluginEngine, path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| PluginError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(engine, &bytes, &path.display().to_string())
    }

    /// Load a component from bytes; `origin` names it in errors and logs.
    pub fn from_bytes(engine: &PluginEngine, bytes: &[u8], origin: &str) -> Result<Self> {
        let (component, cache_outcome) = engine.cache().load(engine.engine(), bytes, origin)?;
        let (imports, exports) = metadata::interface_names(&component, engine.engine());
        let worlds = metadata::detect_worlds(&exports);
        let pres = Arc::new(link(engine, &component, &worlds, origin)?);
        let limits = engine.limits().clone();
        let info = read_info(engine, &pres, &limits, origin, &exports)?;
        tracing::debug!(plugin = %info.name, ?cache_outcome, "loaded plugin from {origin}");
        let metadata = PluginMetadata {
            info,
            worlds,
            imports,
            exports,
            digest: hex::encode(Sha256::digest(bytes)),
            size_bytes: bytes.len(),
        };
        Ok(Self {
            engine: engine.clone(),
            metadata: Arc::new(metadata),
            cache_outcome,
            pres,
            limits,
            policy: SandboxPolicy::default(),
            network: None,
            tools: None,
            warm: None,
        })
    }

    /// The plugin's self-description and interface facts.
    pub fn metadata(&self) -> &PluginMetadata {
        &self.metadata
    }

    /// The plugin's declared name.
    pub fn name(&self) -> &str {
        &self.metadata.info.name
    }

    /// Where the compiled code came from when this plugin was loaded.
    pub fn cache_outcome(&self) -> CacheOutcome {
        self.cache_outcome
    }

    /// Replace the sandbox limits for instances created from now on.
    pub fn with_limits(mut self, limits: SandboxLimits) -> Self {
        self.limits = limits;
        self.renew_warm_pool();
        self
    }

    /// Let one env sandbox serve up to `episodes` episodes (default 1: a
    /// fresh sandbox per episode). A sandbox is reused only after its
    /// episode closed cleanly (no trap, deadline or denied memory growth);
    /// guest state such as module globals then carries over between
    /// episodes, as it does in skyrl-gym's one Python process. Saves the
    /// instantiation: about 1.5 ms per episode for a Python-SDK env.
    ///
    /// At most a quarter of the engine's pooled instance slots
    /// ([`EngineOptions::pool_size`](crate::EngineOptions::pool_size)) stay
    /// idle per plugin, so kept sandboxes never starve other plugins of slots.
    pub fn with_episodes_per_instance(mut self, episodes: u32) -> Self {
        self.warm = WarmEnvs::for_episodes(episodes, self.engine.max_idle_per_plugin());
        self
    }

    /// How many episodes one env sandbox may serve.
    pub fn episodes_per_instance(&self) -> u32 {
        self.warm
            .as_ref()
            .map_or(1, |pool| pool.episodes_per_instance())
    }

    /// Env sandboxes idle between episodes now (always 0 without reuse).
    pub fn idle_env_instances(&self) -> usize {
        self.warm.as_ref().map_or(0, |pool| pool.idle())
    }

    /// Sandboxes built under the old settings must not serve new episodes:
    /// start an empty pool with the same reuse.
    fn renew_warm_pool(&mut self) {
        self.warm = WarmEnvs::for_episodes(
            self.episodes_per_instance(),
            self.engine.max_idle_per_plugin(),
        );
    }

    /// Replace the capability grants for instances created from now on.
    /// Fails on a malformed network grant, naming it.
    pub fn with_policy(mut self, policy: SandboxPolicy) -> Result<Self> {
        self.network = match policy.network.allowed_hosts.is_empty() {
            true => None,
            false => Some(Arc::new(NetworkGrant::new(&policy.network).map_err(
                |e| PluginError::Host(format!("plugin {}: {e}", self.name())),
            )?)),
        };
        self.policy = policy;
        self.renew_warm_pool();
        Ok(self)
    }

    /// Route this plugin's `host.call-tool` imports to `tools`. Fails when the
    /// plugin declares a tool the router does not provide.
    pub fn with_tools(mut self, tools: Arc<ToolRouter>) -> Result<Self> {
        for name in &self.metadata.info.uses_tools {
            if !tools.provides(name) {
                return Err(PluginError::UnknownTool(name.clone()));
            }
        }
        self.tools = Some(tools);
        self.renew_warm_pool();
        Ok(self)
    }

    /// The engine this plugin was compiled for.
    pub fn engine(&self) -> &PluginEngine {
        &self.engine
    }

    /// The sandbox limits new instances get.
    pub fn limits(&self) -> &SandboxLimits {
        &self.limits
    }

    pub(crate) fn sandbox(&self) -> Result<Sandbox> {
        Sandbox::new(
            &self.engine,
            self.name(),
            &self.limits,
            &self.policy,
            self.network.clone(),
            self.tools.clone(),
        )
    }

    pub(crate) fn wrong_world(&self, world: World) -> PluginError {
        PluginError::WrongWorld {
            plugin: self.name().to_string(),
            world: world.name().to_string(),
            exports: self.metadata.exports.join(", "),
        }
    }
}

fn link(
    engine: &PluginEngine,
    component: &Component,
    worlds: &[World],
    origin: &str,
) -> Result<WorldPres> {
    let link_err = |e: wasmtime::Error| PluginError::Link {
        plugin: origin.to_string(),
        reason: format!("{e:#}"),
    };
    let pre = engine
        .linker()
        .instantiate_pre(component)
        .map_err(link_err)?;
    let has = |world| worlds.contains(&world);
    Ok(WorldPres {
        env: has(World::EnvironmentPlugin)
            .then(|| EnvironmentPluginPre::new(pre.clone()))
            .transpose()
            .map_err(link_err)?,
        tool: has(World::ToolPlugin)
            .then(|| ToolPluginPre::new(pre.clone()))
            .transpose()
            .map_err(link_err)?,
        reward: has(World::RewardPlugin)
            .then(|| RewardPluginPre::new(pre.clone()))
            .transpose()
            .map_err(link_err)?,
        generator: has(World::GeneratorPlugin)
            .then(|| GeneratorPluginPre::new(pre.clone()))
            .transpose()
            .map_err(link_err)?,
        advantage: has(World::AdvantagePlugin)
            .then(|| AdvantagePluginPre::new(pre.clone()))
            .transpose()
            .map_err(link_err)?,
        policy_loss: has(World::PolicyLossPlugin)
            .then(|| PolicyLossPluginPre::new(pre.clone()))
            .transpose()
            .map_err(link_err)?,
    })
}

/// Instantiate once and call the `plugin.info` export.
fn read_info(
    engine: &PluginEngine,
    pres: &WorldPres,
    limits: &SandboxLimits,
    origin: &str,
    exports: &[String],
) -> Result<PluginInfo> {
    let mut sandbox = Sandbox::new(
        engine,
        origin,
        limits,
        &SandboxPolicy::default(),
        None,
        None,
    )?;
    let info = if let Some(pre) = &pres.env {
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        sandbox.call("info", |s| bindings.skyrl_plugin_plugin().call_info(s))?
    } else if let Some(pre) = &pres.tool {
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        sandbox.call("info", |s| bindings.skyrl_plugin_plugin().call_info(s))?
    } else if let Some(pre) = &pres.reward {
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        sandbox.call("info", |s| bindings.skyrl_plugin_plugin().call_info(s))?
    } else if let Some(pre) = &pres.generator {
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        sandbox.call("info", |s| bindings.skyrl_plugin_plugin().call_info(s))?
    } else if let Some(pre) = &pres.advantage {
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        let info = sandbox.call("info", |s| bindings.skyrl_plugin_algorithm().call_info(s))?;
        return Ok(algorithm_info(info.name, info.version, info.description));
    } else if let Some(pre) = &pres.policy_loss {
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        let info = sandbox.call("info", |s| bindings.skyrl_plugin_algorithm().call_info(s))?;
        return Ok(algorithm_info(info.name, info.version, info.description));
    } else {
        let reason = format!(
            "it exports none of skyrl:plugin/{{environment,tool,reward,generator,advantage,policy-loss}}@{} (exports: {})",
            metadata::VERSION_LINE,
            exports.join(", ")
        );
        return Err(PluginError::Link {
            plugin: origin.to_string(),
            reason,
        });
    };
    Ok(convert_info(info))
}

/// An algorithm plugin's `algorithm.info` as a [`PluginInfo`] (it calls no tools).
fn algorithm_info(name: String, version: String, description: String) -> PluginInfo {
    PluginInfo {
        name,
        version,
        kind: PluginKind::Algorithm,
        description,
        uses_tools: Vec::new(),
    }
}

fn convert_info(info: types::PluginInfo) -> PluginInfo {
    let kind = match info.kind {
        types::PluginKind::Environment => PluginKind::Environment,
        types::PluginKind::Tool => PluginKind::Tool,
        types::PluginKind::Reward => PluginKind::Reward,
        types::PluginKind::Generator => PluginKind::Generator,
    };
    PluginInfo {
        name: info.name,
        version: info.version,
        kind,
        description: info.description,
        uses_tools: info.uses_tools,
    }
}
