//! A test environment for the host's tool routing: `step(action)` calls the
//! `calculator` tool with `{"expression": action}` through the host and
//! returns the tool's output (or error text) as a user observation. Reward
//! 1.0 when the tool call succeeded, else 0.0; always done.

use serde_json::{json, Value};
use skyrl_sdk::{call_tool, Environment, Extras, Message, Result, StepOutput};

/// Name of the tool this env calls.
pub const TOOL: &str = "calculator";

/// One episode.
pub struct ToolUser;

/// The step result for a tool outcome.
pub fn step_output(outcome: std::result::Result<String, String>) -> StepOutput {
    let (text, ok) = match outcome {
        Ok(out) => (out, true),
        Err(e) => (format!("tool error: {e}"), false),
    };
    StepOutput {
        observations: vec![Message::user(text)],
        reward: if ok { 1.0 } else { 0.0 },
        done: true,
        metadata: json!({ "tool_ok": ok }),
    }
}

impl Environment for ToolUser {
    fn create(_config: &Value, _extras: &Extras) -> Result<Self> {
        Ok(Self)
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        let args = json!({ "expression": action }).to_string();
        Ok(step_output(call_tool(TOOL, &args)))
    }
}

skyrl_sdk::export_env!(
    ToolUser,
    name = "tool_user",
    version = "0.1.0",
    description = "Test plugin: evaluates the action with the calculator tool via the host",
    uses_tools = ["calculator"]
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_is_the_observation_with_reward_one() {
        let out = step_output(Ok("42".into()));
        assert_eq!(out.observations, vec![Message::user("42")]);
        assert_eq!((out.reward, out.done), (1.0, true));
    }

    #[test]
    fn failure_reports_the_error_with_reward_zero() {
        let out = step_output(Err("division by zero".into()));
        assert_eq!(out.observations[0].content, "tool error: division by zero");
        assert_eq!(out.reward, 0.0);
        assert_eq!(out.metadata["tool_ok"], false);
    }

    #[test]
    fn natively_there_is_no_host_to_route_the_call() {
        let out = ToolUser.step("1 + 1").unwrap();
        assert_eq!(out.reward, 0.0);
        assert!(out.observations[0].content.contains("not running inside"));
    }
}
