//! RL algorithms over libtorch tensors (fp32): advantage estimators, policy
//! losses (built in, or from sandboxed algorithm plugins), rollout correction,
//! KL / entropy terms, reductions and batch filters.

pub mod advantage;
pub mod filters;
pub mod kl;
pub mod loss;
pub mod masked;
pub mod off_policy;
pub mod plugin;
pub mod policy_loss;
pub mod reduction;
pub mod step_wise;

pub use advantage::{
    critic_value_loss, AdvantageEstimator, AdvantageEstimatorRegistry, AdvantageInput,
    AdvantageOutput, AdvantageParams,
};
pub use kl::{compute_approx_kl, entropy_from_logits, KlController, KlEstimator};
pub use off_policy::Metrics;
pub use plugin::{register_algorithm_plugins, AlgorithmPluginError, PLUGIN_PREFIX};
pub use policy_loss::{PolicyLoss, PolicyLossInput, PolicyLossOutput, PolicyLossRegistry};
pub use reduction::{advantage_scales, scale_advantages, LossReduction, ReductionRow};

impl crate::config::SkyrlConfig {
    /// Checks that the configured estimator and loss names exist in the registries
    /// (which may hold user-registered entries).
    pub fn validate_names(
        &self,
        advantages: &AdvantageEstimatorRegistry,
        losses: &PolicyLossRegistry,
    ) -> anyhow::Result<()> {
        let a = &self.trainer.algorithm;
        advantages
            .get(&a.advantage_estimator)
            .map_err(|e| anyhow::anyhow!("trainer.algorithm.advantage_estimator: {e}"))?;
        losses
            .get(&a.policy_loss_type)
            .map_err(|e| anyhow::anyhow!("trainer.algorithm.policy_loss_type: {e}"))?;
        Ok(())
    }
}
