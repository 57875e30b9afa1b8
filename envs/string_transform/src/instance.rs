//! One episode's input, task and target, read from the dataset row.

use serde_json::Value;
use skyrl_sdk::{Error, Extras, Result};

use crate::{Config, Task};

/// The question of one episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The task posed.
    pub task: Task,
    /// The string to transform.
    pub input: String,
    /// The expected answer.
    pub target: String,
}

impl Instance {
    /// Reads the instance from `extras.extra_info` (`input`, or `seed` to
    /// generate one; `task`), with `config.task` taking precedence. Returns
    /// whether the prompt must be rewritten (config task or generated input).
    pub fn from_extras(config: &Config, extras: &Extras) -> Result<(Self, bool)> {
        let info = extras.extra_info().cloned().unwrap_or(Value::Null);
        let row_task = match info.get("task") {
            None => Task::default(),
            Some(Value::String(name)) => Task::parse(name).ok_or_else(|| {
                Error::config(format!(
                    "extra_info.task `{name}` is not copy, reverse or sort"
                ))
            })?,
            Some(other) => {
                return Err(Error::config(format!(
                    "extra_info.task must be a string, got {other}"
                )))
            }
        };
        let task = config.task.unwrap_or(row_task);
        let (input, generated) = match (info.get("input"), info.get("seed")) {
            (Some(Value::String(input)), _) if !input.is_empty() => (input.clone(), false),
            (Some(other), _) => {
                return Err(Error::config(format!(
                    "extra_info.input must be a non-empty string, got {other}"
                )))
            }
            (None, Some(seed)) => {
                let seed = seed.as_u64().ok_or_else(|| {
                    Error::config(format!(
                        "extra_info.seed must be an unsigned integer, got {seed}"
                    ))
                })?;
                (generate_input(config, seed)?, true)
            }
            (None, None) => {
                return Err(Error::config(
                    "extras.extra_info needs `input` (or `seed` to generate one)",
                ))
            }
        };
        let target = task.apply(&input);
        if !generated && task == row_task {
            if let Some(truth) = extras.ground_truth() {
                if truth.as_str() != Some(target.as_str()) {
                    return Err(Error::config(format!(
                        "reward_spec.ground_truth {truth} does not match {} of `{input}` (`{target}`)",
                        task.name()
                    )));
                }
            }
        }
        Ok((
            Self {
                task,
                input,
                target,
            },
            generated || task != row_task,
        ))
    }

    /// The user prompt for this instance, e.g. `copy: abca`.
    pub fn prompt_text(&self) -> String {
        format!("{}: {}", self.task.name(), self.input)
    }
}

/// A deterministic input for `seed`: length in `min_len..=max_len`, letters
/// of `alphabet` (splitmix64 stream).
pub fn generate_input(config: &Config, seed: u64) -> Result<String> {
    let alphabet: Vec<char> = config.alphabet.chars().collect();
    if alphabet.is_empty() {
        return Err(Error::config("alphabet must not be empty"));
    }
    if config.min_len == 0 || config.min_len > config.max_len {
        return Err(Error::config(format!(
            "need 1 <= min_len <= max_len, got min_len {} and max_len {}",
            config.min_len, config.max_len
        )));
    }
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let span = (config.max_len - config.min_len + 1) as u64;
    let len = config.min_len + (next() % span) as usize;
    Ok((0..len)
        .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
        .collect())
}
