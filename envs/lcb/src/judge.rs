//! Runs one test through LiveCodeBench's harness in the sandboxed `python`
//! tool (`harness.py`) and judges what the program produced with
//! LiveCodeBench's rules, outside the sandbox:
//!
//! - stdin tests ([`stdout_matches`], `grade_stdio`): both texts stripped and
//!   split on `\n`, every line stripped; same number of lines, and each pair
//!   equal as text or, token by token, as Python `Decimal`s (exact:
//!   `0.30000000000000004` is not `0.3`, `1.0` is `1`);
//! - functional tests ([`python_eq`], `grade_call_based`): the returned
//!   value `==` `json.loads(output)` with Python's equality (`1 == 1.0 ==
//!   True`, a list is not a tuple; a top-level tuple was made a list).
//!
//! A test fails when the program raises (other than `SystemExit`), runs
//! longer than the time limit (measured inside the sandbox; a program that
//! never ends is stopped by the call's deadline), or answers wrong.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};
use skyrl_sdk::code::run_python_capped;
use skyrl_sdk::pystr;

use crate::problem::{Expected, Problem, Test};

/// LiveCodeBench's harness, one test per run.
pub const HARNESS: &str = include_str!("harness.py");
/// Time a sandbox call gets beyond the test's limit, for starting the
/// harness, the import prelude and compiling the program.
pub const COMPILE_ALLOWANCE: Duration = Duration::from_secs(3);
/// Output kept from a program (the tool's largest cap).
const MAX_OUTPUT_CHARS: usize = 16 << 20;

/// What the harness reported.
#[derive(Debug, Deserialize)]
struct Verdict {
    status: String,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    seconds: f64,
}

/// Runs `code` on `test`; `Err` says why it failed, in LiveCodeBench's terms.
pub fn run_test(code: &str, test: &Test, problem: &Problem) -> Result<(), String> {
    let payload = json!({"code": code, "input": test.input, "fn_name": problem.fn_name});
    // Room for the prelude and compiling the program, then the test itself.
    let deadline = problem.timeout + COMPILE_ALLOWANCE;
    let run = run_python_capped(
        HARNESS,
        &payload.to_string(),
        deadline,
        Some(MAX_OUTPUT_CHARS),
    )
    .map_err(|e| format!("Time Limit Exceeded (the sandbox stopped it: {e})"))?;
    let verdict: Verdict = run
        .stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| {
            let last = run.stderr.trim_end().lines().last().unwrap_or("no output");
            format!(
                "the harness gave no verdict (exit code {}): {last}",
                run.exit_code
            )
        })?;
    if verdict.status != "ok" {
        return Err(format!(
            "Runtime Error: {}",
            verdict.error.unwrap_or_default()
        ));
    }
    if verdict.seconds > problem.timeout.as_secs_f64() {
        return Err(format!(
            "Time Limit Exceeded ({:.2} s > {:.2} s)",
            verdict.seconds,
            problem.timeout.as_secs_f64()
        ));
    }
    let right = match (&test.expected, verdict.output, verdict.result) {
        (Expected::Stdout(want), Some(got), _) => stdout_matches(want, &got),
        (Expected::Value(want), _, Some(got)) => python_eq(&got, want),
        _ => false,
    };
    if right {
        Ok(())
    } else {
        Err("Wrong Answer".to_owned())
    }
}

/// LiveCodeBench's `get_stripped_lines`.
fn stripped_lines(text: &str) -> Vec<&str> {
    pystr::strip(text).split('\n').map(pystr::strip).collect()
}

/// LiveCodeBench's stdout comparison (see the module docs).
pub fn stdout_matches(expected: &str, actual: &str) -> bool {
    let (want, got) = (stripped_lines(expected), stripped_lines(actual));
    want.len() == got.len()
        && want.iter().zip(&got).all(|(w, g)| {
            w == g
                || match (decimal_line(g), decimal_line(w)) {
                    (Some(g), Some(w)) => g == w,
                    _ => false,
                }
        })
}

/// `[Decimal(t) for t in line.split()]`, or `None` when a token is not a
/// decimal.
fn decimal_line(line: &str) -> Option<Vec<Decimal>> {
    pystr::split_whitespace(line).map(Decimal::parse).collect()
}

