//! `/v1/completions` and `/v1/chat/completions`: a request becomes sampling
//! settings and engine sequences (`n` samples per prompt, sharing the
//! prompt's KV), and its answer is built whole or streamed ([`crate::sse`]).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use skyrl_inference::openai::*;
use skyrl_model::{ChatMessage, Completion, LogprobMode, SampleStream, SamplingParams, StopMatch};
use tokio::sync::{mpsc, oneshot};

use crate::server::{bad, now, ApiError, ApiJson, AppState};
use crate::sse::{self, Flavor};
use crate::text::{chat_logprobs, completion_text, CompletionLogprobsBuilder};
use crate::worker::{EngineCommand, EventSender, GenerateError, SeqEvent};

/// Completion tokens when a `/v1/completions` request names none (OpenAI's default).
const DEFAULT_COMPLETION_TOKENS: usize = 16;

/// A parsed generation request.
pub(crate) struct Plan {
    /// The distinct prompts.
    pub prompts: Vec<Vec<i64>>,
    /// Choices per prompt: choice `p * n + j` is sample `j` of prompt `p`.
    pub n: usize,
    pub params: SamplingParams,
    /// vLLM's `include_stop_str_in_output`.
    pub include_stop: bool,
    /// vLLM's `skip_special_tokens`.
    pub skip_special: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
}

/// What a finished request returns: completions in choice order and the
/// weight version when it started.
pub(crate) type Outcome = (Vec<Completion>, u64);

impl Plan {
    /// Reads the sampling fields; `max_tokens` applies when the request names none.
    pub(crate) fn new(
        s: &AppState,
        prompts: Vec<Vec<i64>>,
        f: &SamplingFields,
        max_tokens: usize,
    ) -> Result<Self, ApiError> {
        let n = f.n.unwrap_or(1);
        if n == 0 {
            return Err(bad("n must be at least 1"));
        }
        let max_n = s.worker.max_num_seqs();
        if n > max_n {
            return Err(bad(format!(
                "n = {n} is larger than the engine runs together (max_num_seqs = {max_n})"
            )));
        }
        if f.logit_bias.as_ref().is_some_and(|b| !b.is_empty()) {
            return Err(bad("logit_bias is not supported"));
        }
        if prompts.is_empty() || prompts.iter().any(Vec::is_empty) {
            return Err(bad("the prompt must not be empty"));
        }
        let d = SamplingParams::default();
        let params = SamplingParams {
            temperature: f.temperature.unwrap_or(d.temperature),
            top_p: f.top_p.unwrap_or(d.top_p),
            top_k: f.top_k.unwrap_or(d.top_k),
            min_p: f.min_p.unwrap_or(d.min_p),
            max_tokens: f.max_tokens.unwrap_or(max_tokens),
            min_tokens: f.min_tokens.unwrap_or(0),
            stop: match &f.stop {
                None => Vec::new(),
                Some(StopInput::One(s)) => vec![s.clone()],
                Some(StopInput::Many(v)) => v.clone(),
            },
            stop_token_ids: f.stop_token_ids.clone().unwrap_or_default(),
            ignore_eos: f.ignore_eos.unwrap_or(false),
            seed: f.seed,
            logprob_mode: LogprobMode::Raw,
            presence_penalty: f.presence_penalty.unwrap_or(d.presence_penalty),
            frequency_penalty: f.frequency_penalty.unwrap_or(d.frequency_penalty),
            repetition_penalty: f.repetition_penalty.unwrap_or(d.repetition_penalty),
            top_logprobs: 0,
            prompt_logprobs: None,
        };
        Ok(Plan {
            prompts,
            n,
            params,
            include_stop: f.include_stop_str_in_output.unwrap_or(false),
            skip_special: f.skip_special_tokens.unwrap_or(true),
            include_usage: f.stream_options.as_ref().is_some_and(|o| o.include_usage),
        })
    }

    pub(crate) fn validate(&self) -> Result<(), ApiError> {
        self.params.validate().map_err(|e| bad(e.to_string()))
    }

    /// Prompt tokens counted once per prompt (not per sample).
    pub(crate) fn prompt_tokens(&self) -> usize {
        self.prompts.iter().map(Vec::len).sum()
    }

