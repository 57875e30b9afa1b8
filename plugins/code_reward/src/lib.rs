//! Code reward (skyrl-gym `lcb`): the response's last fenced code block runs
//! against the ground truth's tests in the sandboxed `python` tool, each
//! test under its own deadline; 1.0 when every test passes, else 0.0 (also
//! when there is no code block).
//!
//! Ground truth: a list of `{input, output, testtype}` tests, or
//! `{"tests": [...], "fn_name": ..., "timeout_s": ...}`, or either as JSON text.

use serde_json::Value;
use skyrl_sdk::code::{last_code_block, run_tests, TestSuite};
use skyrl_sdk::{Extras, Message, Result, Reward};

/// The tests-based code reward.
pub struct CodeReward;

impl Reward for CodeReward {
    fn score(
        _prompt: &[Message],
        response: &str,
        ground_truth: &Value,
        _extras: &Extras,
    ) -> Result<f64> {
        let suite = TestSuite::from_ground_truth(ground_truth)?;
        let Some(code) = last_code_block(response) else {
            return Ok(0.0);
        };
        let report = run_tests(&code, &suite);
        if let Some(failure) = &report.failure {
            skyrl_sdk::log::debug(&format!(
                "{}/{} tests passed; {failure}",
                report.passed, report.total
            ));
        }
        Ok(report.reward())
    }
}

skyrl_sdk::export_reward!(
    CodeReward,
    name = "code_reward",
    version = "0.1.0",
    description = "Tests-based code reward: last fenced block, per-test deadlines, all pass = 1.0",
    uses_tools = ["python"]
);
