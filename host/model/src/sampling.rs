//! Sampling parameters, completions, and the next-token sampler.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::error::ModelError;

/// Which log-prob [`Completion::logprobs`] reports for each sampled token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogprobMode {
    /// `log_softmax(raw logits)`: temperature 1, no top-k/top-p/min-p. This is what
    /// the trainer's `forward_logprobs` computes (vLLM's `raw_logprobs`), and what
    /// skyrl uses as rollout log-probs. Default.
    #[default]
    Raw,
    /// Log-prob under the distribution actually sampled from (temperature applied,
    /// filtered and renormalised). 0 for greedy decoding.
    Processed,
}

/// Most alternatives per token [`SamplingParams::top_logprobs`] may ask for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Sampling controls (vLLM names and defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    /// Softmax temperature; 0 means greedy (argmax).
    pub temperature: f64,
    /// Nucleus sampling mass in (0, 1]; 1 disables.
    pub top_p: f64,
    /// Keep the `k` most likely tokens; -1 (or 0) disables.
    pub top_k: i64,
    /// Drop tokens with probability below `min_p * max_prob`; 0 disables.
    pub min_p: f64,
    /// Most new tokens per sequence.
    pub max_tokens: usize,
    /// vLLM: fewest new tokens; until then stop tokens (EOS and
    /// `stop_token_ids`) cannot be sampled and stop strings do not end the
    /// sequence.
    pub min_tokens: usize,
    /// Stop when the decoded completion contains one of these (needs a tokenizer).
    pub stop: Vec<String>,
    /// Extra token ids that end a sequence (EOS ids are always included unless `ignore_eos`).
    pub stop_token_ids: Vec<i64>,
    /// Do not stop on the model's EOS ids.
    pub ignore_eos: bool,
    /// Seed for reproducible sampling; `None` draws from OS entropy.
    pub seed: Option<u64>,
    /// Which log-probs to report.
    pub logprob_mode: LogprobMode,
    /// OpenAI: subtract this once from the logit of every token already
    /// generated (0 disables; in [-2, 2]).
    pub presence_penalty: f64,
    /// OpenAI: subtract this times the count of each token already generated
    /// (0 disables; in [-2, 2]).
    pub frequency_penalty: f64,
    /// vLLM/HF: divide positive (multiply negative) logits of tokens in the
    /// prompt or the output by this (1 disables; > 0).
    pub repetition_penalty: f64,
    /// Also report this many most likely alternatives (raw log-probs) per
    /// generated token in [`Completion::top_logprobs`] (0 = none; at most 20).
    pub top_logprobs: usize,
    /// Report the log-prob of every prompt token after the first, with this many
    /// alternatives each, in [`Completion::prompt_logprobs`] (`echo` with
    /// `logprobs`). Such prompts are always prefilled in full (no prefix-cache hit).
    pub prompt_logprobs: Option<usize>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 1.0,
            top_p: 1.0,
            top_k: -1,
            min_p: 0.0,
            max_tokens: 1024,
            min_tokens: 0,
            stop: Vec::new(),
            stop_token_ids: Vec::new(),
            ignore_eos: false,
            seed: None,
            logprob_mode: LogprobMode::Raw,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repetition_penalty: 1.0,
            top_logprobs: 0,
            prompt_logprobs: None,
        }
    }
}

impl SamplingParams {
    /// Whether requests with these settings and `other`'s can share one decode
    /// batch: they may differ only in `seed` (per-prompt seeds live in the
    /// [`SampleStream`](crate::SampleStream)s).
    pub fn batches_with(&self, other: &SamplingParams) -> bool {
        let unseeded = |p: &SamplingParams| SamplingParams {
            seed: None,
            ..p.clone()
        };
        unseeded(self) == unseeded(other)
    }

    /// Greedy decoding of at most `max_tokens` tokens.
    pub fn greedy(max_tokens: usize) -> Self {
        SamplingParams {
            temperature: 0.0,
            max_tokens,
            ..Default::default()
        }
    }

    /// Rejects out-of-range values with a clear message.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |m: String| Err(ModelError::Input(m));
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad(format!(
                "temperature must be >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p must be in (0, 1], got {}", self.top_p));
        }
        if self.top_k < -1 {
            return bad(format!(
                "top_k must be -1, 0 or positive, got {}",
                self.top_k
            ));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad(format!("min_p must be in [0, 1], got {}", self.min_p));
        }
        if self.min_tokens > self.max_tokens {
            return bad(format!(
                "min_tokens ({}) must not exceed max_tokens ({})",
                self.min_tokens, self.max_tokens
            ));
        }
        if self.stop.iter().any(String::is_empty) {
            return bad("stop strings must not be empty".into());
        }
        for (name, v) in [
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ] {
            if !(-2.0..=2.0).contains(&v) {
                return bad(format!("{name} must be in [-2, 2], got {v}"));
            }
        }
        if !(self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite()) {
            return bad(format!(
                "repetition_penalty must be > 0, got {}",
                self.repetition_penalty
            ));
        }
        if self.top_logprobs > MAX_TOP_LOGPROBS
            || self.prompt_logprobs.is_some_and(|k| k > MAX_TOP_LOGPROBS)
        {
            return bad(format!(
                "at most {MAX_TOP_LOGPROBS} top log-probs per token can be returned"
            ));
        }
        Ok(())
    }

    /// True when any presence, frequency or repetition penalty is active.
    pub fn has_penalties(&self) -> bool {
        self.presence_penalty != 0.0
            || self.frequency_penalty != 0.0
            || self.repetition_penalty != 1.0
    }

    /// True when sampling reduces to argmax.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0 || self.top_k == 1
    }
}