/// A Python `Decimal` reduced to what its equality looks at.
#[derive(Debug, Clone)]
enum Decimal {
    /// Zero, of either sign (`Decimal('0') == Decimal('-0.00')`).
    Zero,
    /// A finite non-zero value: sign, digits without leading or trailing
    /// zeros, and the exponent of the last digit.
    Finite {
        negative: bool,
        digits: String,
        exponent: i64,
    },
    Infinity {
        negative: bool,
    },
    /// NaN and sNaN equal nothing.
    NaN,
}

impl PartialEq for Decimal {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Decimal::Zero, Decimal::Zero) => true,
            (
                Decimal::Finite {
                    negative: a,
                    digits: b,
                    exponent: c,
                },
                Decimal::Finite {
                    negative: x,
                    digits: y,
                    exponent: z,
                },
            ) => a == x && b == y && c == z,
            (Decimal::Infinity { negative: a }, Decimal::Infinity { negative: b }) => a == b,
            _ => false,
        }
    }
}

impl Decimal {
    /// Python's `Decimal(text)` grammar: a sign, digits with an optional
    /// point (underscores between digits allowed), an optional exponent;
    /// or `Inf`/`Infinity`/`NaN`/`sNaN` in any case.
    fn parse(text: &str) -> Option<Self> {
        let (negative, body) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let lower = body.to_ascii_lowercase();
        if lower == "inf" || lower == "infinity" {
            return Some(Decimal::Infinity { negative });
        }
        for nan in ["nan", "snan"] {
            if let Some(payload) = lower.strip_prefix(nan) {
                return payload
                    .bytes()
                    .all(|b| b.is_ascii_digit())
                    .then_some(Decimal::NaN);
            }
        }
        let (mantissa, exponent) = match body.find(['e', 'E']) {
            Some(at) => (&body[..at], Some(&body[at + 1..])),
            None => (body, None),
        };
        let exponent: i64 = match exponent {
            Some(e) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if !digits_ok(digits) {
                    return None;
                }
                e.replace('_', "").parse().ok()?
            }
            None => 0,
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if (int.is_empty() && frac.is_empty())
            || (!int.is_empty() && !digits_ok(int))
            || (!frac.is_empty() && !digits_ok(frac))
        {
            return None;
        }
        let all: String = int
            .chars()
            .chain(frac.chars())
            .filter(|c| *c != '_')
            .collect();
        let frac_len = frac.chars().filter(|c| *c != '_').count() as i64;
        let trimmed = all.trim_start_matches('0');
        if trimmed.is_empty() {
            return Some(Decimal::Zero);
        }
        let significant = trimmed.trim_end_matches('0');
        let trailing = (trimmed.len() - significant.len()) as i64;
        Some(Decimal::Finite {
            negative,
            digits: significant.to_owned(),
            exponent: exponent - frac_len + trailing,
        })
    }
}

/// ASCII digits, with single underscores only between digits.
fn digits_ok(text: &str) -> bool {
    !text.is_empty()
        && !text.starts_with('_')
        && !text.ends_with('_')
        && !text.contains("__")
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'_')
}

/// Python's `prediction == expected` between the harness's typed value
/// (`["int", "3"]`, `["list", [...]]`, ...) and a JSON value as `json.loads`
/// gives it. JSON integers past 64 bits compare at f64 precision.
pub fn python_eq(typed: &Value, expected: &Value) -> bool {
    let Some(tag) = typed.get(0).and_then(Value::as_str) else {
        return false;
    };
    if tag == "none" {
        return expected.is_null();
    }
    let Some(payload) = typed.get(1) else {
        return false;
    };
    match (tag, expected) {
        ("bool", _) => match expected {
            Value::Bool(b) => payload.as_bool() == Some(*b),
            Value::Number(_) => number_eq(
                &Number::Int(i128::from(payload.as_bool() == Some(true))),
                expected,
            ),
            _ => false,
        },
        ("int", _) => payload
            .as_str()
            .and_then(|d| {
                d.parse::<i128>()
                    .ok()
                    .map(Number::Int)
                    .or_else(|| d.parse().ok().map(Number::Float))
            })
            .is_some_and(|n| match expected {
                Value::Bool(b) => n == Number::Int(i128::from(*b)),
                _ => number_eq(&n, expected),
            }),
        ("float", _) => {
            payload
                .as_str()
                .and_then(parse_python_float)
                .is_some_and(|f| match expected {
                    Value::Bool(b) => f == f64::from(u8::from(*b)),
                    _ => number_eq(&Number::Float(f), expected),
                })
        }
        ("str", Value::String(s)) => payload.as_str() == Some(s),
        ("list", Value::Array(items)) => payload.as_array().is_some_and(|got| {
            got.len() == items.len() && got.iter().zip(items).all(|(g, w)| python_eq(g, w))
        }),
        ("dict", Value::Object(map)) => payload.as_array().is_some_and(|pairs| {
            pairs.len() == map.len()
                && map.iter().all(|(key, want)| {
                    pairs.iter().any(|pair| {
                        pair.get(0)
                            .is_some_and(|k| python_eq(k, &Value::String(key.clone())))
                            && pair.get(1).is_some_and(|v| python_eq(v, want))
                    })
                })
        }),
        _ => false,
    }
}

