//! Algorithm plugins: advantage estimators and policy losses (the
//! `advantage-plugin` and `policy-loss-plugin` worlds), called with plain
//! row-major matrices. Results are checked here (shapes, finite numbers) so a
//! plugin cannot hand the trainer a wrong-sized or NaN tensor.

use crate::bindings::advantage_world::exports::skyrl::plugin::advantage as wit_adv;
use crate::bindings::advantage_world::exports::skyrl::plugin::algorithm as wit_adv_alg;
use crate::bindings::advantage_world::AdvantagePlugin;
use crate::bindings::policy_loss_world::exports::skyrl::plugin::algorithm as wit_loss_alg;
use crate::bindings::policy_loss_world::exports::skyrl::plugin::policy_loss as wit_loss;
use crate::bindings::policy_loss_world::PolicyLossPlugin;
use crate::error::{PluginError, Result};
use crate::metadata::World;
use crate::plugin::Plugin;
use crate::sandbox::Sandbox;

/// A `rows x cols` f32 matrix, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Matrix {
    /// A matrix from its shape and row-major data; the length must match.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>) -> Result<Self> {
        if data.len() != rows * cols {
            return Err(PluginError::Host(format!(
                "matrix {rows}x{cols} needs {} values, got {}",
                rows * cols,
                data.len()
            )));
        }
        Ok(Self { rows, cols, data })
    }

    /// Checks a plugin-returned matrix against the expected shape.
    fn check(&self, what: &str, rows: usize, cols: usize) -> std::result::Result<(), String> {
        if (self.rows, self.cols) != (rows, cols) || self.data.len() != rows * cols {
            return Err(format!(
                "{what} is {}x{} with {} values; expected {rows}x{cols} ({} values)",
                self.rows,
                self.cols,
                self.data.len(),
                rows * cols
            ));
        }
        match self.data.iter().position(|v| !v.is_finite()) {
            Some(i) => Err(format!(
                "{what}[{}][{}] is {} (not finite)",
                i / cols.max(1),
                i % cols.max(1),
                self.data[i]
            )),
            None => Ok(()),
        }
    }
}

macro_rules! matrix_conversions {
    ($wit:path) => {
        impl From<&Matrix> for $wit {
            fn from(m: &Matrix) -> Self {
                Self {
                    rows: m.rows as u32,
                    cols: m.cols as u32,
                    data: m.data.clone(),
                }
            }
        }
        impl From<$wit> for Matrix {
            fn from(m: $wit) -> Self {
                Self {
                    rows: m.rows as usize,
                    cols: m.cols as usize,
                    data: m.data,
                }
            }
        }
    };
}
matrix_conversions!(wit_adv_alg::Matrix);
matrix_conversions!(wit_loss_alg::Matrix);

/// What an advantage plugin reads (see `advantage.advantage-input` in the WIT).
pub struct AdvantageCall<'a> {
    pub token_rewards: &'a Matrix,
    pub response_mask: &'a Matrix,
    pub group_ids: &'a [String],
    pub values: Option<&'a Matrix>,
    pub config_json: &'a str,
}

/// Advantages and returns, each the shape of the rewards.
#[derive(Debug, Clone)]
pub struct AdvantageResult {
    pub advantages: Matrix,
    pub returns: Matrix,
}

/// What a policy-loss plugin reads (see `policy-loss.loss-input` in the WIT).
pub struct LossCall<'a> {
    pub log_probs: &'a Matrix,
    pub old_log_probs: &'a Matrix,
    pub rollout_log_probs: Option<&'a Matrix>,
    pub advantages: &'a Matrix,
    pub loss_mask: &'a Matrix,
    pub config_json: &'a str,
}

/// The loss, its gradient with respect to each log-probability, and metrics.
#[derive(Debug, Clone)]
pub struct LossResult {
    pub loss: f64,
    pub grad: Matrix,
    pub metrics: Vec<(String, f64)>,
}

/// An advantage-estimator plugin instance in its own sandbox.
pub struct AdvantageInstance {
    sandbox: Sandbox,
    bindings: AdvantagePlugin,
}