/// Why a sequence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    /// A stop token or stop string was produced.
    Stop,
    /// `max_tokens` or the model's context length was reached.
    Length,
}

impl StopReason {
    /// `"stop"` or `"length"` (the skyrl / vLLM strings).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
        }
    }
}

/// What ended a sequence with [`StopReason::Stop`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopMatch {
    /// This token id (EOS or a `stop_token_ids` entry), included in `token_ids`.
    Token(i64),
    /// This stop string; `token_ids` end with the token that completed it.
    String(String),
}

/// One generated sequence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// New tokens (the prompt is not repeated); includes a final stop token.
    pub token_ids: Vec<i64>,
    /// One log-prob per token in `token_ids` (see [`LogprobMode`]).
    pub logprobs: Vec<f32>,
    /// `stop` or `length`.
    pub stop_reason: StopReason,
    /// The stop token or string, for `stop`.
    pub stop_match: Option<StopMatch>,
    /// Per generated token, the `params.top_logprobs` most likely `(token, raw
    /// log-prob)` pairs, most likely first (empty when not asked for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_logprobs: Vec<Vec<(i64, f32)>>,
    /// With `params.prompt_logprobs`: one entry per prompt token after the
    /// first: its raw log-prob given the tokens before it, and the top alternatives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<Vec<PromptTokenLogprob>>,
    /// Prompt tokens whose KV came from the prefix cache or a sibling sample
    /// instead of being computed for this sequence.
    #[serde(default)]
    pub cached_prompt_tokens: usize,
}

/// Log-prob of one prompt token (see [`Completion::prompt_logprobs`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptTokenLogprob {
    pub token: i64,
    pub logprob: f32,
    /// 1 + the number of tokens more likely than this one (vLLM's rank).
    pub rank: usize,
    /// The most likely `(token, log-prob)` pairs at this position.
    pub top: Vec<(i64, f32)>,
}

/// Samples one token per row of `logits [B, V]` (fp32) using one uniform number
/// per row from `uniforms`. Returns `(tokens [B] int64, logprobs [B] fp32)`.
pub fn sample_next(logits: &Tensor, params: &SamplingParams, uniforms: &[f64]) -> (Tensor, Tensor) {
    sample_next_with_raw(logits, logits, params, uniforms)
}