/// A Python number for equality.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Number {
    Int(i128),
    Float(f64),
}

/// Python's numeric `==` (exact between ints and floats).
fn number_eq(got: &Number, expected: &Value) -> bool {
    let Value::Number(n) = expected else {
        return false;
    };
    let want = if let Some(i) = n.as_i64() {
        Number::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Number::Int(i128::from(u))
    } else {
        Number::Float(n.as_f64().unwrap_or(f64::NAN))
    };
    match (*got, want) {
        (Number::Int(a), Number::Int(b)) => a == b,
        (Number::Float(a), Number::Float(b)) => a == b,
        // Exact up to 2^53; past that at f64 precision (see python_eq).
        (Number::Int(i), Number::Float(f)) | (Number::Float(f), Number::Int(i)) => i as f64 == f,
    }
}

/// A float as Python's `repr` writes it (`inf`, `-inf`, `nan` included).
fn parse_python_float(text: &str) -> Option<f64> {
    match text {
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        other => other.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdout_lines_compare_as_text_then_as_decimals() {
        assert!(stdout_matches("3\n4\n", "3  \n4\n\n"));
        assert!(stdout_matches("1 2", "1 2"));
        assert!(stdout_matches("1.0 2", "1 2.000"));
        assert!(stdout_matches("0", "-0.0"));
        assert!(stdout_matches("1e3", "1000"));
        assert!(stdout_matches("1_000", "1000"));
        assert!(stdout_matches("\n\n5\n", "5"));
        assert!(!stdout_matches("0.3", "0.30000000000000004"));
        assert!(!stdout_matches("1 2", "1   2 3"));
        assert!(!stdout_matches("3\n4", "3\n5"));
        assert!(!stdout_matches("3", "3\n\n4"));
        assert!(!stdout_matches("yes", "Yes"));
        assert!(!stdout_matches("nan", "NaN"));
        assert!(stdout_matches("inf", "Infinity"));
        // Python's strip also removes U+001C..U+001F.
        assert!(stdout_matches("7", "7\u{1f}"));
    }

    #[test]
    fn functional_results_compare_with_python_equality() {
        let t = |v: Value| v;
        assert!(python_eq(&t(json!(["int", "3"])), &json!(3)));
        assert!(python_eq(&t(json!(["int", "3"])), &json!(3.0)));
        assert!(python_eq(&t(json!(["float", "3.0"])), &json!(3)));
        assert!(python_eq(&t(json!(["bool", true])), &json!(1)));
        assert!(python_eq(&t(json!(["int", "1"])), &json!(true)));
        assert!(!python_eq(&t(json!(["float", "0.1"])), &json!(0.10000001)));
        assert!(python_eq(&t(json!(["none"])), &json!(null)));
        assert!(python_eq(
            &t(json!(["list", [["int", "1"], ["str", "a"]]])),
            &json!([1, "a"])
        ));
        assert!(!python_eq(
            &t(json!(["tuple", [["int", "1"]]])),
            &json!([1])
        ));
        assert!(!python_eq(
            &t(json!(["list", [["tuple", [["int", "1"]]]]])),
            &json!([[1]])
        ));
        assert!(python_eq(
            &t(json!(["dict", [[["str", "a"], ["int", "1"]]]])),
            &json!({"a": 1})
        ));
        assert!(!python_eq(
            &t(json!(["dict", [[["int", "1"], ["int", "1"]]]])),
            &json!({"1": 1})
        ));
        assert!(!python_eq(&t(json!(["other", "{1, 2}"])), &json!([1, 2])));
        assert!(python_eq(
            &t(json!(["int", "123456789012345678901"])),
            &json!(123456789012345678901u128 as f64)
        ));
    }
}
