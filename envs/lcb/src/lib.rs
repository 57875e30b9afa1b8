//! LiveCodeBench-style code generation (skyrl-gym `lcb`): one step. The
//! response's last fenced code block runs against the row's tests
//! (`reward_spec.ground_truth`) in the sandboxed `python` tool, each test
//! under its deadline; reward 1.0 when all pass, else 0.0.

use serde_json::{json, Value};
use skyrl_sdk::code::{last_code_block, run_tests, TestReport, TestSuite};
use skyrl_sdk::{Environment, Error, Extras, Result, StepOutput};

/// One code problem.
pub struct Lcb {
    suite: TestSuite,
    report: Option<TestReport>,
    had_code: bool,
}

impl Environment for Lcb {
    fn create(_config: &Value, extras: &Extras) -> Result<Self> {
        let truth = extras.ground_truth().ok_or_else(|| {
            Error::config("extras.reward_spec.ground_truth (the tests) is required")
        })?;
        Ok(Self {
            suite: TestSuite::from_ground_truth(truth)?,
            report: None,
            had_code: false,
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        let Some(code) = last_code_block(action) else {
            return Ok(StepOutput::done(0.0).with_metadata(json!({"failure": "no code block"})));
        };
        self.had_code = true;
        let report = run_tests(&code, &self.suite);
        let out = StepOutput::done(report.reward()).with_metadata(json!({
            "passed": report.passed,
            "total": report.total,
            "failure": report.failure,
        }));
        self.report = Some(report);
        Ok(out)
    }

    fn metrics(&self) -> Value {
        let (passed, total) = self
            .report
            .as_ref()
            .map_or((0, self.suite.tests.len()), |r| (r.passed, r.total));
        json!({
            "has_code": self.had_code,
            "tests_passed_fraction": passed as f64 / total.max(1) as f64,
        })
    }
}

skyrl_sdk::export_env!(
    Lcb,
    name = "lcb",
    version = "0.1.0",
    description = "Code generation scored by sandboxed tests (skyrl-gym lcb)",
    uses_tools = ["python"]
);