/// A policy-loss plugin instance in its own sandbox.
pub struct PolicyLossInstance {
    sandbox: Sandbox,
    bindings: PolicyLossPlugin,
}

impl Plugin {
    /// Instantiate this plugin as an advantage estimator.
    pub fn create_advantage(&self) -> Result<AdvantageInstance> {
        let pre = self
            .pres
            .advantage
            .as_ref()
            .ok_or_else(|| self.wrong_world(World::AdvantagePlugin))?;
        let mut sandbox = self.sandbox()?;
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        Ok(AdvantageInstance { sandbox, bindings })
    }

    /// Instantiate this plugin as a policy loss.
    pub fn create_policy_loss(&self) -> Result<PolicyLossInstance> {
        let pre = self
            .pres
            .policy_loss
            .as_ref()
            .ok_or_else(|| self.wrong_world(World::PolicyLossPlugin))?;
        let mut sandbox = self.sandbox()?;
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        Ok(PolicyLossInstance { sandbox, bindings })
    }
}

fn bad_output(sandbox: &Sandbox, call: &str, reason: String) -> PluginError {
    PluginError::BadOutput {
        plugin: sandbox.plugin().to_string(),
        call: call.to_string(),
        reason,
    }
}

impl AdvantageInstance {
    /// Advantages and returns for one batch; fails on traps, plugin errors
    /// and results of the wrong shape or with non-finite values.
    pub fn compute(&mut self, call: &AdvantageCall) -> Result<AdvantageResult> {
        let (rows, cols) = (call.token_rewards.rows, call.token_rewards.cols);
        let input = wit_adv::AdvantageInput {
            token_rewards: call.token_rewards.into(),
            response_mask: call.response_mask.into(),
            group_ids: call.group_ids.to_vec(),
            values: call.values.map(Into::into),
            config_json: call.config_json.to_string(),
        };
        let bindings = &self.bindings;
        let out = self
            .sandbox
            .call("advantage.compute", |s| {
                bindings.skyrl_plugin_advantage().call_compute(s, &input)
            })?
            .map_err(|e| self.sandbox.guest_error("advantage.compute", e))?;
        let result = AdvantageResult {
            advantages: out.advantages.into(),
            returns: out.returns.into(),
        };
        result
            .advantages
            .check("advantages", rows, cols)
            .and_then(|()| result.returns.check("returns", rows, cols))
            .map_err(|r| bad_output(&self.sandbox, "advantage.compute", r))?;
        Ok(result)
    }
}

impl PolicyLossInstance {
    /// The loss of one micro-batch and its gradient; fails on traps, plugin
    /// errors and results of the wrong shape or with non-finite values.
    pub fn compute(&mut self, call: &LossCall) -> Result<LossResult> {
        let (rows, cols) = (call.log_probs.rows, call.log_probs.cols);
        let input = wit_loss::LossInput {
            log_probs: call.log_probs.into(),
            old_log_probs: call.old_log_probs.into(),
            rollout_log_probs: call.rollout_log_probs.map(Into::into),
            advantages: call.advantages.into(),
            loss_mask: call.loss_mask.into(),
            config_json: call.config_json.to_string(),
        };
        let bindings = &self.bindings;
        let out = self
            .sandbox
            .call("policy-loss.compute", |s| {
                bindings.skyrl_plugin_policy_loss().call_compute(s, &input)
            })?
            .map_err(|e| self.sandbox.guest_error("policy-loss.compute", e))?;
        let result = LossResult {
            loss: out.loss,
            grad: out.grad.into(),
            metrics: out.metrics,
        };
        let check = || -> std::result::Result<(), String> {
            if !result.loss.is_finite() {
                return Err(format!("loss is {} (not finite)", result.loss));
            }
            result.grad.check("grad", rows, cols)?;
            match result.metrics.iter().find(|(_, v)| !v.is_finite()) {
                Some((name, v)) => Err(format!("metric {name} is {v} (not finite)")),
                None => Ok(()),
            }
        };
        check().map_err(|r| bad_output(&self.sandbox, "policy-loss.compute", r))?;
        Ok(result)
    }
}
