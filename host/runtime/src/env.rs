//! A live environment episode inside its own sandbox.

use wasmtime::component::ResourceAny;

use crate::bindings::env_world::EnvironmentPlugin;
use crate::bindings::types;
use crate::error::Result;
use crate::metadata::World;
use crate::plugin::Plugin;
use crate::sandbox::Sandbox;
use crate::Message;

/// What `init` returns.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InitOutput {
    pub prompt: Vec<Message>,
    pub metadata: serde_json::Value,
}

/// What `step` returns.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepOutput {
    pub observations: Vec<Message>,
    pub reward: f64,
    pub done: bool,
    pub metadata: serde_json::Value,
}

/// One environment (one trajectory) in a fresh sandbox.
///
/// Calls after a trap fail with [`PluginError::Poisoned`](crate::PluginError::Poisoned);
/// the rest of the process is unaffected.
pub struct EnvInstance {
    sandbox: Sandbox,
    bindings: EnvironmentPlugin,
    env: Option<ResourceAny>,
}

impl Plugin {
    /// Create an environment from its config and the dataset row's extras.
    pub fn create_env(
        &self,
        config: &serde_json::Value,
        extras: &serde_json::Value,
    ) -> Result<EnvInstance> {
        let pre = self
            .pres
            .env
            .as_ref()
            .ok_or_else(|| self.wrong_world(World::EnvironmentPlugin))?;
        let mut sandbox = self.sandbox()?;
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        let (config, extras) = (config.to_string(), extras.to_string());
        let created = sandbox.call("create", |s| {
            bindings
                .skyrl_plugin_environment()
                .env()
                .call_create(s, &config, &extras)
        })?;
        let env = created.map_err(|e| sandbox.guest_error("create", e))?;
        Ok(EnvInstance {
            sandbox,
            bindings,
            env: Some(env),
        })
    }
}

impl EnvInstance {
    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        self.sandbox.plugin()
    }

    fn handle(&self) -> Result<ResourceAny> {
        self.env
            .ok_or_else(|| crate::PluginError::Host("environment already closed".into()))
    }

    /// Start the episode; returns the (possibly rewritten) prompt.
    pub fn init(&mut self, prompt: &[Message]) -> Result<InitOutput> {
        let env = self.handle()?;
        let prompt: Vec<types::Message> = prompt.iter().map(to_wit).collect();
        let bindings = &self.bindings;
        let out = self
            .sandbox
            .call("init", |s| {
                bindings
                    .skyrl_plugin_environment()
                    .env()
                    .call_init(s, env, &prompt)
            })?
            .map_err(|e| self.sandbox.guest_error("init", e))?;
        Ok(InitOutput {
            prompt: out.prompt.into_iter().map(from_wit).collect(),
            metadata: self.sandbox.parse_json("init", &out.metadata_json)?,
        })
    }

    /// Apply one model action.
    pub fn step(&mut self, action: &str) -> Result<StepOutput> {
        let env = self.handle()?;
        let bindings = &self.bindings;
        let out = self
            .sandbox
            .call("step", |s| {
                bindings
                    .skyrl_plugin_environment()
                    .env()
                    .call_step(s, env, action)
            })?
            .map_err(|e| self.sandbox.guest_error("step", e))?;
        Ok(StepOutput {
            observations: out.observations.into_iter().map(from_wit).collect(),
            reward: out.reward,
            done: out.done,
            metadata: self.sandbox.parse_json("step", &out.metadata_json)?,
        })
    }

    /// The episode's metrics (a JSON object).
    pub fn metrics(&mut self) -> Result<serde_json::Value> {
        let env = self.handle()?;
        let bindings = &self.bindings;
        let text = self.sandbox.call("metrics", |s| {
            bindings
                .skyrl_plugin_environment()
                .env()
                .call_metrics(s, env)
        })?;
        self.sandbox.parse_json("metrics", &text)
    }

    /// End the episode and release the guest resource.
    pub fn close(&mut self) -> Result<()> {
        let Some(env) = self.env.take() else {
            return Ok(());
        };
        let bindings = &self.bindings;
        self.sandbox.call("close", |s| {
            bindings.skyrl_plugin_environment().env().call_close(s, env)
        })?;
        self.sandbox.call("drop", |s| env.resource_drop(s))
    }
}

pub(crate) fn to_wit(message: &Message) -> types::Message {
    types::Message {
        role: message.role.clone(),
        content: message.content.clone(),
    }
}

pub(crate) fn from_wit(message: types::Message) -> Message {
    Message {
        role: message.role,
        content: message.content,
    }
}
