//! Tool plugins and the router that serves `host.call-tool`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::bindings::tool_world::ToolPlugin;
use crate::error::{PluginError, Result};
use crate::metadata::World;
use crate::plugin::Plugin;
use crate::sandbox::Sandbox;

/// One tool's description.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments.
    pub parameters: serde_json::Value,
}

/// A tool plugin instance in its own sandbox.
pub struct ToolInstance {
    sandbox: Sandbox,
    bindings: ToolPlugin,
}

impl Plugin {
    /// Instantiate this plugin as a tool provider.
    pub fn create_tool(&self) -> Result<ToolInstance> {
        let pre = self
            .pres
            .tool
            .as_ref()
            .ok_or_else(|| self.wrong_world(World::ToolPlugin))?;
        let mut sandbox = self.sandbox()?;
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        Ok(ToolInstance { sandbox, bindings })
    }
}

impl ToolInstance {
    /// The tools this plugin provides.
    pub fn specs(&mut self) -> Result<Vec<ToolSpec>> {
        let bindings = &self.bindings;
        let specs = self
            .sandbox
            .call("specs", |s| bindings.skyrl_plugin_tool().call_specs(s))?;
        specs
            .into_iter()
            .map(|spec| {
                Ok(ToolSpec {
                    parameters: self.sandbox.parse_json("specs", &spec.parameters_json)?,
                    name: spec.name,
                    description: spec.description,
                })
            })
            .collect()
    }

    /// Call tool `name` with a JSON arguments object.
    pub fn call(&mut self, name: &str, args_json: &str) -> Result<String> {
        let bindings = &self.bindings;
        self.sandbox
            .call("call", |s| {
                bindings.skyrl_plugin_tool().call_call(s, name, args_json)
            })?
            .map_err(|e| self.sandbox.guest_error("call", e))
    }
}

/// Routes tool calls by name to the plugin that provides the tool. Tool
/// names are unique across plugins.
///
/// Every call runs in a fresh instance of the tool's plugin, so one call
/// (untrusted code, say) cannot leave state behind for the next, and calls
/// from concurrent episodes run in parallel. Instantiation is cheap: the
/// component is pre-linked and its memory image is mapped copy-on-write.
pub struct ToolRouter {
    providers: Vec<Plugin>,
    by_name: BTreeMap<String, usize>,
    specs: Vec<ToolSpec>,
}

impl ToolRouter {
    /// Build a router over tool plugins; fails on duplicate tool names.
    pub fn new(plugins: Vec<Plugin>) -> Result<Self> {
        let mut router = Self {
            providers: Vec::new(),
            by_name: BTreeMap::new(),
            specs: Vec::new(),
        };
        for plugin in plugins {
            let mut instance = plugin.create_tool()?;
            for spec in instance.specs()? {
                if router.by_name.contains_key(&spec.name) {
                    return Err(PluginError::Host(format!(
                        "tool {:?} is provided by more than one plugin (again by {})",
                        spec.name,
                        plugin.name()
                    )));
                }
                router
                    .by_name
                    .insert(spec.name.clone(), router.providers.len());
                router.specs.push(spec);
            }
            router.providers.push(plugin);
        }
        Ok(router)
    }

    /// Whether some plugin provides `name`.
    pub fn provides(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// All tools' specs.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// Call a tool by name under its plugin's sandbox limits.
    pub fn call(&self, name: &str, args_json: &str) -> Result<String> {
        self.call_with_timeout(name, args_json, None)
    }

    /// Call a tool by name; `timeout` tightens the plugin's own per-call
    /// deadline (it never extends it).
    pub fn call_with_timeout(
        &self,
        name: &str,
        args_json: &str,
        timeout: Option<Duration>,
    ) -> Result<String> {
        let index = *self
            .by_name
            .get(name)
            .ok_or_else(|| PluginError::UnknownTool(name.to_string()))?;
        let mut plugin = self.providers[index].clone();
        if let Some(timeout) = timeout {
            let mut limits = plugin.limits().clone();
            let ms = u64::try_from(timeout.as_millis())
                .unwrap_or(u64::MAX)
                .max(1);
            limits.call_timeout_ms = limits.call_timeout_ms.min(ms);
            plugin = plugin.with_limits(limits);
        }
        plugin.create_tool()?.call(name, args_json)
    }
}
