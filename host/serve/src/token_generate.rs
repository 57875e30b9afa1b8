//! `POST /inference/v1/generate`: vLLM's token-in/token-out route, which
//! SkyRL's `RemoteInferenceClient` uses for rollouts (`_generate_single`) and
//! Tinker sampling. Request and answer follow vLLM 0.20's
//! `entrypoints/serve/disagg/{protocol,serving}.py`:
//!
//! - in: `{"token_ids", "sampling_params": {vLLM SamplingParams}, "model",
//!   "request_id"}`; every SamplingParams field this engine cannot honour is
//!   refused by name when set (unknown fields too), fields that only shape
//!   text (`detokenize`, `skip_special_tokens`, ...) are accepted, since this
//!   route returns no text;
//! - out: `{"request_id", "choices": [{"index", "token_ids", "finish_reason",
//!   "logprobs": {"content": [{"token": "token_id:N", "logprob",
//!   "top_logprobs"}]} | null}], "prompt_logprobs", "kv_transfer_params": null}`.
//!   As in vLLM, `logprobs: k` gives each token's entry `max(k, 1)`
//!   alternatives, the sampled token first, and log-probs are floored at -9999
//!   (as everywhere in this server);
//!   `prompt_logprobs` is `[null, {"id": {"logprob", "rank", "decoded_token"}},
//!   ...]`, one map per prompt position holding the prompt token and the top
//!   alternatives.

use axum::body::Bytes;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use skyrl_inference::openai::{SamplingFields, StopInput};
use skyrl_model::Completion;

use crate::generate::{check_model, request_id, Plan};
use crate::server::{bad, ApiError, AppState};
use crate::text::{finite, token_text};

/// vLLM's `GenerateRequest`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GenerateRequest {
    #[serde(default)]
    request_id: Option<String>,
    token_ids: Vec<i64>,
    #[serde(default)]
    sampling_params: Map<String, Value>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    features: Option<Value>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<Value>,
    #[serde(default)]
    cache_salt: Option<String>,
    #[serde(default)]
    priority: i64,
    #[serde(default)]
    kv_transfer_params: Option<Value>,
}

/// vLLM's `SamplingParams` as JSON; `None` is unset (or null).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct VllmSamplingParams {
    n: Option<usize>,
    presence_penalty: Option<f64>,
    frequency_penalty: Option<f64>,
    repetition_penalty: Option<f64>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<i64>,
    min_p: Option<f64>,
    seed: Option<u64>,
    stop: Option<StopInput>,
    stop_token_ids: Option<Vec<i64>>,
    ignore_eos: Option<bool>,
    max_tokens: Option<usize>,
    min_tokens: Option<usize>,
    logprobs: Option<i64>,
    prompt_logprobs: Option<i64>,
    skip_special_tokens: Option<bool>,
    include_stop_str_in_output: Option<bool>,
    // Refused when set.
    logprob_token_ids: Option<Value>,
    flat_logprobs: Option<bool>,
    structured_outputs: Option<Value>,
    logit_bias: Option<Map<String, Value>>,
    allowed_token_ids: Option<Value>,
    extra_args: Option<Map<String, Value>>,
    bad_words: Option<Value>,
    skip_reading_prefix_cache: Option<bool>,
    thinking_token_budget: Option<Value>,
    repetition_detection: Option<Value>,
}

impl VllmSamplingParams {
    /// The first field set that this engine cannot honour.
    fn refused(&self) -> Option<&'static str> {
        let set = [
            ("logprob_token_ids", self.logprob_token_ids.is_some()),
            ("flat_logprobs", self.flat_logprobs == Some(true)),
            ("structured_outputs", self.structured_outputs.is_some()),
            (
                "logit_bias",
                self.logit_bias.as_ref().is_some_and(|m| !m.is_empty()),
            ),
            ("allowed_token_ids", self.allowed_token_ids.is_some()),
            (
                "extra_args",
                self.extra_args.as_ref().is_some_and(|m| !m.is_empty()),
            ),
            ("bad_words", self.bad_words.is_some()),
            (
                "skip_reading_prefix_cache",
                self.skip_reading_prefix_cache == Some(true),
            ),
            (
                "thinking_token_budget",
                self.thinking_token_budget.is_some(),
            ),
            ("repetition_detection", self.repetition_detection.is_some()),
        ];
        set.into_iter().find(|(_, on)| *on).map(|(name, _)| name)
    }
}

/// SamplingParams fields that shape only the text (or the Python object), which
/// this route does not return: accepted, with no effect.
const TEXT_ONLY_FIELDS: [&str; 5] = [
    "detokenize",
    "spaces_between_special_tokens",
    "output_kind",
    "skip_clone",
    "output_text_buffer_length",
];

/// A log-prob count: unset, or `0..=20` (vLLM's `-1`, the whole vocabulary, is refused).
fn logprob_count(name: &str, v: Option<i64>) -> Result<Option<usize>, ApiError> {
    match v {
        None => Ok(None),
        Some(k) if k >= 0 => Ok(Some(k as usize)),
        Some(k) => Err(bad(format!(
            "sampling_params.{name} = {k}: at most 20 log-probs per token can be returned"
        ))),
    }
}

