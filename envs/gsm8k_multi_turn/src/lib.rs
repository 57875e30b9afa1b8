//! Multi-turn GSM8K (skyrl-gym `gsm8k_multi_turn`) with turn-level rewards.
//!
//! - `max_turns`: `extras.max_turns` (set by the generator), else
//!   `extras.extra_info.max_turns`, else 5.
//! - Each turn's reward: 1.0 when the first `#### <number>` equals
//!   `extras.reward_spec.ground_truth`, `0.2 / max_turns` when an answer is
//!   present but wrong, 0.0 when there is none.
//! - Done when `turns >= max_turns` or the reward is 1.0. Otherwise the
//!   observation asks for step-by-step reasoning with a tentative
//!   `#### ANSWER`, and before the last turn for only the final answer.

use serde_json::{json, Value};
use skyrl_sdk::{gsm8k, Environment, Extras, Message, Result, StepOutput};

/// `max_turns` when neither the generator nor the row sets one.
pub const DEFAULT_MAX_TURNS: u32 = 5;
/// Total format reward spread over the turns.
pub const FORMAT_SCORE: f64 = 0.2;
/// Feedback while more than one turn remains.
pub const REASONING_PROMPT: &str = "Please provide your step-by-step reasoning, and also include a tentative numeric answer at the end in the exact format: '#### ANSWER'.";
/// Feedback when exactly one turn remains.
pub const FINAL_ANSWER_PROMPT: &str =
    "Now provide only the final numeric answer in the exact format: '#### ANSWER'.";

/// One multi-turn GSM8K episode.
pub struct Gsm8kMultiTurn {
    ground_truth: String,
    max_turns: u32,
    turns: u32,
}

impl Gsm8kMultiTurn {
    /// Reward for a wrong but well-formatted answer.
    pub fn format_score_per_turn(&self) -> f64 {
        FORMAT_SCORE / f64::from(self.max_turns)
    }

    /// The feedback shown after a turn that did not end the episode.
    pub fn observation(&self) -> Vec<Message> {
        match self.max_turns.saturating_sub(self.turns) {
            0 => vec![],
            1 => vec![Message::user(FINAL_ANSWER_PROMPT)],
            _ => vec![Message::user(REASONING_PROMPT)],
        }
    }
}

impl Environment for Gsm8kMultiTurn {
    fn create(_config: &Value, extras: &Extras) -> Result<Self> {
        Ok(Self {
            ground_truth: extras.ground_truth_str()?,
            max_turns: extras.max_turns()?.unwrap_or(DEFAULT_MAX_TURNS),
            turns: 0,
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        self.turns += 1;
        let reward = gsm8k::compute_score(
            action,
            &self.ground_truth,
            self.format_score_per_turn(),
            1.0,
        );
        if self.turns >= self.max_turns || reward == 1.0 {
            Ok(StepOutput::done(reward))
        } else {
            Ok(StepOutput::next(self.observation(), reward))
        }
    }

    fn metrics(&self) -> Value {
        json!({ "steps": self.turns })
    }
}

skyrl_sdk::export_env!(
    Gsm8kMultiTurn,
    name = "gsm8k_multi_turn",
    version = "0.1.0",
    description = "Multi-turn GSM8K with per-turn rewards (skyrl-gym gsm8k_multi_turn)"
);
