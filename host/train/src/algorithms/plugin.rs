//! Advantage estimators and policy losses from sandboxed algorithm plugins
//! (`--algorithm NAME=SOURCE`), registered as `plugin:NAME` next to the
//! built-ins.
//!
//! A plugin sees plain matrices and returns plain matrices; the policy loss
//! returns the loss `L` and `g = dL/dlogp` per token, which the host turns
//! into a per-token surrogate whose masked sum has the value `L` and the
//! gradient `g`: `c + stopgrad(g) * (logp - stopgrad(logp))` with `c`
//! spreading `L` over the masked tokens (`L` of a micro-batch without
//! masked tokens is dropped, as its gradient would be). A plugin that traps, loops, reports
//! an error or returns the wrong shape fails the call with an
//! [`AlgorithmPluginError`] naming it; the next call gets a fresh instance.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use serde_json::Value;
use skyrl_runtime::{
    AdvantageCall, AdvantageInstance, LossCall, Matrix, Plugin, PluginError, PolicyLossInstance,
    World,
};
use tch::{Device, Kind, Tensor};

use super::advantage::{
    AdvantageEstimator, AdvantageEstimatorRegistry, AdvantageInput, AdvantageOutput,
    AdvantageParams,
};
use super::off_policy::Metrics;
use super::policy_loss::{PolicyLoss, PolicyLossInput, PolicyLossOutput, PolicyLossRegistry};
use crate::config::AlgorithmConfig;

/// Registry names of plugin algorithms start with this.
pub const PLUGIN_PREFIX: &str = "plugin:";

/// A failed call into an algorithm plugin.
#[derive(Debug, thiserror::Error)]
pub enum AlgorithmPluginError {
    /// The plugin trapped, ran out of fuel or time, reported an error, or
    /// returned a result of the wrong shape or with non-finite numbers.
    #[error("{role} plugin `{name}` failed: {source}")]
    Call {
        role: &'static str,
        name: String,
        #[source]
        source: PluginError,
    },
}

/// Registers every algorithm plugin under `plugin:NAME` in the registries
/// of the worlds it implements. `options` is `trainer.algorithm.plugin_options`.
pub fn register_algorithm_plugins(
    plugins: &BTreeMap<String, Plugin>,
    cfg: &AlgorithmConfig,
    advantages: &mut AdvantageEstimatorRegistry,
    losses: &mut PolicyLossRegistry,
) -> Result<()> {
    if let Some(name) = cfg
        .plugin_options
        .keys()
        .find(|k| !plugins.contains_key(*k))
    {
        anyhow::bail!(
            "trainer.algorithm.plugin_options.{name}: no algorithm plugin `{name}` was given (--algorithm {name}=SOURCE)"
        );
    }
    for (name, plugin) in plugins {
        let worlds = &plugin.metadata().worlds;
        let config_json = plugin_config_json(cfg, name)?;
        let key = format!("{PLUGIN_PREFIX}{name}");
        let mut any = false;
        if worlds.contains(&World::AdvantagePlugin) {
            advantages.register(
                &key,
                Arc::new(PluginAdvantage {
                    call: PluginCall::new(name, plugin, config_json.clone()),
                }),
            )?;
            any = true;
        }
        if worlds.contains(&World::PolicyLossPlugin) {
            losses.register(
                &key,
                Arc::new(PluginPolicyLoss {
                    call: PluginCall::new(name, plugin, config_json),
                }),
            )?;
            any = true;
        }
        anyhow::ensure!(
            any,
            "--algorithm {name}: plugin `{}` implements neither advantage-plugin nor policy-loss-plugin (worlds: {:?})",
            plugin.name(),
            worlds
        );
    }
    Ok(())
}

/// `trainer.algorithm` as JSON with the plugin's options under `options`.
fn plugin_config_json(cfg: &AlgorithmConfig, name: &str) -> Result<String> {
    let mut value = serde_json::to_value(cfg).context("cannot serialise trainer.algorithm")?;
    if let Value::Object(map) = &mut value {
        map.remove("plugin_options");
        let options = cfg.plugin_options.get(name).cloned();
        map.insert(
            "options".into(),
            options.unwrap_or_else(|| Value::Object(Default::default())),
        );
    }
    Ok(value.to_string())
}

/// One plugin, its config and a reusable instance (recreated after a failure).
struct PluginCall<I> {
    name: String,
    plugin: Plugin,
    config_json: String,
    instance: Mutex<Option<I>>,
}

impl<I> PluginCall<I> {
    fn new(name: &str, plugin: &Plugin, config_json: String) -> Self {
        Self {
            name: name.to_string(),
            plugin: plugin.clone(),
            config_json,
            instance: Mutex::new(None),
        }
    }

