//! Tool plugins and the router that serves `host.call-tool`.

use std::collections::BTreeMap;
use std::sync::Mutex;

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
/// names are unique across plugins. A tool instance that traps is replaced
/// by a fresh one on the next call.
pub struct ToolRouter {
    providers: Vec<Provider>,
    by_name: BTreeMap<String, usize>,
    specs: Vec<ToolSpec>,
}

struct Provider {
    plugin: Plugin,
    instance: Mutex<Option<ToolInstance>>,
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
            router.providers.push(Provider {
                plugin,
                instance: Mutex::new(Some(instance)),
            });
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

    /// Call a tool by name.
    pub fn call(&self, name: &str, args_json: &str) -> Result<String> {
        let index = *self
            .by_name
            .get(name)
            .ok_or_else(|| PluginError::UnknownTool(name.to_string()))?;
        let provider = &self.providers[index];
        let mut slot = provider.instance.lock().expect("tool lock");
        let instance = match slot.as_mut() {
            Some(instance) => instance,
            None => slot.insert(provider.plugin.create_tool()?),
        };
        let result = instance.call(name, args_json);
        if result.as_ref().is_err_and(|e| e.is_trap()) {
            *slot = None;
        }
        result
    }
}
