//! A problem's tests, read from every row format LiveCodeBench data comes in.
//!
//! `extras.reward_spec.ground_truth` (JSON text, as skyrl-gym reads it, or
//! an already-parsed value) may be:
//!
//! - a list of tests `[{"input", "output", "testtype", "metadata"}]`
//!   (LiveCodeBench's `public_test_cases` / `private_test_cases`, what
//!   skyrl-gym's lcb rows hold): functional when the FIRST test's `testtype`
//!   is `functional`, the function then named by its
//!   `metadata.func_name` (`metadata` an object or JSON text);
//! - LiveCodeBench's `input_output` object `{"inputs": [...], "outputs":
//!   [...], "fn_name": ...}`: functional when `fn_name` is set;
//! - the project's own `{"tests": [...], "fn_name": ..., "timeout_s": ...}`:
//!   functional when any test's `testtype` is `functional`.
//!
//! Everything LiveCodeBench would only trip over while testing (a missing
//! function name, expected outputs or argument lines that are not JSON) is
//! refused here, as a config error naming the test, instead of silently
//! scoring every response 0.

use std::time::Duration;

use serde_json::Value;
use skyrl_sdk::code::{TestSuite, TestType};
use skyrl_sdk::{Error, Result};

/// LiveCodeBench's per-test time limit.
pub const DEFAULT_TIMEOUT: Duration = skyrl_sdk::code::DEFAULT_TEST_TIMEOUT;

/// One test.
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    /// Standard input, or one JSON argument per line (functional).
    pub input: String,
    /// What passes.
    pub expected: Expected,
}

/// A test's expected result.
#[derive(Debug, Clone, PartialEq)]
pub enum Expected {
    /// Standard output.
    Stdout(String),
    /// The function's return value (`json.loads(output)`).
    Value(Value),
}

/// The tests of one problem.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The function under test (functional problems).
    pub fn_name: Option<String>,
    /// At least one.
    pub tests: Vec<Test>,
    /// Time limit per test.
    pub timeout: Duration,
}

impl Problem {
    /// Reads a ground truth (see the module docs).
    pub fn from_ground_truth(ground_truth: &Value) -> Result<Self> {
        let value = match ground_truth {
            Value::String(text) => serde_json::from_str(text)
                .map_err(|e| Error::config(format!("ground truth is not JSON: {e}")))?,
            other => other.clone(),
        };
        let (pairs, fn_name, timeout) = match &value {
            Value::Array(tests) => {
                let fn_name = match tests.first() {
                    Some(first) if first.get("testtype") == Some(&"functional".into()) => {
                        Some(func_name(first)?)
                    }
                    _ => None,
                };
                (test_pairs(tests)?, fn_name, DEFAULT_TIMEOUT)
            }
            Value::Object(map) if map.contains_key("inputs") => {
                let (inputs, outputs) = (field(&value, "inputs")?, field(&value, "outputs")?);
                let (Some(inputs), Some(outputs)) = (inputs.as_array(), outputs.as_array()) else {
                    return Err(Error::config(
                        "ground truth: `inputs` and `outputs` must be lists",
                    ));
                };
                if inputs.len() != outputs.len() {
                    return Err(Error::config(format!(
                        "ground truth: {} inputs but {} outputs",
                        inputs.len(),
                        outputs.len()
                    )));
                }
                let pairs = inputs
                    .iter()
                    .zip(outputs)
                    .enumerate()
                    .map(|(i, (input, output))| {
                        Ok((
                            text_or_lines(input, i, "inputs")?,
                            text_or_lines(output, i, "outputs")?,
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                let fn_name = optional_name(map.get("fn_name"))?;
                (pairs, fn_name, DEFAULT_TIMEOUT)
            }
            // The project's format, as the SDK's code suites read it.
            Value::Object(map) if map.contains_key("tests") => {
                let suite = TestSuite::from_ground_truth(&value)?;
                let functional = suite
                    .tests
                    .iter()
                    .any(|t| t.testtype == TestType::Functional);
                let fn_name = suite.fn_name.filter(|_| functional);
                let pairs = suite
                    .tests
                    .into_iter()
                    .map(|t| (t.input, t.output))
                    .collect();
                (pairs, fn_name, suite.timeout)
            }
            _ => {
                return Err(Error::config(
                    "ground truth must be a list of tests, LiveCodeBench's input_output object \
                     ({\"inputs\", \"outputs\", \"fn_name\"}) or {\"tests\": [...]}",
                ))
            }
        };
        if pairs.is_empty() {
            return Err(Error::config("ground truth has no tests"));
        }
        let tests = pairs
            .into_iter()
            .enumerate()
            .map(|(i, (input, output))| test(i, input, output, fn_name.is_some()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            fn_name,
            tests,
            timeout,
        })
    }
}

/// A functional test's arguments must each be JSON, one per line (what
/// LiveCodeBench's `json.loads` per line needs), and its output JSON.
fn test(index: usize, input: String, output: String, functional: bool) -> Result<Test> {
    let bad = |what: &str, e: serde_json::Error| {
        Error::config(format!("test {}: {what} is not JSON: {e}", index + 1))
    };
    let expected = if functional {
        for line in input.split('\n') {
            serde_json::from_str::<Value>(line).map_err(|e| bad("an argument line", e))?;
        }
        Expected::Value(serde_json::from_str(&output).map_err(|e| bad("the output", e))?)
    } else {
        Expected::Stdout(output)
    };
    Ok(Test { input, expected })
}

/// `(input, output)` of every test dict.
fn test_pairs(tests: &[Value]) -> Result<Vec<(String, String)>> {
    tests
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let text = |key: &str| {
                t.get(key)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        Error::config(format!("test {}: `{key}` must be a string", i + 1))
                    })
            };
            Ok((text("input")?, text("output")?))
        })
        .collect()
}

