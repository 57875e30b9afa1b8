//! skyrl-gym's `searchcode` environment: a multi-turn agent with two tools,
//! `search` (the `search_tool` plugin) and `python` (the sandboxed `python`
//! tool plugin), called as `<tool><search>query</search></tool>` or
//! `<tool><python>code</python></tool>`.
//!
//! - Done when the action holds `<solution>` and `</solution>`, or after
//!   `max_turns` turns (`extras.max_turns`, default 2).
//! - The final reward is GSM8K's strict score (`#### <number>`, 1.0 or 0.0)
//!   over the whole episode (responses and observations joined by
//!   newlines) against `extras.reward_spec.ground_truth`; other turns 0.
//! - The observation is the tool's output as skyrl-gym renders it: search
//!   results as `{"result": ...}` JSON; Python's stripped stdout, or
//!   `Error executing Python code: <stderr>` when the program wrote to
//!   stderr. An empty output gives no observation. A malformed action or a
//!   failed tool call becomes the observation text.
//!
//! Config (`environment.skyrl_gym.searchcode.*`): `search_url`, `topk`,
//! `timeout` as for `search` (skyrl-gym hard-wires its defaults here).

pub mod action;

use serde::Deserialize;
use serde_json::{json, Value};
use skyrl_sdk::{call_tool, gsm8k, parse_config, Environment, Extras, Message, Result, StepOutput};

/// `max_turns` when the row sets none (skyrl-gym's default).
pub const DEFAULT_MAX_TURNS: u32 = 2;

/// The tools, in skyrl-gym's tool-group order.
const TOOLS: [&str; 2] = ["search", "python"];

/// Where the search tool sends its queries.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchCodeConfig {
    pub search_url: String,
    pub topk: u32,
    pub timeout: f64,
}

impl Default for SearchCodeConfig {
    fn default() -> Self {
        Self {
            search_url: "http://127.0.0.1:8000/retrieve".into(),
            topk: 3,
            timeout: 30.0,
        }
    }
}

/// One searchcode episode.
pub struct SearchCode {
    config: SearchCodeConfig,
    ground_truth: String,
    max_turns: u32,
    turns: u32,
    history: Vec<String>,
}

impl SearchCode {
    fn run_tool(&self, call: &action::ToolCall) -> std::result::Result<String, String> {
        match call.name.as_str() {
            "search" => {
                let args = json!({
                    "query": call.input,
                    "search_url": self.config.search_url,
                    "topk": self.config.topk,
                    "timeout": self.config.timeout,
                });
                call_tool("search", &args.to_string())
            }
            "python" => {
                let out = call_tool("python", &json!({ "code": call.input }).to_string())?;
                let out: Value = serde_json::from_str(&out)
                    .map_err(|e| format!("the python tool answered malformed JSON: {e}"))?;
                let field = |k: &str| out.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let (stdout, stderr) = (field("stdout"), field("stderr"));
                Ok(if !stderr.is_empty() {
                    format!("Error executing Python code: {}", stderr.trim())
                } else {
                    stdout.trim().to_string()
                })
            }
            other => Err(format!(
                "Tool '{other}' not found in any registered tool group."
            )),
        }
    }
}

impl Environment for SearchCode {
    fn create(config: &Value, extras: &Extras) -> Result<Self> {
        Ok(Self {
            config: parse_config(config)?,
            ground_truth: extras.ground_truth_str()?,
            max_turns: extras.max_turns()?.unwrap_or(DEFAULT_MAX_TURNS),
            turns: 0,
            history: Vec::new(),
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        self.turns += 1;
        self.history.push(action.to_string());
        if self.turns >= self.max_turns
            || (action.contains("<solution>") && action.contains("</solution>"))
        {
            let episode = self.history.join("\n");
            let reward = gsm8k::compute_score(&episode, &self.ground_truth, 0.0, 1.0);
            return Ok(StepOutput::done(reward));
        }
        let (observation, metadata) = match action::parse(action) {
            Ok(call) => {
                let text = match self.run_tool(&call) {
                    Ok(text) | Err(text) => text,
                };
                let group = match call.name.as_str() {
                    "search" => json!("SearchToolGroup"),
                    "python" => json!("PythonCodeExecutorToolGroup"),
                    _ => Value::Null,
                };
                let known = group != Value::Null;
                let meta = json!({
                    "tool_group": group,
                    "tool_name": if known { json!(call.name) } else { Value::Null },
                    "tool_input": if known { json!([call.input]) } else { json!("") },
                });
                (text, meta)
            }
            Err(reason) => (
                reason.to_string(),
                json!({"tool_group": null, "tool_name": null, "tool_input": ""}),
            ),
        };
        let mut metadata = metadata;
        metadata["tools"] = json!(TOOLS.iter().map(|t| [t]).collect::<Vec<_>>());
        let observations = if observation.is_empty() {
            Vec::new()
        } else {
            self.history.push(observation.clone());
            vec![Message::new("user", observation)]
        };
        Ok(StepOutput::next(observations, 0.0).with_metadata(metadata))
    }
}

skyrl_sdk::export_env!(
    SearchCode,
    name = "searchcode",
    version = "0.1.0",
    description = "Search and Python tools with a GSM8K-style final reward (skyrl-gym searchcode)",
    uses_tools = ["search", "python"]
);

#[cfg(test)]
mod tests {
    use super::*;

    fn episode(max_turns: u32) -> SearchCode {
        let extras = Extras::from_json(
            &json!({"reward_spec": {"ground_truth": "42"}, "max_turns": max_turns}).to_string(),
        )
        .unwrap();
        SearchCode::create(&json!({}), &extras).unwrap()
    }

    #[test]
    fn a_malformed_action_is_the_observation() {
        let mut env = episode(3);
        let out = env.step("thinking only").unwrap();
        assert_eq!(out.observations[0].content, action::NO_TOOL_BLOCK);
        assert_eq!(out.metadata["tool_name"], Value::Null);
        assert_eq!(out.metadata["tools"], json!([["search"], ["python"]]));
    }

    #[test]
    fn an_unknown_tool_is_named() {
        let mut env = episode(3);
        let out = env.step("<tool><shell>ls</shell></tool>").unwrap();
        assert_eq!(
            out.observations[0].content,
            "Tool 'shell' not found in any registered tool group."
        );
    }

    #[test]
    fn the_solution_is_scored_over_the_whole_episode() {
        let mut env = episode(3);
        env.step("<tool><search>q</search></tool>").unwrap();
        let out = env.step("#### 42 <solution>42</solution>").unwrap();
        assert!(out.done);
        assert_eq!(out.reward, 1.0);
    }
}
