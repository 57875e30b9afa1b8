//! AIME (skyrl-gym 0.4.0 `aime`): one step, done, no observations. The
//! reward is `compute_score(action, ground_truth)["score"]`: 1.0 when the
//! last `Answer: ...` line of the response (within its last 300 characters),
//! normalised Minerva style, equals the normalised ground truth, else -1.0.
//! Step metadata is `{"acc": bool, "pred": str}` (`pred` the normalised
//! prediction, `"[INVALID]"` when there is no `Answer:` line).
//!
//! The ground truth is `extras.reward_model.ground_truth`, as in skyrl-gym;
//! when that is absent, `extras.reward_spec.ground_truth` (the field the
//! project's other environments use). Strings are taken as they are and
//! numbers in their JSON spelling (skyrl-gym would fail on a number).

pub mod normalize;
pub mod score;

use serde_json::{json, Value};
use skyrl_sdk::{Environment, Error, Extras, Result, StepOutput};

/// One AIME episode.
pub struct Aime {
    ground_truth: String,
}

/// `extras.reward_model.ground_truth`, else `extras.reward_spec.ground_truth`,
/// as text.
pub fn ground_truth(extras: &Extras) -> Result<String> {
    let value = extras
        .get("reward_model")
        .and_then(|r| r.get("ground_truth"))
        .or_else(|| extras.ground_truth())
        .ok_or_else(|| Error::config("extras.reward_model.ground_truth is required"))?;
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(Error::config(format!(
            "extras.reward_model.ground_truth must be a string or number, got {other}"
        ))),
    }
}

impl Environment for Aime {
    fn create(_config: &Value, extras: &Extras) -> Result<Self> {
        Ok(Self {
            ground_truth: ground_truth(extras)?,
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        let s = score::compute_score(action, &self.ground_truth, false, None);
        Ok(StepOutput::done(s.score).with_metadata(json!({ "acc": s.acc, "pred": s.pred })))
    }
}

skyrl_sdk::export_env!(
    Aime,
    name = "aime",
    version = "0.1.0",
    description = "AIME math, Minerva-style 'Answer:' matching (skyrl-gym aime)"
);

#[cfg(test)]
mod tests {
    use super::*;

    fn extras(v: Value) -> Extras {
        Extras::from_json(&v.to_string()).unwrap()
    }

    #[test]
    fn ground_truth_prefers_reward_model_then_reward_spec() {
        let both = extras(json!({
            "reward_model": {"ground_truth": "7"},
            "reward_spec": {"ground_truth": "8"}
        }));
        assert_eq!(ground_truth(&both).unwrap(), "7");
        let spec = extras(json!({"reward_spec": {"ground_truth": "8"}}));
        assert_eq!(ground_truth(&spec).unwrap(), "8");
        let number = extras(json!({"reward_model": {"ground_truth": 204}}));
        assert_eq!(ground_truth(&number).unwrap(), "204");
    }

    #[test]
    fn missing_or_structured_ground_truth_is_a_config_error() {
        for bad in [
            json!({}),
            json!({"reward_model": {}}),
            json!({"reward_model": {"ground_truth": ["1"]}}),
        ] {
            assert!(
                matches!(
                    ground_truth(&extras(bad.clone())),
                    Err(Error::InvalidConfig(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn one_step_is_done_with_acc_and_pred() {
        let ex = extras(json!({"reward_model": {"ground_truth": "204"}}));
        let mut env = Aime::create(&json!({}), &ex).unwrap();
        let out = env.step("Thus.\nAnswer: $204$").unwrap();
        assert!(out.done && out.observations.is_empty());
        assert_eq!(out.reward, 1.0);
        assert_eq!(out.metadata, json!({"acc": true, "pred": "204"}));

        let mut env = Aime::create(&json!({}), &ex).unwrap();
        let out = env.step("\\boxed{204}").unwrap();
        assert!(out.done);
        assert_eq!(out.reward, -1.0);
        assert_eq!(out.metadata, json!({"acc": false, "pred": "[INVALID]"}));
    }
}