    /// Every choice's text.
    pub(crate) fn text(&self, s: &AppState, c: &Completion) -> Result<String, ApiError> {
        completion_text(&s.tokenizer, c, self.skip_special, self.include_stop)
            .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e))
    }

    /// vLLM's `stop_reason`: the stop string, or a stop token that is not EOS.
    pub(crate) fn stop_reason(&self, c: &Completion) -> Option<Value> {
        match &c.stop_match {
            Some(StopMatch::String(s)) => Some(json!(s)),
            Some(StopMatch::Token(t)) if self.params.stop_token_ids.contains(t) => Some(json!(t)),
            _ => None,
        }
    }

    /// Usage of `outs` (cached prompt tokens: those of each prompt's first sample).
    pub(crate) fn usage(&self, outs: &[Completion]) -> Usage {
        let prompt_tokens = self.prompt_tokens();
        let completion_tokens = outs.iter().map(|c| c.token_ids.len()).sum();
        let cached_tokens = outs
            .iter()
            .step_by(self.n)
            .map(|c| c.cached_prompt_tokens)
            .sum();
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: Some(PromptTokensDetails { cached_tokens }),
        }
    }

    /// Hands the request's sequences to the engine thread.
    fn send(
        &self,
        s: &AppState,
        events: Option<EventSender>,
    ) -> Result<oneshot::Receiver<Result<Outcome, GenerateError>>, ApiError> {
        let prompts: Vec<Vec<i64>> = self
            .prompts
            .iter()
            .flat_map(|p| std::iter::repeat_n(p.clone(), self.n))
            .collect();
        let streams = SampleStream::sequence(self.params.seed, prompts.len());
        let (reply, rx) = oneshot::channel();
        let sent = s.worker.send(EngineCommand::Generate {
            prompts,
            streams,
            params: self.params.clone(),
            events,
            reply,
        });
        if sent {
            Ok(rx)
        } else {
            Err(engine_gone())
        }
    }

    /// Runs the request to the end.
    pub(crate) async fn run(&self, s: &AppState) -> Result<Outcome, ApiError> {
        let rx = self.send(s, None)?;
        rx.await.map_err(|_| engine_gone())?.map_err(generate_error)
    }

    /// Runs the request as a server-sent event stream. Bad input is still
    /// answered with a plain error: the stream starts with the first output.
    async fn stream(self, s: AppState, flavor: Flavor) -> Result<Response, ApiError> {
        let (tx, mut events) = mpsc::unbounded_channel::<SeqEvent>();
        let mut reply = self.send(&s, Some(tx))?;
        // The event channel closes without output only when the request was
        // refused (or failed at once): then answer with the error.
        let first = events.recv().await;
        let mut outcome = None;
        if first.is_none() {
            let out = (&mut reply).await.map_err(|_| engine_gone())?;
            outcome = Some(out.map_err(generate_error)?);
        }
        let source = sse::Source {
            first,
            events,
            reply: if outcome.is_some() { None } else { Some(reply) },
            outcome,
        };
        Ok(sse::respond(s, self, flavor, source))
    }
}

fn engine_gone() -> ApiError {
    ApiError(
        StatusCode::SERVICE_UNAVAILABLE,
        "the engine thread has stopped".into(),
    )
}

/// Bad input is the client's error (400); a failed engine step the server's (500).
pub(crate) fn generate_error(e: GenerateError) -> ApiError {
    match e {
        GenerateError::Rejected(m) => bad(m),
        GenerateError::Failed(m) => ApiError(StatusCode::INTERNAL_SERVER_ERROR, m),
    }
}

/// Refuses a `model` other than the served one, as OpenAI does (404).
pub(crate) fn check_model(s: &AppState, model: Option<&str>) -> Result<(), ApiError> {
    match model {
        Some(m) if m != s.model_name => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("The model `{m}` does not exist."),
        )),
        _ => Ok(()),
    }
}

