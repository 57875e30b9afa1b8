//! A live environment episode inside its own sandbox.

use std::sync::Arc;

use wasmtime::component::ResourceAny;

use crate::bindings::types;
use crate::error::Result;
use crate::metadata::World;
use crate::plugin::Plugin;
use crate::warm::{WarmEnv, WarmEnvs};
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

/// One environment (one trajectory) in its sandbox: a fresh one, or with
/// `episodes_per_instance` above 1 ([`Plugin::with_episodes_per_instance`]),
/// one whose earlier episode closed cleanly.
///
/// Calls after a trap fail with [`PluginError::Poisoned`](crate::PluginError::Poisoned);
/// the rest of the process is unaffected.
pub struct EnvInstance {
    plugin: String,
    /// The sandbox and its bindings; `None` once a clean close handed them
    /// back to the plugin's warm pool.
    live: Option<WarmEnv>,
    env: Option<ResourceAny>,
    /// Where a clean close returns the sandbox (reuse enabled).
    pool: Option<Arc<WarmEnvs>>,
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
        let mut live = match self.warm.as_ref().and_then(|pool| pool.take()) {
            Some(warm) => warm,
            None => {
                let mut sandbox = self.sandbox()?;
                let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
                WarmEnv {
                    sandbox,
                    bindings,
                    episodes: 0,
                }
            }
        };
        live.episodes += 1;
        let (config, extras) = (config.to_string(), extras.to_string());
        let WarmEnv {
            sandbox, bindings, ..
        } = &mut live;
        let created = sandbox.call("create", |s| {
            bindings
                .skyrl_plugin_environment()
                .env()
                .call_create(s, &config, &extras)
        })?;
        let env = match created {
            Ok(env) => env,
            Err(e) => {
                let err = live.sandbox.guest_error("create", e);
                // The guest refused the config; the instance itself is sound.
                if let Some(pool) = &self.warm {
                    pool.give_back(live);
                }
                return Err(err);
            }
        };
        Ok(EnvInstance {
            plugin: self.name().to_string(),
            live: Some(live),
            env: Some(env),
            pool: self.warm.clone(),
        })
    }
}

impl EnvInstance {
    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// The open episode's resource and sandbox.
    fn open(&mut self) -> Result<(ResourceAny, &mut WarmEnv)> {
        let closed = || crate::PluginError::Host("environment already closed".into());
        let env = self.env.ok_or_else(closed)?;
        Ok((env, self.live.as_mut().ok_or_else(closed)?))
    }

    /// Start the episode; returns the (possibly rewritten) prompt.
    pub fn init(&mut self, prompt: &[Message]) -> Result<InitOutput> {
        let (
            env,
            WarmEnv {
                sandbox, bindings, ..
            },
        ) = self.open()?;
        let prompt: Vec<types::Message> = prompt.iter().map(to_wit).collect();
        let out = sandbox
            .call("init", |s| {
                bindings
                    .skyrl_plugin_environment()
                    .env()
                    .call_init(s, env, &prompt)
            })?
            .map_err(|e| sandbox.guest_error("init", e))?;
        Ok(InitOutput {
            prompt: out.prompt.into_iter().map(from_wit).collect(),
            metadata: sandbox.parse_json("init", &out.metadata_json)?,
        })
    }

    /// Apply one model action.
    pub fn step(&mut self, action: &str) -> Result<StepOutput> {
        let (
            env,
            WarmEnv {
                sandbox, bindings, ..
            },
        ) = self.open()?;
        let out = sandbox
            .call("step", |s| {
                bindings
                    .skyrl_plugin_environment()
                    .env()
                    .call_step(s, env, action)
            })?
            .map_err(|e| sandbox.guest_error("step", e))?;
        Ok(StepOutput {
            observations: out.observations.into_iter().map(from_wit).collect(),
            reward: out.reward,
            done: out.done,
            metadata: sandbox.parse_json("step", &out.metadata_json)?,
        })
    }

    /// The episode's metrics (a JSON object).
    pub fn metrics(&mut self) -> Result<serde_json::Value> {
        let (
            env,
            WarmEnv {
                sandbox, bindings, ..
            },
        ) = self.open()?;
        let text = sandbox.call("metrics", |s| {
            bindings
                .skyrl_plugin_environment()
                .env()
                .call_metrics(s, env)
        })?;
        sandbox.parse_json("metrics", &text)
    }

    /// End the episode and release the guest resource. With reuse enabled,
    /// a cleanly closed sandbox goes back to the plugin for a later episode.
    pub fn close(&mut self) -> Result<()> {
        let (Some(env), Some(live)) = (self.env.take(), self.live.as_mut()) else {
            return Ok(());
        };
        let WarmEnv {
            sandbox, bindings, ..
        } = live;
        sandbox.call("close", |s| {
            bindings.skyrl_plugin_environment().env().call_close(s, env)
        })?;
        sandbox.call("drop", |s| env.resource_drop(s))?;
        if let (Some(pool), Some(live)) = (&self.pool, self.live.take()) {
            pool.give_back(live);
        }
        Ok(())
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
