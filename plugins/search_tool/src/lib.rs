//! skyrl-gym's Search tool (`SearchToolGroup.search`) as a tool plugin.
//!
//! `search {"query": "...", "search_url": "...", "topk": 3, "timeout": 30}`
//! POSTs `{"query", "topk", "return_scores": true}` to a retrieval server
//! that speaks SkyRL's / Search-R1's `/retrieve` protocol and returns what
//! skyrl-gym returns: `json.dumps({"result": "Doc 1: ...\n..."})`. The
//! plugin reaches the server only when the run grants its origin
//! (`environment.sandbox.search_tool.allowed_hosts`).
//!
//! Retries follow skyrl-gym: server errors (500/502/503/504), refused
//! connections and timeouts are retried with delays of 1, 2, 3... seconds,
//! at most `max_retries` attempts (10) and never past `timeout` seconds
//! after the first one; other failures end at once. The error text differs
//! from skyrl-gym's (which embeds a random request id).

mod format;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skyrl_sdk::http::{HttpError, Request};
use skyrl_sdk::{Error, Result, Tool, ToolSpec};

pub use format::{passages_to_string, py_json_result};

/// skyrl-gym's defaults (`SearchEnvConfig`, `call_search_api`).
const DEFAULT_URL: &str = "http://127.0.0.1:8000/retrieve";
const DEFAULT_TOPK: u64 = 3;
const DEFAULT_TIMEOUT_S: f64 = 30.0;
const DEFAULT_MAX_RETRIES: u64 = 10;

/// The tool plugin.
pub struct SearchTool;

impl Tool for SearchTool {
    fn specs() -> Vec<ToolSpec> {
        vec![ToolSpec::new(
            "search",
            "Search a retrieval corpus; returns the top passages as `Doc i: ...` lines.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": ["string", "null"]},
                    "search_url": {"type": "string"},
                    "topk": {"type": "integer", "minimum": 1},
                    "timeout": {"type": "number", "exclusiveMinimum": 0},
                    "max_retries": {"type": "integer", "minimum": 1}
                },
                "required": ["query"]
            }),
        )]
    }

    fn call(_name: &str, args: &Value) -> Result<String> {
        let query = match args.get("query") {
            None | Some(Value::Null) => return Ok(String::new()),
            Some(Value::String(q)) => q.trim().to_string(),
            Some(other) => {
                return Err(Error::input(format!("query must be a string, got {other}")))
            }
        };
        let url = args
            .get("search_url")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_URL);
        let topk = args
            .get("topk")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_TOPK);
        let timeout = args
            .get("timeout")
            .and_then(Value::as_f64)
            .unwrap_or(DEFAULT_TIMEOUT_S);
        if !(timeout > 0.0 && timeout.is_finite()) {
            return Err(Error::input(format!(
                "timeout must be positive seconds, got {timeout}"
            )));
        }
        let max_retries = args
            .get("max_retries")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_MAX_RETRIES)
            .max(1);
        let timeout = Duration::from_secs_f64(timeout);
        let payload = json!({"query": query, "topk": topk, "return_scores": true});
        Ok(match call_search_api(url, &payload, timeout, max_retries) {
            Ok(response) => format_response(&response),
            Err(error) => py_json_result(&format!("Search error: {error}")),
        })
    }
}

/// POSTs `payload`, retrying as skyrl-gym does; the parsed JSON response.
fn call_search_api(
    url: &str,
    payload: &Value,
    timeout: Duration,
    max_retries: u64,
) -> std::result::Result<Value, String> {
    let start = Instant::now();
    let mut last_error = String::new();
    for attempt in 0..max_retries {
        let request = Request::post_json(url, payload).with_timeout(timeout);
        let retryable = match request.send() {
            Ok(response) if matches!(response.status, 500 | 502 | 503 | 504) => {
                last_error = format!(
                    "API Request Error: Server Error ({}) on attempt {}/{max_retries}",
                    response.status,
                    attempt + 1
                );
                true
            }
            Ok(response) if response.status >= 400 => {
                return Err(format!(
                    "API Request Error: {} for url: {url}",
                    response.status
                ));
            }
            Ok(response) => {
                return response.json().map_err(|e| {
                    let text = response.text();
                    let head: String = text.chars().take(200).collect();
                    format!("API Response JSON Decode Error: {e}, Response: {head}")
                })
            }
            Err(e @ (HttpError::Unreachable { .. } | HttpError::Timeout { .. })) => {
                last_error = e.to_string();
                true
            }
            Err(e) => return Err(e.to_string()),
        };
        let delay = Duration::from_secs(attempt + 1);
        if !retryable || attempt + 1 == max_retries || start.elapsed() + delay > timeout {
            break;
        }
        std::thread::sleep(delay);
    }
    Err(last_error)
}

/// skyrl-gym's rendering of a `/retrieve` answer.
fn format_response(response: &Value) -> String {
    let results = match response.get("result") {
        Some(Value::Array(results)) if !results.is_empty() => results,
        _ => return py_json_result("No search results found."),
    };
    let mut pretty = Vec::with_capacity(results.len());
    for retrieval in results {
        match passages_to_string(retrieval) {
            Ok(text) => pretty.push(text),
            Err(e) => return py_json_result(&format!("Error processing search results: {e}")),
        }
    }
    py_json_result(&pretty.join("\n---\n"))
}

skyrl_sdk::export_tool!(
    SearchTool,
    name = "search_tool",
    version = "0.1.0",
    description = "skyrl-gym's Search tool: top passages from a /retrieve server"
);
