//! The string tasks and the partial-credit reward.

use serde::{Deserialize, Serialize};

/// What to do with the input string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// Repeat the input.
    #[default]
    Copy,
    /// The input backwards.
    Reverse,
    /// The input's characters in ascending order.
    Sort,
}

impl Task {
    /// Parses `copy`, `reverse` or `sort`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "copy" => Some(Self::Copy),
            "reverse" => Some(Self::Reverse),
            "sort" => Some(Self::Sort),
            _ => None,
        }
    }

    /// The name used in prompts and data.
    pub fn name(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::Reverse => "reverse",
            Self::Sort => "sort",
        }
    }

    /// The expected answer for `input`.
    pub fn apply(self, input: &str) -> String {
        match self {
            Self::Copy => input.to_owned(),
            Self::Reverse => input.chars().rev().collect(),
            Self::Sort => {
                let mut chars: Vec<char> = input.chars().collect();
                chars.sort_unstable();
                chars.into_iter().collect()
            }
        }
    }
}

/// Characters of `response.trim()` equal to `target` at the same position,
/// divided by the longer of the two lengths (in characters). 1.0 only for an
/// exact answer (an empty response to an empty target counts as exact).
pub fn partial_credit(response: &str, target: &str) -> f64 {
    let response = response.trim();
    let longest = response.chars().count().max(target.chars().count());
    if longest == 0 {
        return 1.0;
    }
    let matching = response
        .chars()
        .zip(target.chars())
        .filter(|(a, b)| a == b)
        .count();
    matching as f64 / longest as f64
}
