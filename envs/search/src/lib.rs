//! SearchR1 multi-turn search (skyrl-gym `search`).
//!
//! Each turn the model either searches (`<search>query</search>`: the
//! observation is `\n<information>{tool output}</information>\n`, reward 0)
//! or answers (`<answer>...</answer>`: done). The episode also ends after
//! `max_turns` turns (`extras.max_turns`, default 2). The final reward is
//! SearchR1's exact match of the last `<answer>` in the whole episode
//! (responses and observations joined) against
//! `extras.reward_spec.ground_truth.target` ([`score`]).
//!
//! Searches go through the `search` tool (the `search_tool` plugin), which
//! needs an HTTP grant for the retrieval server. Config
//! (`environment.skyrl_gym.search.*`, skyrl-gym's `SearchEnvConfig`):
//! `search_url` (default `http://127.0.0.1:8000/retrieve`), `topk` (3),
//! `timeout` (30 s), `log_requests` (false). A failed tool call becomes the
//! observation text, as in skyrl-gym.

pub mod score;

use serde::Deserialize;
use serde_json::{json, Value};
use skyrl_sdk::{call_tool, parse_config, Environment, Error, Extras, Message, Result, StepOutput};

/// `max_turns` when the row sets none (skyrl-gym's default).
pub const DEFAULT_MAX_TURNS: u32 = 2;

/// skyrl-gym's `SearchEnvConfig`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    pub search_url: String,
    pub topk: u32,
    /// Seconds per retrieval request (and for its retries).
    pub timeout: f64,
    pub log_requests: bool,
}

impl Default for SearchConfig {
    fn default() -> Self {
        Self {
            search_url: "http://127.0.0.1:8000/retrieve".into(),
            topk: 3,
            timeout: 30.0,
            log_requests: false,
        }
    }
}

/// One search episode.
pub struct Search {
    config: SearchConfig,
    targets: Vec<String>,
    max_turns: u32,
    turns: u32,
    /// Contents of the responses and observations so far.
    history: Vec<String>,
}

impl Search {
    /// `_parse_action`: the first `<search>` block, if the action has both tags.
    pub fn parse_query(action: &str) -> Option<String> {
        if !(action.contains("<search>") && action.contains("</search>")) {
            return None;
        }
        let start = action.find("<search>")? + "<search>".len();
        let end = action[start..].find("</search>")?;
        Some(action[start..start + end].to_string())
    }

    fn is_done(&self, action: &str) -> bool {
        self.turns >= self.max_turns
            || (action.contains("<answer>") && action.contains("</answer>"))
    }

    fn search(&self, query: Option<&str>) -> std::result::Result<String, String> {
        let args = json!({
            "query": query,
            "search_url": self.config.search_url,
            "topk": self.config.topk,
            "timeout": self.config.timeout,
        });
        if self.config.log_requests {
            skyrl_sdk::log::info(&format!("search: {args}"));
        }
        let output = call_tool("search", &args.to_string())?;
        Ok(format!("\n<information>{output}</information>\n"))
    }
}

impl Environment for Search {
    fn create(config: &Value, extras: &Extras) -> Result<Self> {
        let config: SearchConfig = parse_config(config)?;
        let ground_truth = extras
            .ground_truth()
            .ok_or_else(|| Error::config("reward_spec.ground_truth is required"))?;
        let targets = score::targets(ground_truth).map_err(Error::config)?;
        Ok(Self {
            config,
            targets,
            max_turns: extras.max_turns()?.unwrap_or(DEFAULT_MAX_TURNS),
            turns: 0,
            history: Vec::new(),
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        self.turns += 1;
        self.history.push(action.to_string());
        if self.is_done(action) {
            let reward = score::compute_score(&self.history.concat(), &self.targets);
            return Ok(StepOutput::done(reward));
        }
        let query = Self::parse_query(action);
        let observation = match self.search(query.as_deref()) {
            Ok(text) | Err(text) => text,
        };
        self.history.push(observation.clone());
        Ok(
            StepOutput::next(vec![Message::new("user", observation)], 0.0).with_metadata(json!({
                "tool_group": "SearchToolGroup",
                "tool_name": "search",
                "tool_input": [query],
            })),
        )
    }
}

skyrl_sdk::export_env!(
    Search,
    name = "search",
    version = "0.1.0",
    description = "SearchR1 multi-turn search with exact-match reward (skyrl-gym search)",
    uses_tools = ["search"]
);

#[cfg(test)]
mod tests {
    use super::*;

    fn episode(max_turns: u32) -> Search {
        let extras = Extras::from_json(
            &json!({"reward_spec": {"ground_truth": {"target": ["Paris"]}}, "max_turns": max_turns}).to_string(),
        )
        .unwrap();
        Search::create(&json!({}), &extras).unwrap()
    }

    #[test]
    fn the_first_search_block_is_the_query() {
        assert_eq!(
            Search::parse_query("<search> a </search><search>b</search>").as_deref(),
            Some(" a ")
        );
        assert_eq!(Search::parse_query("<search>open"), None);
    }

    #[test]
    fn an_answer_ends_the_episode_with_the_exact_match_reward() {
        let mut env = episode(3);
        let out = env.step("<answer>paris</answer>").unwrap();
        assert!(out.done);
        assert_eq!(out.reward, 1.0);
    }

    #[test]
    fn a_search_turn_reports_the_tool_failure_as_its_observation() {
        let mut env = episode(3);
        let out = env.step("<search>capital of France</search>").unwrap();
        assert!(!out.done);
        assert!(out.observations[0].content.contains("not running inside"));
        assert_eq!(out.metadata["tool_input"], json!(["capital of France"]));
        let last = env.step("no idea").unwrap();
        assert!(!last.done);
        let end = env.step("<answer>Paris</answer>").unwrap();
        assert!(end.done && end.reward == 1.0);
    }

    #[test]
    fn max_turns_ends_the_episode() {
        let mut env = episode(1);
        let out = env.step("thinking").unwrap();
        assert!(out.done);
        assert_eq!(out.reward, 0.0);
    }
}