    /// Runs `f` on the instance (creating it first); any failure drops the
    /// instance so a trapped sandbox is never reused.
    fn with<R>(
        &self,
        role: &'static str,
        create: impl FnOnce(&Plugin) -> skyrl_runtime::Result<I>,
        f: impl FnOnce(&mut I, &str) -> skyrl_runtime::Result<R>,
    ) -> Result<R, AlgorithmPluginError> {
        let mut slot = self.instance.lock().unwrap_or_else(|e| e.into_inner());
        let result = match slot.take() {
            Some(instance) => Ok(instance),
            None => create(&self.plugin),
        }
        .and_then(|mut instance| {
            let out = f(&mut instance, &self.config_json)?;
            *slot = Some(instance);
            Ok(out)
        });
        result.map_err(|source| AlgorithmPluginError::Call {
            role,
            name: self.name.clone(),
            source,
        })
    }
}

/// A `[B, T]` tensor as a matrix (copied to the CPU as f32).
fn to_matrix(t: &Tensor) -> Result<Matrix> {
    let size = t.size();
    anyhow::ensure!(
        size.len() == 2,
        "expected a [batch, seq] tensor, got {size:?}"
    );
    let flat = t
        .detach()
        .to_device(Device::Cpu)
        .to_kind(Kind::Float)
        .contiguous()
        .view([-1]);
    let data = Vec::<f32>::try_from(&flat).context("cannot read a tensor")?;
    Ok(Matrix::new(size[0] as usize, size[1] as usize, data)?)
}

/// A matrix as a `[rows, cols]` f32 tensor on `device`.
fn to_tensor(m: &Matrix, device: Device) -> Tensor {
    Tensor::from_slice(&m.data)
        .view([m.rows as i64, m.cols as i64])
        .to_device(device)
}

/// An advantage estimator implemented by a plugin.
struct PluginAdvantage {
    call: PluginCall<AdvantageInstance>,
}

impl AdvantageEstimator for PluginAdvantage {
    fn compute(&self, input: &AdvantageInput, _p: &AdvantageParams) -> Result<AdvantageOutput> {
        let rewards = to_matrix(input.token_level_rewards)?;
        let mask = to_matrix(input.response_mask)?;
        let values = input.values.map(to_matrix).transpose()?;
        let out = self.call.with(
            "advantage estimator",
            Plugin::create_advantage,
            |instance, config_json| {
                instance.compute(&AdvantageCall {
                    token_rewards: &rewards,
                    response_mask: &mask,
                    group_ids: input.group_ids,
                    values: values.as_ref(),
                    config_json,
                })
            },
        )?;
        let device = input.token_level_rewards.device();
        Ok(AdvantageOutput {
            advantages: to_tensor(&out.advantages, device),
            returns: to_tensor(&out.returns, device),
        })
    }
}

/// A policy loss implemented by a plugin.
struct PluginPolicyLoss {
    call: PluginCall<PolicyLossInstance>,
}

impl PolicyLoss for PluginPolicyLoss {
    fn compute(&self, x: &PolicyLossInput, _cfg: &AlgorithmConfig) -> Result<PolicyLossOutput> {
        let log_probs = to_matrix(x.log_probs)?;
        let old = to_matrix(x.old_log_probs)?;
        let rollout = x.rollout_logprobs.map(to_matrix).transpose()?;
        let advantages = to_matrix(x.advantages)?;
        let mask = to_matrix(x.loss_mask)?;
        let out = self.call.with(
            "policy loss",
            Plugin::create_policy_loss,
            |instance, config_json| {
                instance.compute(&LossCall {
                    log_probs: &log_probs,
                    old_log_probs: &old,
                    rollout_log_probs: rollout.as_ref(),
                    advantages: &advantages,
                    loss_mask: &mask,
                    config_json,
                })
            },
        )?;
        let device = x.log_probs.device();
        let grad = to_tensor(&out.grad, device);
        let loss_mask = x.loss_mask.to_kind(Kind::Float);
        // Spread L so that sum(mask * spread) == L for any mask values.
        let squares: f64 = mask.data.iter().map(|&m| (m as f64) * (m as f64)).sum();
        let spread = &loss_mask * (out.loss / squares.max(f64::MIN_POSITIVE));
        let moving = x.log_probs - x.log_probs.detach();
        let loss = spread + grad * moving;
        Ok(PolicyLossOutput {
            loss,
            loss_mask,
            metrics: out.metrics.into_iter().collect::<Metrics>(),
        })
    }
}