/// [`sample_next`] from `logits` after logit processors (penalties), with
/// [`LogprobMode::Raw`] log-probs taken from the unprocessed `raw_logits`.
pub fn sample_next_with_raw(
    logits: &Tensor,
    raw_logits: &Tensor,
    params: &SamplingParams,
    uniforms: &[f64],
) -> (Tensor, Tensor) {
    let logits = logits.to_kind(Kind::Float);
    let raw_logp = raw_logits.to_kind(Kind::Float).log_softmax(-1, Kind::Float);
    if params.is_greedy() {
        let tokens = logits.argmax(-1, false);
        let lp = match params.logprob_mode {
            LogprobMode::Raw => raw_logp
                .gather(-1, &tokens.unsqueeze(-1), false)
                .squeeze_dim(-1),
            LogprobMode::Processed => tokens.zeros_like().to_kind(Kind::Float),
        };
        return (tokens, lp);
    }
    let vocab = logits.size()[1];
    let probs = (&logits / params.temperature).softmax(-1, Kind::Float);
    let filtered =
        (params.top_k > 0 && params.top_k < vocab) || params.top_p < 1.0 || params.min_p > 0.0;
    // Without filters the CDF can be inverted in vocabulary order (no sort).
    let (mut sorted, order) = if filtered {
        probs.sort(-1, true)
    } else {
        let order = Tensor::arange(vocab, (Kind::Int64, logits.device()))
            .unsqueeze(0)
            .expand_as(&probs);
        (probs, order)
    };
    if params.top_k > 0 && params.top_k < vocab {
        let rank = Tensor::arange(vocab, (Kind::Int64, logits.device())).unsqueeze(0);
        sorted = sorted.masked_fill(&rank.ge(params.top_k), 0.0);
    }
    if params.top_p < 1.0 {
        // Drop a token when the mass strictly before it already reaches top_p.
        let before = sorted.cumsum(-1, Kind::Float) - &sorted;
        sorted = sorted.masked_fill(&before.ge(params.top_p), 0.0);
    }
    if params.min_p > 0.0 {
        let threshold = sorted.narrow(1, 0, 1) * params.min_p;
        sorted = sorted.masked_fill(&sorted.lt_tensor(&threshold), 0.0);
    }
    // Kept tokens form a prefix of the (sorted) order; invert the CDF.
    let cdf = sorted.cumsum(-1, Kind::Float);
    let total = cdf.narrow(1, vocab - 1, 1);
    let u = Tensor::from_slice(uniforms)
        .to_kind(Kind::Float)
        .to_device(logits.device())
        .unsqueeze(-1);
    let target = &u * &total;
    let choice = cdf
        .le_tensor(&target)
        .sum_dim_intlist([-1i64].as_slice(), true, Kind::Int64)
        .clamp_max(vocab - 1);
    // Never pick a zeroed tail entry (possible only through rounding).
    let kept = sorted
        .gt(0.0)
        .sum_dim_intlist([-1i64].as_slice(), true, Kind::Int64);
    let choice = choice.minimum(&(kept - 1).clamp_min(0));
    let tokens = order.gather(-1, &choice, false);
    let lp = match params.logprob_mode {
        LogprobMode::Raw => raw_logp.gather(-1, &tokens, false),
        LogprobMode::Processed => (sorted.gather(-1, &choice, false) / &total).log(),
    };
    (tokens.squeeze_dim(-1), lp.squeeze_dim(-1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logits of a fixed distribution over 5 tokens: p = [0.5, 0.25, 0.15, 0.07, 0.03].
    fn logits(rows: i64) -> Tensor {
        Tensor::from_slice(&[0.07f32, 0.5, 0.03, 0.25, 0.15])
            .log()
            .unsqueeze(0)
            .repeat([rows, 1])
    }

    fn draw(params: &SamplingParams) -> Vec<i64> {
        let n = 400;
        let u: Vec<f64> = (0..n).map(|i| (i as f64 + 0.5) / n as f64).collect();
        let (tokens, _) = sample_next(&logits(n as i64), params, &u);
        Vec::<i64>::try_from(tokens).unwrap()
    }

    fn support(tokens: &[i64]) -> Vec<i64> {
        let mut s: Vec<i64> = tokens.to_vec();
        s.sort();
        s.dedup();
        s
    }

    #[test]
    fn filters_restrict_the_support() {
        let base = SamplingParams::default();
        assert_eq!(support(&draw(&base)), vec![0, 1, 2, 3, 4]);
        let top_k = SamplingParams {
            top_k: 2,
            ..base.clone()
        };
        assert_eq!(support(&draw(&top_k)), vec![1, 3]);
        // Mass before token 3 is 0.5 < 0.7, before token 4 is 0.75 >= 0.7.
        let top_p = SamplingParams {
            top_p: 0.7,
            ..base.clone()
        };
        assert_eq!(support(&draw(&top_p)), vec![1, 3]);
        let top_p = SamplingParams {
            top_p: 0.8,
            ..base.clone()
        };
        assert_eq!(support(&draw(&top_p)), vec![1, 3, 4]);
        // 0.2 * 0.5 = 0.1: tokens with p < 0.1 dropped.
        let min_p = SamplingParams {
            min_p: 0.2,
            ..base.clone()
        };
        assert_eq!(support(&draw(&min_p)), vec![1, 3, 4]);
        assert_eq!(support(&draw(&SamplingParams::greedy(1))), vec![1]);
    }

    #[test]
    fn stratified_uniforms_reproduce_the_probabilities() {
        let tokens = draw(&SamplingParams::default());
        let count = |t| tokens.iter().filter(|&&x| x == t).count();
        assert_eq!(
            (count(1), count(3), count(4), count(0), count(2)),
            (200, 100, 60, 28, 12)
        );
    }

    #[test]
    fn logprob_modes() {
        let u = [0.1];
        let (tok, raw) = sample_next(&logits(1), &SamplingParams::default(), &u);
        assert_eq!(tok.int64_value(&[0]), 1);
        assert!((raw.double_value(&[0]) - 0.5f64.ln()).abs() < 1e-5);
        let p = SamplingParams {
            top_k: 2,
            logprob_mode: LogprobMode::Processed,
            ..Default::default()
        };
        let (_, lp) = sample_next(&logits(1), &p, &u);
        assert!((lp.double_value(&[0]) - (0.5f64 / 0.75).ln()).abs() < 1e-5);
    }

    #[test]
    fn validation_rejects_bad_values() {
        for bad in [
            SamplingParams {
                temperature: -1.0,
                ..Default::default()
            },
            SamplingParams {
                top_p: 1.5,
                ..Default::default()
            },
            SamplingParams {
                top_k: -2,
                ..Default::default()
            },
            SamplingParams {
                min_p: 2.0,
                ..Default::default()
            },
            SamplingParams {
                stop: vec![String::new()],
                ..Default::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
