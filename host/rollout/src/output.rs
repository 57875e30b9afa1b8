//! What the generator takes and returns: trajectory requests, skyrl's
//! `GeneratorOutput` (in input order), and the limits of one call.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use skyrl_model::SamplingParams;
use skyrl_runtime::Message;

use crate::config::GeneratorConfig;

/// Stop reason of a trajectory whose environment failed (trap, bad output, ...).
pub const ENV_ERROR: &str = "env_error";
/// One trajectory request.
#[derive(Debug, Clone)]
pub struct GeneratorRequest {
    pub prompt: Vec<Message>,
    pub env_class: String,
    pub extras: Map<String, Value>,
    /// The sample stream this trajectory draws from (its position in the
    /// whole batch when a rank generates only its share); `None`: its
    /// position in this call.
    pub stream: Option<u64>,
}

impl GeneratorRequest {
    /// A request for one trajectory of `env_class` starting from `prompt`;
    /// `extras` are the dataset row's other columns, handed to the env.
    pub fn new(
        prompt: Vec<Message>,
        env_class: impl Into<String>,
        extras: Map<String, Value>,
    ) -> Self {
        Self {
            prompt,
            env_class: env_class.into(),
            extras,
            stream: None,
        }
    }
}

/// skyrl's `GeneratorOutput`, in input order (serialisable, for the ranks
/// to exchange their rollouts).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct GeneratorOutput {
    pub prompt_token_ids: Vec<Vec<i64>>,
    pub response_ids: Vec<Vec<i64>>,
    /// Per-token rewards (reward of each turn at its last generated token).
    pub rewards: Vec<Vec<f32>>,
    pub loss_masks: Vec<Vec<f32>>,
    pub stop_reasons: Vec<String>,
    pub rollout_logprobs: Vec<Vec<f32>>,
    /// Means over trajectories of numeric/bool env metrics, keyed `<env_class>/<name>`.
    pub env_metrics: BTreeMap<String, f64>,
    /// Number of turns per trajectory.
    pub num_turns: Vec<usize>,
    /// Oldest policy version that generated a token of each trajectory.
    pub policy_versions: Vec<u64>,
    /// `[start, end)` of every generated turn in each trajectory's `response_ids`.
    pub turn_spans: Vec<Vec<(usize, usize)>>,
    /// Means over trajectories of the reward rubric's parts (`env`, each component).
    pub reward_metrics: BTreeMap<String, f64>,
}

/// Trajectory-weighted mean of two sets of means over `n` and `m` trajectories.
fn merge_means(
    a: &BTreeMap<String, f64>,
    n: f64,
    b: &BTreeMap<String, f64>,
    m: f64,
) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (map, w) in [(a, n), (b, m)] {
        for (k, v) in map {
            let e = sums.entry(k.clone()).or_default();
            e.0 += v * w;
            e.1 += w;
        }
    }
    sums.into_iter()
        .map(|(k, (s, w))| (k, s / w.max(1.0)))
        .collect()
}

impl GeneratorOutput {
    /// Number of trajectories.
    pub fn len(&self) -> usize {
        self.response_ids.len()
    }

    /// True when there are no trajectories.
    pub fn is_empty(&self) -> bool {
        self.response_ids.is_empty()
    }

    /// Appends `other`'s trajectories; env metrics become the
    /// trajectory-weighted means of both.
    pub fn append(&mut self, other: GeneratorOutput) {
        let (n, m) = (self.len() as f64, other.len() as f64);
        self.env_metrics = merge_means(&self.env_metrics, n, &other.env_metrics, m);
        self.reward_metrics = merge_means(&self.reward_metrics, n, &other.reward_metrics, m);
        self.prompt_token_ids.extend(other.prompt_token_ids);
        self.response_ids.extend(other.response_ids);
        self.rewards.extend(other.rewards);
        self.loss_masks.extend(other.loss_masks);
        self.stop_reasons.extend(other.stop_reasons);
        self.rollout_logprobs.extend(other.rollout_logprobs);
        self.num_turns.extend(other.num_turns);
        self.policy_versions.extend(other.policy_versions);
        self.turn_spans.extend(other.turn_spans);
    }

    /// Sum of the per-token rewards of each trajectory.
    pub fn sequence_rewards(&self) -> Vec<f64> {
        self.rewards
            .iter()
            .map(|r| r.iter().map(|&x| x as f64).sum())
            .collect()
    }
}

/// One unit of rollout work for [`Generator::run_jobs`].
pub struct RolloutJob<T> {
    pub tag: T,
    pub requests: Vec<GeneratorRequest>,
    pub params: RolloutParams,
}

/// Generation limits of one call.
#[derive(Debug, Clone)]
pub struct RolloutParams {
    pub sampling: SamplingParams,
    pub max_turns: usize,
    pub max_input_length: usize,
    /// `generator.chat_template_kwargs`: extra variables of every chat
    /// template rendering (e.g. `enable_thinking: false` for Qwen3).
    pub chat_template_kwargs: Map<String, Value>,
    /// `generator.append_eos_token_after_stop_str_in_multi_turn`: a turn that
    /// ended on a stop string gets the EOS token appended (loss mask 0), so
    /// the conversation reads as the chat template writes it.
    pub append_eos_after_stop_str: bool,
    /// `generator.use_conversation_multi_turn`: observations as user turns of
    /// the chat (true), or appended raw to one assistant message (false).
    pub conversation_multi_turn: bool,
}

impl RolloutParams {
    /// Sampling params for the model engine from a `generator.*sampling_params` section.
    pub fn from_config(
        g: &GeneratorConfig,
        sp: &crate::config::SamplingParams,
        seed: Option<u64>,
    ) -> Self {
        let sampling = SamplingParams {
            temperature: sp.temperature,
            top_p: sp.top_p,
            top_k: sp.top_k,
            min_p: sp.min_p,
            max_tokens: sp.max_generate_length,
            repetition_penalty: sp.repetition_penalty,
            stop: sp.stop.clone().unwrap_or_default(),
            seed,
            ..SamplingParams::default()
        };
        Self {
            sampling,
            max_turns: g.max_turns.max(1),
            max_input_length: g.max_input_length.unwrap_or(512),
            chat_template_kwargs: g.chat_template_kwargs.clone().into_iter().collect(),
            append_eos_after_stop_str: g.append_eos_token_after_stop_str_in_multi_turn
                && g.use_conversation_multi_turn,
            conversation_multi_turn: g.use_conversation_multi_turn,
        }
    }
}
