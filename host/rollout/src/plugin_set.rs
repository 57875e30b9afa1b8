//! The plugins a run generates with: env plugins by env class (with their
//! `environment.skyrl_gym.<class>` configs), reward plugins by rubric name,
//! and the optional generator plugin.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use skyrl_runtime::Plugin;

/// The run's plugins: env plugins by env class, reward plugins by rubric
/// name, and the generator plugin. Tool plugins are wired into these before
/// they are added (`sandbox::wire_tools`).
#[derive(Clone, Default)]
pub struct PluginSet {
    plugins: BTreeMap<String, Plugin>,
    configs: BTreeMap<String, Value>,
    rewards: BTreeMap<String, Plugin>,
    generator: Option<Plugin>,
    algorithms: BTreeMap<String, Plugin>,
}

impl PluginSet {
    /// Registers `plugin` for `env_class` with its env config (`environment.skyrl_gym.<env_class>`).
    pub fn insert(&mut self, env_class: &str, plugin: Plugin, config: Value) {
        self.plugins.insert(env_class.to_string(), plugin);
        self.configs.insert(env_class.to_string(), config);
    }

    /// Registers a reward plugin under `name` (for `environment.reward_rubric`).
    pub fn insert_reward(&mut self, name: &str, plugin: Plugin) {
        self.rewards.insert(name.to_string(), plugin);
    }

    /// Registers the rollout generator plugin (`skyrl train --generator`).
    pub fn set_generator(&mut self, plugin: Plugin) {
        self.generator = Some(plugin);
    }

    /// Registers an algorithm plugin (advantage estimator and/or policy loss)
    /// under `name`, selected as `plugin:NAME` (`skyrl train --algorithm`).
    pub fn insert_algorithm(&mut self, name: &str, plugin: Plugin) {
        self.algorithms.insert(name.to_string(), plugin);
    }

    /// The registered algorithm plugins, by name.
    pub fn algorithms(&self) -> &BTreeMap<String, Plugin> {
        &self.algorithms
    }

    /// The registered generator plugin, if any.
    pub fn generator(&self) -> Option<&Plugin> {
        self.generator.as_ref()
    }

    /// The registered reward plugins.
    pub fn rewards(&self) -> &BTreeMap<String, Plugin> {
        &self.rewards
    }

    /// The registered env classes.
    pub fn classes(&self) -> Vec<String> {
        self.plugins.keys().cloned().collect()
    }

    /// The plugin and env config of `env_class`.
    pub fn get(&self, env_class: &str) -> Result<(&Plugin, Value)> {
        let plugin = self.plugins.get(env_class).with_context(|| {
            format!(
                "no plugin for env class `{env_class}` (registered: {:?}); pass --plugin {env_class}=PATH",
                self.classes()
            )
        })?;
        let config = self
            .configs
            .get(env_class)
            .cloned()
            .unwrap_or_else(|| json!({}));
        Ok((plugin, config))
    }
}
