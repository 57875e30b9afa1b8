//! The `calculator` tool: `{"expression": "2 * (3 + 4)"}` -> `"14"`.
//!
//! Expressions use numbers (`12`, `3.5`, `1,000` is NOT accepted; `1e3` is),
//! `+ - * / %`, `^` (power, right-associative), unary `-`/`+` and
//! parentheses. Nothing else is evaluated: no names, no functions. Errors
//! (syntax, division by zero, non-finite results, over-long or too deeply
//! nested input) are reported as `invalid-input`.

mod expr;

pub use expr::{evaluate, format_number, EvalError, MAX_DEPTH, MAX_LEN};

use serde_json::{json, Value};
use skyrl_sdk::{Error, Result, Tool, ToolSpec};

/// The calculator tool set (one tool).
pub struct Calculator;

impl Tool for Calculator {
    fn specs() -> Vec<ToolSpec> {
        vec![ToolSpec::new(
            "calculator",
            "Evaluate an arithmetic expression with + - * / % ^ and parentheses.",
            json!({
                "type": "object",
                "properties": {"expression": {"type": "string", "description": "e.g. (12 + 30) * 2"}},
                "required": ["expression"],
                "additionalProperties": false
            }),
        )]
    }

    fn call(_name: &str, args: &Value) -> Result<String> {
        let expression = args
            .get("expression")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                Error::input("calculator needs {\"expression\": \"...\"} with a string")
            })?;
        evaluate(expression)
            .map(format_number)
            .map_err(Error::input)
    }
}

skyrl_sdk::export_tool!(
    Calculator,
    name = "calculator",
    version = "0.1.0",
    description = "Safe arithmetic evaluation as a tool"
);
