//! Sampling for `asample`: the built-in engine on the base model or on
//! weights saved by `save_weights_for_sampler`, engines kept per checkpoint
//! (least recently used dropped beyond a few).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Deserialize;
use skyrl_model::{CausalLm, InferenceEngine, LoadOptions, SamplingParams, StopReason, Tokenizer};

use crate::proto::{self, SampleResponse, SampledSequence};

/// Engines kept loaded at once.
const CACHED_ENGINES: usize = 4;

/// `stop` as the client sends it: strings or token ids.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Strings(Vec<String>),
    Tokens(Vec<i64>),
}

/// Tinker's `SamplingParams`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TinkerSampling {
    pub max_tokens: Option<usize>,
    pub seed: Option<u64>,
    pub stop: Option<Stop>,
    #[serde(default = "one")]
    pub temperature: f64,
    #[serde(default = "minus_one")]
    pub top_k: i64,
    #[serde(default = "one")]
    pub top_p: f64,
}

fn one() -> f64 {
    1.0
}

fn minus_one() -> i64 {
    -1
}

impl TinkerSampling {
    /// The engine's settings; `max_tokens` is required (as skyrl's server
    /// requires it). A `stop` of `[]` disables EOS too, as Tinker documents.
    pub fn to_engine(&self) -> Result<SamplingParams, String> {
        let max_tokens = match self.max_tokens {
            Some(0) => return Err("sampling_params.max_tokens must be positive".into()),
            Some(n) => n,
            None => return Err("sampling_params.max_tokens is required".into()),
        };
        let mut p = SamplingParams {
            max_tokens,
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: self.seed,
            ..SamplingParams::default()
        };
        match &self.stop {
            None => {}
            Some(Stop::One(s)) => p.stop = vec![s.clone()],
            Some(Stop::Strings(s)) if s.is_empty() => p.ignore_eos = true,
            Some(Stop::Strings(s)) => p.stop = s.clone(),
            Some(Stop::Tokens(t)) => p.stop_token_ids = t.clone(),
        }
        p.validate().map_err(|e| format!("sampling_params: {e}"))?;
        Ok(p)
    }
}

/// Loaded engines, by the directory their weights came from.
pub struct Samplers {
    options: LoadOptions,
    engines: VecDeque<(PathBuf, InferenceEngine)>,
}

impl Samplers {
    /// No engine loaded yet; models load with `options`.
    pub fn new(options: LoadOptions) -> Self {
        Self {
            options,
            engines: VecDeque::new(),
        }
    }

    /// The engine of the model in `dir`, loading it if needed.
    fn engine(&mut self, dir: &Path) -> Result<&InferenceEngine> {
        if let Some(i) = self.engines.iter().position(|(d, _)| d == dir) {
            let hit = self.engines.remove(i).expect("index found");
            self.engines.push_front(hit);
        } else {
            let model = CausalLm::from_pretrained(dir, &self.options)
                .with_context(|| format!("cannot load sampler weights from {}", dir.display()))?;
            let tokenizer = Tokenizer::from_dir(dir).ok();
            self.engines
                .push_front((dir.to_path_buf(), InferenceEngine::new(model, tokenizer)));
            self.engines.truncate(CACHED_ENGINES);
        }
        Ok(&self.engines[0].1)
    }

    /// Forgets the engine of `dir` (its weights changed on disk).
    pub fn evict(&mut self, dir: &Path) {
        self.engines.retain(|(d, _)| d != dir);
    }

    /// `num_samples` completions of `prompt` from the model in `dir`, as the
    /// `SampleResponse` protobuf; with `prompt_logprobs`, the prompt's
    /// log-probs (NaN for the first token).
    pub fn sample(
        &mut self,
        dir: &Path,
        prompt: &[i64],
        num_samples: usize,
        params: &SamplingParams,
        prompt_logprobs: bool,
    ) -> Result<SampleResponse, SampleError> {
        let engine = self.engine(dir).map_err(SampleError::Server)?;
        let mut params = params.clone();
        if prompt_logprobs {
            params.prompt_logprobs = Some(0);
        }
        let prompts = vec![prompt.to_vec(); num_samples];
        // The engine checks the prompt (vocabulary, context) and the settings.
        let completions = engine
            .generate(&prompts, &params)
            .map_err(|e| SampleError::User(e.to_string()))?;
        let prompt_lp = prompt_logprobs.then(|| {
            let mut values = vec![f32::NAN; prompt.len()];
            if let Some(lps) = completions.first().and_then(|c| c.prompt_logprobs.as_ref()) {
                // One entry per prompt token after the first.
                let skip = prompt.len() - lps.len();
                for (i, lp) in lps.iter().enumerate() {
                    values[skip + i] = lp.logprob;
                }
            }
            proto::f32_bytes(&values)
        });
        Ok(SampleResponse {
            sequences: completions
                .iter()
                .map(|c| SampledSequence {
                    stop_reason: match c.stop_reason {
                        StopReason::Stop => proto::STOP_REASON_STOP,
                        StopReason::Length => proto::STOP_REASON_LENGTH,
                    },
                    tokens: proto::i32_bytes(&c.token_ids),
                    logprobs: Some(proto::f32_bytes(&c.logprobs)),
                })
                .collect(),
            prompt_logprobs: prompt_lp,
            prompt_cache_hit_tokens: 0,
        })
    }
}

/// Why a sample failed: the request (`user`) or the server.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("{0}")]
    User(String),
    #[error("{0:#}")]
    Server(anyhow::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tinker_sampling_params_map_to_the_engine() {
        let p: TinkerSampling =
            serde_json::from_str(r#"{"max_tokens": 5, "stop": [7, 9], "temperature": 0.5}"#)
                .unwrap();
        let e = p.to_engine().unwrap();
        assert_eq!(
            (e.max_tokens, e.stop_token_ids.clone(), e.temperature),
            (5, vec![7, 9], 0.5)
        );
        let p: TinkerSampling =
            serde_json::from_str(r#"{"max_tokens": 5, "stop": ["\n"]}"#).unwrap();
        assert_eq!(p.to_engine().unwrap().stop, vec!["\n".to_string()]);
        let p: TinkerSampling = serde_json::from_str(r#"{"max_tokens": 5, "stop": []}"#).unwrap();
        assert!(p.to_engine().unwrap().ignore_eos);
        let p: TinkerSampling = serde_json::from_str(r#"{"seed": 1}"#).unwrap();
        assert!(p.to_engine().unwrap_err().contains("max_tokens"));
        assert!(
            serde_json::from_str::<TinkerSampling>(r#"{"max_tokens": 1, "beams": 2}"#).is_err()
        );
    }
}
