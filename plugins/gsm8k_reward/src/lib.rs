//! GSM8K reward (skyrl-gym `gsm8k.utils.compute_score`, strict): 1.0 when the
//! first `#### <number>` of the response (commas and `$` removed) equals the
//! ground truth, else 0.0. The ground truth is a JSON string or number.

use serde_json::Value;
use skyrl_sdk::{gsm8k, Error, Extras, Message, Result, Reward};

/// The GSM8K reward function.
pub struct Gsm8kReward;

impl Reward for Gsm8kReward {
    fn score(
        _prompt: &[Message],
        response: &str,
        ground_truth: &Value,
        _extras: &Extras,
    ) -> Result<f64> {
        let truth = match ground_truth {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(Error::input(format!(
                    "ground truth must be a string or number, got {other}"
                )))
            }
        };
        Ok(gsm8k::compute_score(response, &truth, 0.0, 1.0))
    }
}

skyrl_sdk::export_reward!(
    Gsm8kReward,
    name = "gsm8k_reward",
    version = "0.1.0",
    description = "GSM8K strict '#### <number>' answer match"
);