/// `POST /inference/v1/generate`.
pub(crate) async fn generate(
    State(s): State<AppState>,
    bytes: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: GenerateRequest = serde_json::from_slice(&bytes)
        .map_err(|e| bad(format!("/inference/v1/generate: bad request body: {e}")))?;
    check_model(&s, req.model.as_deref())?;
    let refuse = |what: &str| Err(bad(format!("/inference/v1/generate: {what}")));
    if req.features.is_some() {
        return refuse("multimodal `features` are not supported (text models only)");
    }
    if req.stream == Some(true) || req.stream_options.is_some() {
        return refuse("streaming is not supported here; /v1/completions streams");
    }
    if req.cache_salt.is_some() {
        return refuse("`cache_salt` is not supported (one prefix cache for all requests)");
    }
    if req.priority != 0 {
        return refuse("`priority` is not supported (first come, first served)");
    }
    if req.kv_transfer_params.is_some() {
        return refuse("`kv_transfer_params` is not supported (no disaggregated serving)");
    }
    if let Some(&t) = req.token_ids.iter().find(|&&t| t < 0) {
        return refuse(&format!("token_ids must not be negative, got {t}"));
    }
    let max_tokens_null = req
        .sampling_params
        .get("max_tokens")
        .is_some_and(Value::is_null);
    let mut sampling = req.sampling_params;
    for name in TEXT_ONLY_FIELDS {
        sampling.remove(name);
    }
    let p: VllmSamplingParams = serde_json::from_value(Value::Object(sampling))
        .map_err(|e| bad(format!("/inference/v1/generate: sampling_params: {e}")))?;
    if let Some(name) = p.refused() {
        return refuse(&format!("sampling_params.{name} is not supported"));
    }
    let logprobs = logprob_count("logprobs", p.logprobs)?;
    let prompt_logprobs = logprob_count("prompt_logprobs", p.prompt_logprobs)?;
    let fields = SamplingFields {
        max_tokens: p.max_tokens,
        min_tokens: p.min_tokens,
        temperature: p.temperature,
        top_p: p.top_p,
        top_k: p.top_k,
        min_p: p.min_p,
        presence_penalty: p.presence_penalty,
        frequency_penalty: p.frequency_penalty,
        repetition_penalty: p.repetition_penalty,
        stop: p.stop,
        stop_token_ids: p.stop_token_ids,
        include_stop_str_in_output: p.include_stop_str_in_output,
        skip_special_tokens: p.skip_special_tokens,
        ignore_eos: p.ignore_eos,
        seed: p.seed,
        n: p.n,
        ..SamplingFields::default()
    };
    // vLLM: max_tokens defaults to 16; null runs to the end of the context.
    let default_max = if max_tokens_null {
        s.worker
            .max_model_len()
            .saturating_sub(req.token_ids.len())
            .max(1)
    } else {
        16
    };
    let mut plan = Plan::new(&s, vec![req.token_ids], &fields, default_max)?;
    plan.params.top_logprobs = logprobs.map_or(0, |k| k.max(1));
    plan.params.prompt_logprobs = prompt_logprobs;
    plan.validate()?;
    let (outs, _version) = plan.run(&s).await?;
    let choices: Vec<Value> = outs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "index": i,
                "logprobs": logprobs.map(|k| token_logprobs(c, k)),
                "finish_reason": c.stop_reason.as_str(),
                "token_ids": c.token_ids,
            })
        })
        .collect();
    let prompt_logprobs = prompt_logprobs.map(|_| {
        outs.first().map_or(Value::Null, |c| {
            prompt_logprob_maps(&s, &plan.prompts[0], c)
        })
    });
    Ok(Json(json!({
        "request_id": req.request_id.unwrap_or_else(|| format!("gen-{}", request_id())),
        "choices": choices,
        "prompt_logprobs": prompt_logprobs,
        "kv_transfer_params": null,
    })))
}

/// vLLM's chat-style entries: `max(k, 1)` alternatives, the sampled token
/// first, then the most likely others.
fn token_logprobs(c: &Completion, k: usize) -> Value {
    let content: Vec<Value> = c
        .token_ids
        .iter()
        .zip(&c.logprobs)
        .enumerate()
        .map(|(j, (&id, &lp))| {
            let mut alternatives = vec![(id, lp)];
            if let Some(top) = c.top_logprobs.get(j) {
                alternatives.extend(top.iter().copied().filter(|&(t, _)| t != id));
            }
            alternatives.truncate(k.max(1));
            let top: Vec<Value> = alternatives
                .into_iter()
                .map(|(t, l)| json!({"token": format!("token_id:{t}"), "logprob": finite(l), "bytes": null}))
                .collect();
            json!({
                "token": format!("token_id:{id}"),
                "logprob": finite(lp),
                "bytes": null,
                "top_logprobs": top,
            })
        })
        .collect();
    json!({ "content": content })
}

/// `[null, {"id": {"logprob", "rank", "decoded_token"}}, ...]` over the prompt.
fn prompt_logprob_maps(s: &AppState, prompt: &[i64], c: &Completion) -> Value {
    let Some(entries) = &c.prompt_logprobs else {
        return Value::Null;
    };
    let mut out = Vec::with_capacity(prompt.len());
    out.push(Value::Null);
    for e in entries {
        let mut map = Map::new();
        map.insert(
            e.token.to_string(),
            json!({"logprob": finite(e.logprob), "rank": e.rank, "decoded_token": token_text(&s.tokenizer, e.token)}),
        );
        for (rank, &(t, l)) in e.top.iter().enumerate() {
            map.entry(t.to_string()).or_insert_with(|| {
                json!({"logprob": finite(l), "rank": rank + 1, "decoded_token": token_text(&s.tokenizer, t)})
            });
        }
        out.push(Value::Object(map));
    }
    Value::Array(out)
}
