//! Reward plugins.

use crate::bindings::reward_world::RewardPlugin;
use crate::bindings::types;
use crate::env::to_wit;
use crate::error::Result;
use crate::metadata::World;
use crate::plugin::Plugin;
use crate::sandbox::Sandbox;
use crate::Message;

/// A reward plugin instance in its own sandbox.
pub struct RewardInstance {
    sandbox: Sandbox,
    bindings: RewardPlugin,
}

impl Plugin {
    /// Instantiate this plugin as a reward function.
    pub fn create_reward(&self) -> Result<RewardInstance> {
        let pre = self
            .pres
            .reward
            .as_ref()
            .ok_or_else(|| self.wrong_world(World::RewardPlugin))?;
        let mut sandbox = self.sandbox()?;
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        Ok(RewardInstance { sandbox, bindings })
    }
}

impl RewardInstance {
    /// Score one response.
    pub fn score(
        &mut self,
        prompt: &[Message],
        response: &str,
        ground_truth: &serde_json::Value,
        extras: &serde_json::Value,
    ) -> Result<f64> {
        let prompt: Vec<types::Message> = prompt.iter().map(to_wit).collect();
        let (truth, extras) = (ground_truth.to_string(), extras.to_string());
        let bindings = &self.bindings;
        self.sandbox
            .call("score", |s| {
                bindings
                    .skyrl_plugin_reward()
                    .call_score(s, &prompt, response, &truth, &extras)
            })?
            .map_err(|e| self.sandbox.guest_error("score", e))
    }
}