/// `metadata.func_name` of a functional test (`metadata` may be JSON text,
/// as in LiveCodeBench's own rows).
fn func_name(test: &Value) -> Result<String> {
    let metadata = match test.get("metadata") {
        Some(Value::String(text)) => serde_json::from_str(text).unwrap_or(Value::Null),
        Some(other) => other.clone(),
        None => Value::Null,
    };
    metadata
        .get("func_name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            Error::config(format!(
                "Function name is not found, check if your LCB data is preprocessed correctly: {metadata}"
            ))
        })
}

fn field<'a>(value: &'a Value, key: &str) -> Result<&'a Value> {
    value
        .get(key)
        .ok_or_else(|| Error::config(format!("ground truth: `{key}` is missing")))
}

fn optional_name(value: Option<&Value>) -> Result<Option<String>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) if !name.is_empty() => Ok(Some(name.clone())),
        Some(other) => Err(Error::config(format!(
            "fn_name must be a non-empty string, got {other}"
        ))),
    }
}

/// An `input_output` entry: text, or a list of lines (joined with `\n`, as
/// LiveCodeBench's `call_method` does).
fn text_or_lines(value: &Value, index: usize, key: &str) -> Result<String> {
    match value {
        Value::String(text) => Ok(text.clone()),
        Value::Array(lines) => lines
            .iter()
            .map(|l| l.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(|lines| lines.join("\n"))
            .ok_or_else(|| Error::config(format!("{key}[{index}]: lines must be strings"))),
        other => Err(Error::config(format!(
            "{key}[{index}] must be text or a list of lines, got {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn skyrl_gym_rows_with_functional_metadata() {
        let rows = json!([
            {"input": "[1, 2]\n3", "output": "6", "testtype": "functional", "metadata": {"func_name": "f"}},
            {"input": "[]\n0", "output": "0", "testtype": "functional"}
        ])
        .to_string();
        let p = Problem::from_ground_truth(&Value::String(rows)).unwrap();
        assert_eq!(p.fn_name.as_deref(), Some("f"));
        assert_eq!(p.tests[0].expected, Expected::Value(json!(6)));
        // LiveCodeBench's own rows keep metadata as JSON text.
        let raw = json!([{"input": "1", "output": "1", "testtype": "functional", "metadata": "{\"func_name\": \"g\"}"}]);
        assert_eq!(
            Problem::from_ground_truth(&raw).unwrap().fn_name.as_deref(),
            Some("g")
        );
        let missing = json!([{"input": "1", "output": "1", "testtype": "functional"}]);
        assert!(Problem::from_ground_truth(&missing)
            .unwrap_err()
            .to_string()
            .contains("Function name is not found"));
    }

    #[test]
    fn input_output_objects_and_stdin_lists() {
        let p = Problem::from_ground_truth(
            &json!({"inputs": ["1 2\n", ["3", "4"]], "outputs": ["3\n", "7\n"]}),
        )
        .unwrap();
        assert_eq!(p.fn_name, None);
        assert_eq!(p.tests[1].input, "3\n4");
        assert_eq!(p.tests[1].expected, Expected::Stdout("7\n".into()));
        let p = Problem::from_ground_truth(
            &json!({"inputs": ["[1]"], "outputs": ["[1]"], "fn_name": "echo"}),
        )
        .unwrap();
        assert_eq!(p.fn_name.as_deref(), Some("echo"));
    }

    #[test]
    fn malformed_json_is_refused_naming_the_test() {
        for bad in [
            json!("{not json"),
            json!({"inputs": ["1"], "outputs": ["{x"], "fn_name": "f"}),
            json!({"inputs": ["1\n"], "outputs": ["1"], "fn_name": "f"}),
            json!({"inputs": ["1", "2"], "outputs": ["1"]}),
            json!([]),
            json!({"tests": [{"input": "", "output": ""}], "timeout_s": -1}),
            json!(7),
        ] {
            assert!(Problem::from_ground_truth(&bad).is_err(), "{bad}");
        }
        let err = Problem::from_ground_truth(
            &json!({"inputs": ["1", "oops"], "outputs": ["1", "2"], "fn_name": "f"}),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("test 2"), "{err}");
    }

    #[test]
    fn the_project_format_keeps_working() {
        let p = Problem::from_ground_truth(&json!({"tests": [{"input": "1\n", "output": "2\n", "testtype": "stdin"}], "timeout_s": 0.5}))
            .unwrap();
        assert_eq!(p.timeout, Duration::from_millis(500));
        assert_eq!(p.fn_name, None);
    }
}
