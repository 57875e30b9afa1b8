//! Custom rollout generators: the [`Generator`] trait, the host's LLM
//! ([`llm`]) and environments ([`Env`]), and skyrl's trajectory layout.
//!
//! A generator receives a batch of prompts and returns one [`Trajectory`] per
//! prompt. It samples from the policy through [`llm::generate`] /
//! [`llm::generate_batch`] (token ids in, token ids and logprobs out) and
//! scores with environments the host has registered ([`Env::open`]).
//! Outside a wasm host these calls return an error, so generator logic that
//! does not touch them can be unit-tested natively.

use serde_json::Value;

use crate::bindings::exports::skyrl::plugin::generator as wit;
use crate::bindings::skyrl::plugin::types::PluginError;
use crate::{Error, Message, Result};

pub use crate::bindings::skyrl::plugin::llm::{Completion, SamplingParams};

/// One prompt of the batch.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub prompt: Vec<Message>,
    pub env_class: String,
    /// The dataset row's extras (`reward_spec`, `extra_info`, ...).
    pub extras: Value,
    pub trajectory_id: String,
}

/// Sampling settings from the trainer, plus the generator's own config.
#[derive(Debug, Clone)]
pub struct Sampling {
    pub params: SamplingParams,
    /// `generator.max_turns`.
    pub max_turns: u32,
    /// `generator.max_input_length`.
    pub max_input_length: u32,
    /// `generator.custom_generator.config`: free-form options of this generator.
    pub config: Value,
}

impl Sampling {
    /// Parses the host's sampling JSON.
    pub fn from_json(json: &str) -> Result<Self> {
        let v: Value = serde_json::from_str(json)
            .map_err(|e| Error::config(format!("sampling is not JSON: {e}")))?;
        let f = |k: &str, d: f64| v.get(k).and_then(Value::as_f64).unwrap_or(d);
        let params = SamplingParams {
            max_tokens: f("max_tokens", 64.0) as u32,
            temperature: f("temperature", 1.0) as f32,
            top_p: f("top_p", 1.0) as f32,
            top_k: f("top_k", -1.0) as i32,
            min_p: f("min_p", 0.0) as f32,
            stop: v
                .get("stop")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            seed: v.get("seed").and_then(Value::as_u64),
        };
        Ok(Self {
            params,
            max_turns: f("max_turns", 1.0) as u32,
            max_input_length: f("max_input_length", 512.0) as u32,
            config: v.get("config").cloned().unwrap_or(Value::Null),
        })
    }
}

/// One generated trajectory in skyrl's layout.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trajectory {
    pub prompt_token_ids: Vec<u32>,
    /// Generated tokens and (for multi-turn) observation tokens.
    pub response_ids: Vec<u32>,
    /// 1 for tokens the policy generated (trained on), 0 for observations.
    pub loss_mask: Vec<u8>,
    /// One reward per response token; a turn's reward sits on its last token.
    pub rewards: Vec<f32>,
    /// The sampling log-prob of every response token (0 for observations).
    pub rollout_logprobs: Vec<f32>,
    /// `stop`, `length` or anything the generator reports.
    pub stop_reason: String,
}

impl Trajectory {
    /// A trajectory that starts at `prompt_token_ids` with an empty response.
    pub fn new(prompt_token_ids: Vec<u32>) -> Self {
        Self {
            prompt_token_ids,
            stop_reason: "stop".into(),
            ..Self::default()
        }
    }

    /// Appends generated tokens (loss mask 1) with `reward` on the last one.
    pub fn push_generated(&mut self, completion: &Completion, reward: f32) {
        let n = completion.token_ids.len();
        self.response_ids.extend_from_slice(&completion.token_ids);
        self.loss_mask.extend(std::iter::repeat_n(1, n));
        self.rollout_logprobs
            .extend_from_slice(&completion.logprobs);
        self.rewards.extend(std::iter::repeat_n(0.0, n));
        if let Some(last) = self.rewards.last_mut() {
            *last += reward;
        }
        self.stop_reason = completion.stop_reason.clone();
    }

    /// Appends observation tokens (loss mask 0, logprob 0, reward 0).
    pub fn push_observation(&mut self, ids: &[u32]) {
        self.response_ids.extend_from_slice(ids);
        self.loss_mask.extend(std::iter::repeat_n(0, ids.len()));
        self.rollout_logprobs
            .extend(std::iter::repeat_n(0.0, ids.len()));
        self.rewards.extend(std::iter::repeat_n(0.0, ids.len()));
    }

    /// Sum of the per-token rewards.
    pub fn total_reward(&self) -> f32 {
        self.rewards.iter().sum()
    }
}

/// A rollout generator.
pub trait Generator: 'static {
    /// One trajectory per prompt, in order.
    fn generate(prompts: Vec<Prompt>, sampling: &Sampling) -> Result<Vec<Trajectory>>;
}

