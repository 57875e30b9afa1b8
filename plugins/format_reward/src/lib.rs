//! Answer-format reward, a typical rubric component next to a correctness
//! reward: 1.0 when the response has a `#### <answer>` marker with a
//! non-empty answer, 0.5 when it at least contains a digit, else 0.0. The
//! ground truth is ignored.

use serde_json::Value;
use skyrl_sdk::{Extras, Message, Result, Reward};

/// The format score of `response`.
pub fn format_score(response: &str) -> f64 {
    let marked = response
        .split("####")
        .skip(1)
        .any(|rest| !rest.trim().is_empty());
    if marked {
        1.0
    } else if response.chars().any(|c| c.is_ascii_digit()) {
        0.5
    } else {
        0.0
    }
}

/// The format reward function.
pub struct FormatReward;

impl Reward for FormatReward {
    fn score(
        _prompt: &[Message],
        response: &str,
        _ground_truth: &Value,
        _extras: &Extras,
    ) -> Result<f64> {
        Ok(format_score(response))
    }
}

skyrl_sdk::export_reward!(
    FormatReward,
    name = "format_reward",
    version = "0.1.0",
    description = "1.0 for a '#### <answer>' line, 0.5 for a bare number, else 0"
);

#[cfg(test)]
mod tests {
    use super::format_score;

    #[test]
    fn scores_the_answer_format() {
        assert_eq!(format_score("so #### 42"), 1.0);
        assert_eq!(format_score("####   "), 0.0);
        assert_eq!(format_score("it is 7"), 0.5);
        assert_eq!(format_score("no idea"), 0.0);
    }
}
