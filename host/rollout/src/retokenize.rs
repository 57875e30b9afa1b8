//! skyrl-train's retokenizing multi-turn path, taken when
//! `generator.chat_template` names a custom rollout template (e.g.
//! `qwen3_without_thinking`, which drops earlier turns' `<think>` text).
//!
//! Instead of appending tokens turn by turn, the trajectory keeps its chat
//! history as messages: each turn's input is the whole history rendered by the
//! custom template (with the generation prompt) and tokenized afresh; the
//! assistant's decoded text and the env's observations are appended as
//! messages. At the end the response is the history after the prompt (less the
//! last observations) rendered once more, and its loss mask is the template's
//! `{% generation %}` blocks (transformers' assistant mask). As in
//! skyrl-train, the trajectory's reward is its last step's, on the last
//! token, and no rollout log-probs line up with these tokens (config refuses
//! `sampling_params.logprobs` with a custom template; zeros are recorded).
//!
//! Where this differs on purpose: skyrl-train checks `max_input_length`
//! against the previous turn's input; here it is checked against the input
//! about to be generated from.

use anyhow::Result;
use serde_json::{Map, Value};
use skyrl_model::{ChatMessage, ChatTemplate, Tokenizer};

/// A trajectory's conversation in the retokenizing path.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChatHistory {
    /// Every message so far (prompt, assistant turns, observations).
    pub messages: Vec<ChatMessage>,
    /// Messages of the prompt (after `env.init`).
    pub prompt_len: usize,
    /// Observation messages of the last env step (left out of the response).
    pub last_observations: usize,
    /// Reward of the last env step.
    pub last_reward: f32,
}

impl ChatHistory {
    pub fn new(prompt: Vec<ChatMessage>) -> Self {
        Self {
            prompt_len: prompt.len(),
            messages: prompt,
            ..Self::default()
        }
    }

    /// Appends a turn's assistant text (without a trailing EOS string, which
    /// the template writes itself), the env's reply (none when the episode
    /// ended) and the step's reward.
    pub fn add_turn(
        &mut self,
        text: &str,
        eos: Option<&str>,
        observations: Vec<ChatMessage>,
        reward: f32,
    ) {
        let text = match eos {
            Some(eos) if !eos.is_empty() => text.strip_suffix(eos).unwrap_or(text),
            _ => text,
        };
        self.messages.push(ChatMessage::new("assistant", text));
        self.last_observations = observations.len();
        self.messages.extend(observations);
        self.last_reward = reward;
    }

    /// Token ids of the next turn's input: the whole history with the
    /// generation prompt.
    pub fn input_ids(
        &self,
        tokenizer: &Tokenizer,
        template: &ChatTemplate,
        kwargs: &Map<String, Value>,
    ) -> Result<Vec<i64>> {
        Ok(tokenizer.encode_chat_using(template, &self.messages, true, Some(kwargs))?)
    }

    /// The response tokens and their loss mask: the messages after the prompt,
    /// less the last observations, rendered without a generation prompt.
    pub fn response(
        &self,
        tokenizer: &Tokenizer,
        template: &ChatTemplate,
        kwargs: &Map<String, Value>,
    ) -> Result<(Vec<i64>, Vec<f32>)> {
        let end = self
            .messages
            .len()
            .saturating_sub(self.last_observations)
            .max(self.prompt_len);
        let messages = &self.messages[self.prompt_len..end];
        if messages.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let (ids, mask) =
            tokenizer.encode_chat_assistant_mask(template, messages, false, Some(kwargs))?;
        Ok((ids, mask.into_iter().map(f32::from).collect()))
    }
}

/// The `[start, end)` runs of 1s in a loss mask (the assistant turns).
pub(crate) fn mask_runs(mask: &[f32]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut start = None;
    for (i, &m) in mask.iter().enumerate() {
        match (m > 0.0, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                runs.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        runs.push((s, mask.len()));
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_runs_are_the_ones() {
        assert_eq!(mask_runs(&[0., 1., 1., 0., 1.]), vec![(1, 3), (4, 5)]);
        assert_eq!(mask_runs(&[]), vec![]);
    }

    #[test]
    fn history_keeps_turns_and_drops_eos_text() {
        let mut h = ChatHistory::new(vec![ChatMessage::new("user", "q")]);
        h.add_turn(
            "a<|im_end|>",
            Some("<|im_end|>"),
            vec![ChatMessage::new("user", "obs")],
            0.5,
        );
        assert_eq!(h.messages[1], ChatMessage::new("assistant", "a"));
        assert_eq!((h.last_observations, h.last_reward), (1, 0.5));
        h.add_turn("b", Some("<|im_end|>"), Vec::new(), 2.0);
        assert_eq!((h.last_observations, h.last_reward), (0, 2.0));
        assert_eq!(h.messages.len(), 4);
    }
}