/// `POST /v1/completions`.
pub(crate) async fn completions(
    State(s): State<AppState>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    check_model(&s, req.model.as_deref())?;
    let encode = |t: &str| s.tokenizer.encode(t, true).map_err(|e| bad(e.to_string()));
    let (prompts, texts): (Vec<Vec<i64>>, Vec<Option<String>>) = match &req.prompt {
        PromptInput::Text(t) => (vec![encode(t)?], vec![Some(t.clone())]),
        PromptInput::Texts(ts) => (
            ts.iter().map(|t| encode(t)).collect::<Result<_, _>>()?,
            ts.iter().cloned().map(Some).collect(),
        ),
        PromptInput::Ids(ids) => (vec![ids.clone()], vec![None]),
        PromptInput::IdsBatch(b) => (b.clone(), vec![None; b.len()]),
    };
    if req.suffix.is_some() {
        return Err(bad("suffix is not supported"));
    }
    if req.best_of.is_some_and(|b| b > req.sampling.n.unwrap_or(1)) {
        return Err(bad("best_of above n is not supported"));
    }
    let mut plan = Plan::new(&s, prompts, &req.sampling, DEFAULT_COMPLETION_TOKENS)?;
    let logprobs = req.logprobs.map(|k| k as usize);
    plan.params.top_logprobs = logprobs.unwrap_or(0);
    if req.echo {
        plan.params.prompt_logprobs = logprobs;
    }
    plan.validate()?;
    let echo = if req.echo {
        let decoded = plan
            .prompts
            .iter()
            .zip(texts)
            .map(|(ids, text)| match text {
                Some(t) => Ok(t),
                None => s
                    .tokenizer
                    .decode(ids, false)
                    .map_err(|e| bad(e.to_string())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Some(decoded)
    } else {
        None
    };
    if req.sampling.stream == Some(true) {
        if req.echo && logprobs.is_some() {
            return Err(bad("echo with logprobs is not supported when streaming"));
        }
        let flavor = Flavor::Completion {
            logprobs,
            echo,
            return_token_ids: req.return_token_ids,
        };
        return plan.stream(s, flavor).await;
    }
    let (outs, version) = plan.run(&s).await?;
    let mut choices = Vec::with_capacity(outs.len());
    for (i, c) in outs.iter().enumerate() {
        let p = i / plan.n;
        let prompt = &plan.prompts[p];
        let mut text = echo.as_ref().map(|e| e[p].clone()).unwrap_or_default();
        text.push_str(&plan.text(&s, c)?);
        let logprobs = logprobs.map(|k| {
            let mut b = CompletionLogprobsBuilder::new(&s.tokenizer, k, 0);
            if req.echo {
                push_prompt_logprobs(&mut b, prompt, c);
            }
            for (j, (&id, &lp)) in c.token_ids.iter().zip(&c.logprobs).enumerate() {
                let top = c.top_logprobs.get(j).map_or(&[][..], Vec::as_slice);
                b.push(id, Some((lp, top)));
            }
            b.finish()
        });
        choices.push(CompletionChoice {
            index: i,
            text,
            finish_reason: c.stop_reason.as_str().into(),
            logprobs,
            stop_reason: plan.stop_reason(c),
            token_ids: req.return_token_ids.then(|| c.token_ids.clone()),
            prompt_token_ids: req.return_token_ids.then(|| prompt.clone()),
        });
    }
    Ok(Json(CompletionResponse {
        id: format!("cmpl-{}", request_id()),
        object: "text_completion".into(),
        created: now(),
        model: s.model_name.clone(),
        choices,
        usage: plan.usage(&outs),
        weight_version: Some(version),
    })
    .into_response())
}

/// The prompt's tokens for `echo`: the first without a log-prob, the others
/// with those the engine computed.
fn push_prompt_logprobs(b: &mut CompletionLogprobsBuilder<'_>, prompt: &[i64], c: &Completion) {
    b.push(prompt[0], None);
    match &c.prompt_logprobs {
        Some(entries) => {
            for e in entries {
                b.push(e.token, Some((e.logprob, &e.top)));
            }
        }
        None => {
            for &id in &prompt[1..] {
                b.push(id, None);
            }
        }
    }
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat(
    State(s): State<AppState>,
    ApiJson(req): ApiJson<ChatRequest>,
) -> Result<Response, ApiError> {
    check_model(&s, req.model.as_deref())?;
    if req.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        return Err(bad(
            "tools are not supported (no tool-call parsing); describe them in the messages",
        ));
    }
    let messages = req
        .messages
        .iter()
        .map(|m| {
            let content = match &m.content {
                Some(c) => c.text().map_err(bad)?,
                None => String::new(),
            };
            Ok(ChatMessage::new(&m.role, content))
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let prompt = s
        .tokenizer
        .encode_chat(&messages, true)
        .map_err(|e| bad(e.to_string()))?;
    // Without a limit the answer may run to the end of the context.
    let room = s.worker.max_model_len().saturating_sub(prompt.len()).max(1);
    let mut fields = req.sampling.clone();
    if req.max_completion_tokens.is_some() {
        fields.max_tokens = req.max_completion_tokens;
    }
    if req.top_logprobs.is_some_and(|k| k > 0) && !req.logprobs {
        return Err(bad("top_logprobs needs logprobs=true"));
    }
    let mut plan = Plan::new(&s, vec![prompt], &fields, room)?;
    let logprobs = req.logprobs.then(|| req.top_logprobs.unwrap_or(0));
    plan.params.top_logprobs = logprobs.unwrap_or(0);
    plan.validate()?;
    if fields.stream == Some(true) {
        let flavor = Flavor::Chat {
            logprobs,
            return_token_ids: req.return_token_ids,
        };
        return plan.stream(s, flavor).await;
    }
    let (outs, version) = plan.run(&s).await?;
    let mut choices = Vec::with_capacity(outs.len());
    for (i, c) in outs.iter().enumerate() {
        choices.push(ChatChoice {
            index: i,
            message: ChatMessageOut {
                role: "assistant".into(),
                content: plan.text(&s, c)?,
            },
            logprobs: logprobs.map(|k| {
                chat_logprobs(&s.tokenizer, &c.token_ids, &c.logprobs, &c.top_logprobs, k)
            }),
            finish_reason: c.stop_reason.as_str().into(),
            stop_reason: plan.stop_reason(c),
            token_ids: req.return_token_ids.then(|| c.token_ids.clone()),
        });
    }
    Ok(Json(ChatCompletionResponse {
        id: format!("chatcmpl-{}", request_id()),
        object: "chat.completion".into(),
        created: now(),
        model: s.model_name.clone(),
        choices,
        usage: plan.usage(&outs),
        prompt_token_ids: req.return_token_ids.then(|| plan.prompts[0].clone()),
        weight_version: Some(version),
    })
    .into_response())
}

/// A request id unique within this process.
pub(crate) fn request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{:x}{:04x}", now(), NEXT.fetch_add(1, Ordering::Relaxed))
}
