//! The [`Reward`] trait and its glue to the WIT `reward` interface.

use serde_json::Value;

use crate::bindings::skyrl::plugin::types::PluginError;
use crate::{Error, Extras, Message, Result};

/// A reward function scoring one response.
pub trait Reward: 'static {
    /// Scores `response` to `prompt` against the ground truth (parsed JSON;
    /// a bare non-JSON string is passed as a JSON string) and the dataset
    /// row's extras.
    fn score(
        prompt: &[Message],
        response: &str,
        ground_truth: &Value,
        extras: &Extras,
    ) -> Result<f64>;
}

/// Glue for `reward.score`, used by [`export_reward!`](crate::export_reward).
pub fn score_with<R: Reward>(
    prompt: &[Message],
    response: &str,
    ground_truth_json: &str,
    extras_json: &str,
) -> Result<f64, PluginError> {
    let ground_truth = parse_ground_truth(ground_truth_json);
    let extras = Extras::from_json(extras_json)?;
    let score = R::score(prompt, response, &ground_truth, &extras)?;
    if score.is_finite() {
        Ok(score)
    } else {
        Err(Error::failed(format!("reward is not a finite number: {score}")).into())
    }
}

/// Ground truth as JSON; text that is not JSON is taken as a plain string.
fn parse_ground_truth(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.to_owned()))
}
