//! GSM8K (skyrl-gym `gsm8k`): one step, done, no observations. The reward is
//! 1.0 when the first `#### <number>` of the response (commas and `$`
//! removed) equals `extras.reward_spec.ground_truth`, else 0.0.

use serde_json::Value;
use skyrl_sdk::{gsm8k, Environment, Extras, Result, StepOutput};

/// One GSM8K episode.
pub struct Gsm8k {
    ground_truth: String,
}

impl Environment for Gsm8k {
    fn create(_config: &Value, extras: &Extras) -> Result<Self> {
        Ok(Self {
            ground_truth: extras.ground_truth_str()?,
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        Ok(StepOutput::done(gsm8k::compute_score(
            action,
            &self.ground_truth,
            0.0,
            1.0,
        )))
    }
}

skyrl_sdk::export_env!(
    Gsm8k,
    name = "gsm8k",
    version = "0.1.0",
    description = "GSM8K math word problems, answer after '#### ' (skyrl-gym gsm8k)"
);
