//! `string_transform`: a synthetic single-step environment small enough for
//! a randomly initialised character-level model to learn from scratch with
//! GRPO on a CPU.
//!
//! # Episode
//!
//! The prompt is one user message `"<task>: <input>"`, e.g. `copy: abca`, and
//! the model must answer with the transformed input:
//!
//! | task      | target for `abca` |
//! |-----------|-------------------|
//! | `copy`    | `abca`            |
//! | `reverse` | `acba`            |
//! | `sort`    | `aabc`            |
//!
//! The input comes from `extras.extra_info.input`. Rows without an input but
//! with `extra_info.seed` get a generated one (letters of `alphabet`, length
//! `min_len..=max_len`), and the prompt is rewritten to match.
//!
//! # Reward (partial credit)
//!
//! With `r = response.trim()` and `t` the target, compared per character:
//!
//! ```text
//! reward = #{i : r[i] == t[i]} / max(len(r), len(t))
//! ```
//!
//! So the reward is 1.0 only for an exact answer, extra or missing characters
//! cost credit, and a model that merely emits random letters of the right
//! alphabet at the right length already scores about `1 / |alphabet|` (0.25
//! for `abcd`): learning proceeds smoothly from ~0 (random printable text)
//! through ~0.25 (right alphabet and length) to 1.0 (solving the task).
//!
//! # Config (all optional)
//!
//! `{"task": "copy" | "reverse" | "sort", "alphabet": "abcd", "min_len": 3,
//! "max_len": 5}`. `task` overrides the row's `extra_info.task` (default
//! `copy`) and then the prompt is rewritten for the configured task, so one
//! dataset serves all three tasks. Metrics: `exact_match`, `char_accuracy`.

mod instance;
mod task;

pub use instance::{generate_input, Instance};
pub use task::{partial_credit, Task};

use serde::Deserialize;
use serde_json::{json, Value};
use skyrl_sdk::{parse_config, Environment, Extras, Message, Result, StepOutput};

/// The env config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Task to pose; overrides the row's `extra_info.task`.
    pub task: Option<Task>,
    /// Letters of generated inputs.
    pub alphabet: String,
    /// Shortest generated input.
    pub min_len: usize,
    /// Longest generated input.
    pub max_len: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            task: None,
            alphabet: "abcd".into(),
            min_len: 3,
            max_len: 5,
        }
    }
}

/// One episode.
pub struct StringTransform {
    instance: Instance,
    rewrite_prompt: bool,
    reward: Option<f64>,
}

impl Environment for StringTransform {
    fn create(config: &Value, extras: &Extras) -> Result<Self> {
        let config: Config = parse_config(config)?;
        let (instance, rewrite_prompt) = Instance::from_extras(&config, extras)?;
        Ok(Self {
            instance,
            rewrite_prompt,
            reward: None,
        })
    }

    fn init(&mut self, prompt: Vec<Message>) -> Result<(Vec<Message>, Value)> {
        let meta = json!({ "task": self.instance.task, "target": self.instance.target });
        if self.rewrite_prompt {
            Ok((vec![Message::user(self.instance.prompt_text())], meta))
        } else {
            Ok((prompt, meta))
        }
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        let reward = partial_credit(action, &self.instance.target);
        self.reward = Some(reward);
        Ok(StepOutput::done(reward).with_metadata(json!({ "target": self.instance.target })))
    }

    fn metrics(&self) -> Value {
        let reward = self.reward.unwrap_or(0.0);
        json!({ "exact_match": reward == 1.0, "char_accuracy": reward })
    }
}

skyrl_sdk::export_env!(
    StringTransform,
    name = "string_transform",
    version = "0.1.0",
    description =
        "Copy / reverse / sort a short string; partial-credit reward per matching character"
);
