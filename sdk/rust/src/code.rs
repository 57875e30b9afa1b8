//! Code execution over the sandboxed `python` tool (plugins/python):
//! the last fenced code block of a response, running one program, and
//! LiveCodeBench-style test suites (stdin/stdout or functional tests, a
//! deadline per test, reward 1.0 only when every test passes). Enabled by
//! the `code` feature; shared by the `lcb` and `python_math` envs and the
//! `code_reward` plugin.

use std::sync::OnceLock;
use std::time::Duration;

use regex_lite::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::{call_tool_with_timeout, Error, Result};

/// The tool that runs programs.
pub const TOOL: &str = "python";
/// Per-test deadline when the ground truth sets none (LiveCodeBench's 6 s).
pub const DEFAULT_TEST_TIMEOUT: Duration = Duration::from_secs(6);

/// The body of the LAST fenced code block (```` ```lang ... ``` ````), or
/// `None` when the text has none.
pub fn last_code_block(text: &str) -> Option<String> {
    static FENCE: OnceLock<Regex> = OnceLock::new();
    let fence = FENCE.get_or_init(|| {
        Regex::new(r"(?s)```[A-Za-z0-9_+\-]*[ \t]*\n(.*?)```").expect("valid regex")
    });
    fence
        .captures_iter(text)
        .last()
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_string())
}

/// What one program run produced (the `python` tool's result).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Execution {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i64,
    /// Output past the tool's cap was dropped.
    #[serde(default)]
    pub truncated: bool,
}

/// Runs `code` with `stdin` in the sandbox. `Err` is a sandbox failure
/// (deadline, memory cap, trap) with the host's message; a program that
/// raises is an `Ok` with a non-zero exit code.
pub fn run_python(
    code: &str,
    stdin: &str,
    timeout: Duration,
) -> std::result::Result<Execution, String> {
    run_python_capped(code, stdin, timeout, None)
}

/// [`run_python`] keeping up to `max_output_chars` characters of each
/// stream (the tool's default, 64 Ki, when `None`; at most 16 Mi).
pub fn run_python_capped(
    code: &str,
    stdin: &str,
    timeout: Duration,
    max_output_chars: Option<usize>,
) -> std::result::Result<Execution, String> {
    let mut args = serde_json::json!({ "code": code, "stdin": stdin });
    if let Some(cap) = max_output_chars {
        args["max_output_chars"] = cap.into();
    }
    let args = args.to_string();
    let text = call_tool_with_timeout(TOOL, &args, timeout)?;
    serde_json::from_str(&text)
        .map_err(|e| format!("the python tool returned bad JSON ({e}): {text}"))
}

/// How a test feeds its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestType {
    /// `input` on stdin, `output` expected on stdout.
    #[default]
    Stdin,
    /// `input`: one JSON argument per line for `fn_name`; `output`: the JSON result.
    Functional,
}

/// One test.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TestCase {
    pub input: String,
    pub output: String,
    #[serde(default)]
    pub testtype: TestType,
}