/// Glue for `generator.generate`, used by [`export_generator!`](crate::export_generator).
pub fn generate_with<G: Generator>(
    prompts: Vec<wit::GeneratorPrompt>,
    sampling_json: &str,
) -> Result<Vec<wit::Trajectory>, PluginError> {
    let sampling = Sampling::from_json(sampling_json)?;
    let prompts = prompts
        .into_iter()
        .map(|p| {
            Ok(Prompt {
                extras: serde_json::from_str(&p.extras_json)
                    .map_err(|e| Error::input(format!("extras are not JSON: {e}")))?,
                prompt: p.prompt,
                env_class: p.env_class,
                trajectory_id: p.trajectory_id,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let out = G::generate(prompts, &sampling)?;
    Ok(out
        .into_iter()
        .map(|t| wit::Trajectory {
            prompt_token_ids: t.prompt_token_ids,
            response_ids: t.response_ids,
            loss_mask: t.loss_mask,
            rewards: t.rewards,
            rollout_logprobs: t.rollout_logprobs,
            stop_reason: t.stop_reason,
        })
        .collect())
}

#[cfg(not(target_arch = "wasm32"))]
fn outside_host<T>() -> Result<T> {
    Err(Error::failed(
        "llm and envs are only available inside a skyrl host",
    ))
}

/// The policy LLM, served by the host.
pub mod llm {
    use super::{Completion, SamplingParams};
    use crate::{Error, Message, Result};

    /// One completion of `prompt_ids`.
    pub fn generate(prompt_ids: &[u32], params: &SamplingParams) -> Result<Completion> {
        #[cfg(target_arch = "wasm32")]
        {
            crate::bindings::skyrl::plugin::llm::generate(prompt_ids, params).map_err(Error::failed)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = (prompt_ids, params, Error::failed(""));
            super::outside_host()
        }
    }

    /// One completion per prompt, decoded together; prompt `i` uses seed `seed + i`.
    pub fn generate_batch(
        prompts: &[Vec<u32>],
        params: &SamplingParams,
    ) -> Result<Vec<Completion>> {
        #[cfg(target_arch = "wasm32")]
        {
            crate::bindings::skyrl::plugin::llm::generate_batch(prompts, params)
                .map_err(Error::failed)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = (prompts, params);
            super::outside_host()
        }
    }

    /// Token ids of `text` (no special tokens added).
    pub fn tokenize(text: &str) -> Vec<u32> {
        #[cfg(target_arch = "wasm32")]
        {
            crate::bindings::skyrl::plugin::llm::tokenize(text)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = text;
            Vec::new()
        }
    }

    /// Text of `ids` (special tokens skipped).
    pub fn detokenize(ids: &[u32]) -> String {
        #[cfg(target_arch = "wasm32")]
        {
            crate::bindings::skyrl::plugin::llm::detokenize(ids)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = ids;
            String::new()
        }
    }

    /// `messages` rendered with the policy's chat template.
    pub fn apply_chat_template(messages: &[Message], add_generation_prompt: bool) -> Vec<u32> {
        #[cfg(target_arch = "wasm32")]
        {
            crate::bindings::skyrl::plugin::llm::apply_chat_template(
                messages,
                add_generation_prompt,
            )
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = (messages, add_generation_prompt);
            Vec::new()
        }
    }
}

/// What an env step returned.
#[derive(Debug, Clone)]
pub struct EnvStep {
    pub observations: Vec<Message>,
    pub reward: f64,
    pub done: bool,
    pub metadata: Value,
}

/// An environment registered with the host (closed when dropped).
pub struct Env {
    #[cfg(target_arch = "wasm32")]
    handle: crate::bindings::skyrl::plugin::envs::EnvHandle,
}

impl Env {
    /// Opens a fresh `env_class` environment for a row with `extras`.
    pub fn open(env_class: &str, extras: &Value) -> Result<Self> {
        #[cfg(target_arch = "wasm32")]
        {
            crate::bindings::skyrl::plugin::envs::EnvHandle::open(env_class, &extras.to_string())
                .map(|handle| Env { handle })
                .map_err(Error::failed)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = (env_class, extras);
            outside_host()
        }
    }

    /// Starts the episode; returns the (possibly rewritten) prompt.
    pub fn init(&self, prompt: &[Message]) -> Result<Vec<Message>> {
        #[cfg(target_arch = "wasm32")]
        {
            self.handle
                .init(prompt)
                .map(|o| o.prompt)
                .map_err(Error::failed)
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = prompt;
            outside_host()
        }
    }

    /// Applies one action.
    pub fn step(&self, action: &str) -> Result<EnvStep> {
        #[cfg(target_arch = "wasm32")]
        {
            let o = self.handle.step(action).map_err(Error::failed)?;
            Ok(EnvStep {
                observations: o.observations,
                reward: o.reward,
                done: o.done,
                metadata: serde_json::from_str(&o.metadata_json).unwrap_or(Value::Null),
            })
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = action;
            outside_host()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_json_fills_defaults_and_keeps_config() {
        let s = Sampling::from_json(
            r#"{"max_tokens": 8, "temperature": 0.5, "seed": 3, "stop": ["x"], "config": {"n": 4}}"#,
        )
        .unwrap();
        assert_eq!(s.params.max_tokens, 8);
        assert_eq!(s.params.temperature, 0.5);
        assert_eq!(s.params.seed, Some(3));
        assert_eq!(s.params.stop, vec!["x".to_string()]);
        assert_eq!(s.params.top_k, -1);
        assert_eq!(s.config["n"], 4);
        assert!(Sampling::from_json("nope").is_err());
    }

    #[test]
    fn trajectories_keep_masks_rewards_and_logprobs_aligned() {
        let mut t = Trajectory::new(vec![1, 2]);
        let c = Completion {
            token_ids: vec![5, 6],
            logprobs: vec![-0.5, -0.25],
            text: "ab".into(),
            stop_reason: "stop".into(),
        };
        t.push_generated(&c, 0.5);
        t.push_observation(&[9]);
        t.push_generated(&c, 1.0);
        assert_eq!(t.loss_mask, vec![1, 1, 0, 1, 1]);
        assert_eq!(t.rewards, vec![0.0, 0.5, 0.0, 0.0, 1.0]);
        assert_eq!(t.rollout_logprobs, vec![-0.5, -0.25, 0.0, -0.5, -0.25]);
        assert_eq!(t.total_reward(), 1.5);
        assert!(llm::generate(&[1], &c_params()).is_err());
    }

    fn c_params() -> SamplingParams {
        Sampling::from_json("{}").unwrap().params
    }
}
