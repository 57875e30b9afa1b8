//! LiveCodeBench code generation (skyrl-gym `lcb`), judged as LiveCodeBench
//! judges: one step; the response's last fenced code block
//! (```` ```lang\n...``` ````, stripped) runs against every test of the row
//! through LiveCodeBench's own harness (import prelude, `if __name__ ==
//! '__main__'` unwrapped, the program wrapped in a function, stdin patched so
//! `input()`, `sys.stdin` and `open(0)` read the test, `sys.exit` allowed,
//! `class Solution` for functional tests) inside the sandboxed `python` tool,
//! one fresh sandbox per test, stopping at the first failure. Reward 1.0 when
//! every test passes, else 0.0.
//!
//! The rows: [`problem`] (skyrl-gym's list of tests with `metadata.func_name`,
//! LiveCodeBench's `input_output` object, the project's `{"tests": [...]}`).
//! The judging: [`judge`]. Step metadata: skyrl-gym's `parsed_code`, plus
//! `passed`, `total` and the first `failure`.
//!
//! # Differences from skyrl-gym (on purpose)
//!
//! - Expected outputs never enter the sandbox: the harness reports what the
//!   program printed or returned and the env compares it with LiveCodeBench's
//!   rules, so a program cannot read the answer or overwrite the verdict
//!   (in skyrl-gym the judge runs in the program's own process).
//! - Each test runs in a fresh sandbox, so a functional test's `Solution`
//!   instance is not shared between tests.
//! - A row whose tests LiveCodeBench would fail on (a functional test
//!   without a function name, arguments or outputs that are not JSON) is a
//!   config error for that trajectory, not a silent 0 for every response.
//! - numpy and pandas are not in the sandboxed CPython yet: the prelude's
//!   `import numpy as np` / `import pandas as pd` succeed, and a program that
//!   uses either fails naming the module.
//! - Time limits are measured inside the sandbox (whose CPython is slower
//!   than a native one on CPU-bound code); a program that never ends is
//!   stopped by the tool call's deadline, the limit plus
//!   [`judge::COMPILE_ALLOWANCE`].

pub mod judge;
pub mod problem;

use std::sync::OnceLock;

use regex_lite::Regex;
use serde_json::{json, Value};
use skyrl_sdk::{pystr, Environment, Error, Extras, Result, StepOutput};

pub use problem::Problem;

/// One code problem.
pub struct Lcb {
    problem: Problem,
    passed: Option<usize>,
    had_code: bool,
}

/// LiveCodeBench's `extract_code_from_model`: the last
/// ```` ```(\w+)?\n(.*?)``` ```` block, stripped; `None` without one.
pub fn extract_code(response: &str) -> Option<String> {
    static FENCE: OnceLock<Regex> = OnceLock::new();
    FENCE
        .get_or_init(|| Regex::new(r"(?s)```(?:\w+)?\n(.*?)```").expect("valid regex"))
        .captures_iter(response)
        .last()
        .and_then(|c| c.get(1))
        .map(|m| pystr::strip(m.as_str()).to_owned())
}

impl Environment for Lcb {
    fn create(_config: &Value, extras: &Extras) -> Result<Self> {
        let truth = extras.ground_truth().ok_or_else(|| {
            Error::config("extras.reward_spec.ground_truth (the tests) is required")
        })?;
        Ok(Self {
            problem: Problem::from_ground_truth(truth)?,
            passed: None,
            had_code: false,
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        let Some(code) = extract_code(action) else {
            return Ok(StepOutput::done(0.0).with_metadata(json!({
                "parsed_code": null,
                "passed": 0,
                "total": self.problem.tests.len(),
                "failure": "no code block",
            })));
        };
        self.had_code = true;
        let total = self.problem.tests.len();
        let mut passed = 0;
        let mut failure = None;
        for (index, test) in self.problem.tests.iter().enumerate() {
            match judge::run_test(&code, test, &self.problem) {
                Ok(()) => passed += 1,
                Err(why) => {
                    failure = Some(format!("test {}: {why}", index + 1));
                    break;
                }
            }
        }
        self.passed = Some(passed);
        let reward = if passed == total { 1.0 } else { 0.0 };
        Ok(StepOutput::done(reward).with_metadata(json!({
            "parsed_code": code,
            "passed": passed,
            "total": total,
            "failure": failure,
        })))
    }

    fn metrics(&self) -> Value {
        let total = self.problem.tests.len();
        json!({
            "has_code": self.had_code,
            "tests_passed_fraction": self.passed.unwrap_or(0) as f64 / total.max(1) as f64,
        })
    }
}

skyrl_sdk::export_env!(
    Lcb,
    name = "lcb",
    version = "0.2.0",
    description = "LiveCodeBench code generation judged by LiveCodeBench's harness in the sandbox (skyrl-gym lcb)",
    uses_tools = ["python"]
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_the_last_block_stripped_like_livecodebench() {
        let text = "a\n```python\nprint(1)\n```\nb\n```py\n\n  x = 1\nprint(x)\n```";
        assert_eq!(extract_code(text).as_deref(), Some("x = 1\nprint(x)"));
        assert_eq!(
            extract_code("```\nprint(2)\n```").as_deref(),
            Some("print(2)")
        );
        // LiveCodeBench's fence wants the newline right after the language.
        assert_eq!(extract_code("```python \nprint(3)\n```"), None);
        assert_eq!(extract_code("no code"), None);
    }
}