/// The tests of one problem.
#[derive(Debug, Clone, PartialEq)]
pub struct TestSuite {
    pub tests: Vec<TestCase>,
    /// Function under test for functional tests (a `Solution` method or a
    /// top-level function).
    pub fn_name: Option<String>,
    /// Deadline per test.
    pub timeout: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteSpec {
    tests: Vec<TestCase>,
    #[serde(default)]
    fn_name: Option<String>,
    #[serde(default)]
    timeout_s: Option<f64>,
}

impl TestSuite {
    /// Reads a ground truth: a list of tests, or `{"tests": [...],
    /// "fn_name": ..., "timeout_s": ...}`, either also as JSON text (datasets
    /// often store tests as a string).
    pub fn from_ground_truth(value: &Value) -> Result<Self> {
        let value = match value {
            Value::String(text) => serde_json::from_str(text)
                .map_err(|e| Error::config(format!("ground truth tests are not JSON: {e}")))?,
            other => other.clone(),
        };
        let spec: SuiteSpec = match value {
            Value::Array(_) => SuiteSpec {
                tests: serde_json::from_value(value)
                    .map_err(|e| Error::config(format!("ground truth tests: {e}")))?,
                fn_name: None,
                timeout_s: None,
            },
            other => serde_json::from_value(other)
                .map_err(|e| Error::config(format!("ground truth tests: {e}")))?,
        };
        if spec.tests.is_empty() {
            return Err(Error::config("ground truth has no tests"));
        }
        let needs_fn = spec
            .tests
            .iter()
            .any(|t| t.testtype == TestType::Functional);
        if needs_fn && spec.fn_name.is_none() {
            return Err(Error::config("functional tests need `fn_name`"));
        }
        let timeout = match spec.timeout_s {
            None => DEFAULT_TEST_TIMEOUT,
            Some(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
            Some(s) => {
                return Err(Error::config(format!(
                    "timeout_s must be positive, got {s}"
                )))
            }
        };
        Ok(Self {
            tests: spec.tests,
            fn_name: spec.fn_name,
            timeout,
        })
    }
}

/// The outcome of a suite run; it stops at the first failing test.
#[derive(Debug, Clone, PartialEq)]
pub struct TestReport {
    pub passed: usize,
    pub total: usize,
    /// Why the first failing test failed.
    pub failure: Option<String>,
}

impl TestReport {
    /// 1.0 when every test passed, else 0.0.
    pub fn reward(&self) -> f64 {
        if self.total > 0 && self.passed == self.total {
            1.0
        } else {
            0.0
        }
    }
}

/// Runs `code` against every test (each in a fresh sandbox, under the
/// suite's deadline), stopping at the first failure.
pub fn run_tests(code: &str, suite: &TestSuite) -> TestReport {
    let total = suite.tests.len();
    for (index, test) in suite.tests.iter().enumerate() {
        if let Err(why) = run_test(code, test, suite) {
            return TestReport {
                passed: index,
                total,
                failure: Some(format!("test {}: {why}", index + 1)),
            };
        }
    }
    TestReport {
        passed: total,
        total,
        failure: None,
    }
}

fn run_test(code: &str, test: &TestCase, suite: &TestSuite) -> std::result::Result<(), String> {
    let program = match test.testtype {
        TestType::Stdin => code.to_string(),
        TestType::Functional => functional_program(code, suite.fn_name.as_deref().unwrap_or("")),
    };
    let run = run_python(&program, &test.input, suite.timeout)?;
    if run.exit_code != 0 {
        let last = run
            .stderr
            .trim_end()
            .lines()
            .last()
            .unwrap_or("")
            .to_string();
        return Err(format!("exit code {}: {last}", run.exit_code));
    }
    let ok = match test.testtype {
        TestType::Stdin => outputs_match(&test.output, &run.stdout),
        TestType::Functional => json_outputs_match(&test.output, &run.stdout),
    };
    if ok {
        Ok(())
    } else {
        Err("wrong answer".into())
    }
}

/// `code` followed by a driver that calls `fn_name` (a `Solution` method
/// when the code defines that class) with one JSON argument per stdin line
/// and prints the JSON result.
pub fn functional_program(code: &str, fn_name: &str) -> String {
    format!(
        "{code}\n\n\
import json as _skyrl_json, sys as _skyrl_sys\n\
_skyrl_args = [_skyrl_json.loads(l) for l in _skyrl_sys.stdin.read().splitlines() if l.strip()]\n\
_skyrl_fn = getattr(Solution(), {fn_name:?}) if 'Solution' in globals() else globals()[{fn_name:?}]\n\
print(_skyrl_json.dumps(_skyrl_fn(*_skyrl_args)))\n"
    )
}

/// A lenient stdout comparison in LiveCodeBench's style: lines compared
/// after trimming, empty trailing lines ignored; lines that differ as text
/// still match when every whitespace-separated token is equal or numerically
/// within 1e-6 (LiveCodeBench itself compares tokens as exact decimals; the
/// `lcb` env follows it exactly).
pub fn outputs_match(expected: &str, actual: &str) -> bool {
    let lines = |text: &str| -> Vec<String> {
        let mut lines: Vec<String> = text.lines().map(|l| l.trim().to_string()).collect();
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        lines
    };
    let (want, got) = (lines(expected), lines(actual));
    want.len() == got.len()
        && want
            .iter()
            .zip(&got)
            .all(|(w, g)| w == g || tokens_match(w, g))
}

fn tokens_match(want: &str, got: &str) -> bool {
    let (w, g): (Vec<&str>, Vec<&str>) = (
        want.split_whitespace().collect(),
        got.split_whitespace().collect(),
    );
    w.len() == g.len()
        && w.iter().zip(&g).all(|(a, b)| {
            a == b
                || match (a.parse::<f64>(), b.parse::<f64>()) {
                    (Ok(x), Ok(y)) => (x - y).abs() <= 1e-6 * x.abs().max(1.0),
                    _ => false,
                }
        })
}

fn json_outputs_match(expected: &str, actual: &str) -> bool {
    match (
        serde_json::from_str::<Value>(expected.trim()),
        serde_json::from_str::<Value>(actual.trim()),
    ) {
        (Ok(want), Ok(got)) => want == got,
        _ => expected.trim() == actual.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn last_fenced_block_wins() {
        let text = "try\n```python\nprint(1)\n```\nbetter:\n```py\nprint(2)\n```\ndone";
        assert_eq!(last_code_block(text).as_deref(), Some("print(2)\n"));
        assert_eq!(
            last_code_block("```\nx = 1\n```").as_deref(),
            Some("x = 1\n")
        );
        assert_eq!(last_code_block("no code here"), None);
    }

    #[test]
    fn stdout_comparison_is_lenient_like_lcb() {
        assert!(outputs_match("3\n4\n", "3  \n4\n\n"));
        assert!(outputs_match("0.5", "0.5000000001"));
        assert!(outputs_match("1 2", "1   2"));
        assert!(!outputs_match("3\n4", "3\n5"));
        assert!(!outputs_match("3", "3\n4"));
        assert!(!outputs_match("yes", "Yes"));
    }

    #[test]
    fn suites_parse_from_lists_objects_and_strings() {
        let list = json!([{"input": "1\n", "output": "2\n"}]);
        let suite = TestSuite::from_ground_truth(&list).unwrap();
        assert_eq!(suite.tests.len(), 1);
        assert_eq!(suite.timeout, DEFAULT_TEST_TIMEOUT);
        let text = Value::String(
            json!({"tests": [{"input": "1", "output": "2", "testtype": "functional"}], "fn_name": "f", "timeout_s": 0.5})
                .to_string(),
        );
        let suite = TestSuite::from_ground_truth(&text).unwrap();
        assert_eq!(suite.fn_name.as_deref(), Some("f"));
        assert_eq!(suite.timeout, Duration::from_millis(500));
        assert!(TestSuite::from_ground_truth(&json!([])).is_err());
        assert!(TestSuite::from_ground_truth(
            &json!([{"input": "1", "output": "2", "testtype": "functional"}])
        )
        .is_err());
        assert!(TestSuite::from_ground_truth(
            &json!({"tests": [{"input": "", "output": ""}], "timeout_s": -1})
        )
        .is_err());
    }

    #[test]
    fn functional_outputs_compare_as_json() {
        assert!(json_outputs_match("[1, 2]", "[1,2]\n"));
        assert!(!json_outputs_match("[1, 2]", "[2, 1]"));
    }

    #[test]
    fn reward_needs_every_test() {
        let report = |passed, total| TestReport {
            passed,
            total,
            failure: None,
        };
        assert_eq!(report(3, 3).reward(), 1.0);
        assert_eq!(report(2, 3).reward(), 0.0);
        assert_eq!(report(0, 0).reward(), 0.0);
    }
}
