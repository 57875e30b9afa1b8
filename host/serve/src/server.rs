//! The HTTP routes: OpenAI-compatible generation plus weight control
//! (SGLang-style names: `/pause_generation`, `/continue_generation`,
//! `/update_weights_from_disk`, `/get_weight_version`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use skyrl_model::{ChatMessage, LogprobMode, SampleStream, SamplingParams, Tokenizer};
use tokio::sync::oneshot;

use crate::worker::{EngineCommand, EngineWorker};
use skyrl_inference::nccl::{self, InitGroupRequest, NcclGroup, UpdateWeightsRequest};
use skyrl_inference::openai::*;

/// Shared handler state.
#[derive(Clone)]
pub struct AppState {
    pub worker: EngineWorker,
    pub tokenizer: Arc<Tokenizer>,
    pub model_name: String,
    /// The NCCL weight-update group, once joined.
    pub nccl: Arc<Mutex<Option<NcclGroup>>>,
}

impl AppState {
    /// State for `worker` serving `model_name` (no NCCL group yet).
    pub fn new(worker: EngineWorker, tokenizer: Tokenizer, model_name: String) -> Self {
        Self {
            worker,
            tokenizer: Arc::new(tokenizer),
            model_name,
            nccl: Arc::new(Mutex::new(None)),
        }
    }
}

/// An HTTP error in OpenAI's shape.
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                message: self.1,
                kind: if self.0.is_client_error() {
                    "invalid_request_error"
                } else {
                    "server_error"
                }
                .into(),
                code: self.0.as_u16(),
            },
        };
        (self.0, Json(body)).into_response()
    }
}

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.into())
}

/// The router for `state`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .route("/pause_generation", post(pause))
        .route("/continue_generation", post(resume))
        .route("/update_weights_from_disk", post(update_from_disk))
        .route("/get_weight_version", get(weight_version))
        .route("/init_weights_update_group", post(init_group))
        .route(
            "/update_weights_from_distributed",
            post(update_from_distributed),
        )
        .with_state(state)
}

/// Serves on `listener` on its own multi-threaded runtime until the process
/// is stopped (blocks). Bind first (port 0 picks a free port) so the caller can
/// report the address.
pub fn serve_blocking(state: AppState, listener: std::net::TcpListener) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(serve(state, listener))
}

/// Serves on `listener` until the process is stopped.
pub async fn serve(state: AppState, listener: std::net::TcpListener) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    tracing::info!(addr = %listener.local_addr()?, "serving");
    axum::serve(listener, router(state)).await?;
    Ok(())
}

async fn health(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(
        json!({"status": "ok", "paused": s.worker.is_paused(), "weight_version": s.worker.weight_version()}),
    )
}

async fn models(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(
        json!({"object": "list", "data": [{"id": s.model_name, "object": "model", "owned_by": "skyrl"}]}),
    )
}

async fn weight_version(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"weight_version": s.worker.weight_version()}))
}

async fn ask<T>(
    s: &AppState,
    make: impl FnOnce(oneshot::Sender<T>) -> EngineCommand,
) -> Result<T, ApiError> {
    let (tx, rx) = oneshot::channel();
    if !s.worker.send(make(tx)) {
        return Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the engine thread has stopped".into(),
        ));
    }
    rx.await.map_err(|_| {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the engine thread has stopped".into(),
        )
    })
}

async fn pause(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    ask(&s, |reply| EngineCommand::Pause { reply }).await?;
    Ok(Json(json!({"paused": true})))
}

async fn resume(State(s): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    ask(&s, |reply| EngineCommand::Resume { reply }).await?;
    Ok(Json(json!({"paused": false})))
}

#[derive(Deserialize)]
struct DiskUpdate {
    model_path: PathBuf,
}

async fn update_from_disk(
    State(s): State<AppState>,
    Json(req): Json<DiskUpdate>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let version = ask(&s, |reply| EngineCommand::LoadWeights {
        path: req.model_path,
        reply,
    })
    .await?
    .map_err(bad)?;
    Ok(Json(json!({"success": true, "weight_version": version})))
}

async fn init_group(
    State(s): State<AppState>,
    Json(req): Json<InitGroupRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    nccl::check_available().map_err(|e| bad(e.to_string()))?;
    let id = nccl::decode_unique_id(&req.unique_id).map_err(|e| bad(e.to_string()))?;
    let slot = s.nccl.clone();
    // Joining blocks until every rank joins; run it where weights live.
    ask(&s, |reply| EngineCommand::WithEngine {
        job: Box::new(move |engine| {
            let device = nccl::cuda_index(engine.model().device(), "the engine", "")
                .map_err(|e| e.to_string())?;
            let group = NcclGroup::join(&id, req.rank, req.world_size, device)
                .map_err(|e| e.to_string())?;
            *slot.lock().expect("nccl lock") = Some(group);
            Ok(false)
        }),
        reply,
    })
    .await?
    .map_err(bad)?;
    Ok(Json(json!({"success": true})))
}

async fn update_from_distributed(
    State(s): State<AppState>,
    Json(req): Json<UpdateWeightsRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let n = req.names.len();
    if req.dtypes.len() != n || req.shapes.len() != n {
        return Err(bad(format!(
            "names, dtypes and shapes must have the same length ({n}, {}, {})",
            req.dtypes.len(),
            req.shapes.len()
        )));
    }
    let kinds = req
        .dtypes
        .iter()
        .map(|d| nccl::kind_of(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    let slot = s.nccl.clone();
    let version = ask(&s, |reply| EngineCommand::WithEngine {
        job: Box::new(move |engine| {
            let guard = slot.lock().expect("nccl lock");
            let group = guard.as_ref().ok_or(
                "no weight update group; call /init_weights_update_group first".to_string(),
            )?;
            receive_weights(engine, group, &req, &kinds)?;
            Ok(true)
        }),
        reply,
    })
    .await?
    .map_err(bad)?;
    Ok(Json(json!({"success": true, "weight_version": version})))
}

/// Receives every tensor of `req` by broadcast (all of them, even after a
/// mismatch, so the collective stays in step with rank 0) and copies them into
/// the engine's parameters.
fn receive_weights(
    engine: &mut skyrl_model::InferenceEngine,
    group: &NcclGroup,
    req: &UpdateWeightsRequest,
    kinds: &[tch::Kind],
) -> Result<(), String> {
    let device = tch::Device::Cuda(group.device);
    let vars = engine.model().var_store().variables();
    let _guard = tch::no_grad_guard();
    let mut problems = Vec::new();
    for ((name, shape), kind) in req.names.iter().zip(&req.shapes).zip(kinds) {
        let mut buf = tch::Tensor::empty(shape.as_slice(), (*kind, device));
        group.broadcast(&mut buf, 0).map_err(|e| e.to_string())?;
        match vars.get(name) {
            Some(var) if var.size() == *shape => {
                var.shallow_clone().copy_(&buf);
            }
            Some(var) => problems.push(format!(
                "`{name}` has shape {:?} here, {shape:?} sent",
                var.size()
            )),
            None => problems.push(format!("unknown parameter `{name}`")),
        }
    }
    if req.names.len() != vars.len() {
        problems.push(format!(
            "{} tensors sent, the model has {}",
            req.names.len(),
            vars.len()
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "weights not fully updated: {}",
            problems.join("; ")
        ))
    }
}

fn sampling(f: &SamplingFields, default_max: usize) -> Result<SamplingParams, ApiError> {
    if f.stream == Some(true) {
        return Err(bad("stream=true is not supported"));
    }
    if f.n.is_some_and(|n| n != 1) {
        return Err(bad("only n=1 is supported; send the prompt several times"));
    }
    let d = SamplingParams::default();
    let p = SamplingParams {
        temperature: f.temperature.unwrap_or(d.temperature),
        top_p: f.top_p.unwrap_or(d.top_p),
        top_k: f.top_k.unwrap_or(d.top_k),
        min_p: f.min_p.unwrap_or(d.min_p),
        max_tokens: f.max_tokens.unwrap_or(default_max),
        stop: match &f.stop {
            None => Vec::new(),
            Some(StopInput::One(s)) => vec![s.clone()],
            Some(StopInput::Many(v)) => v.clone(),
        },
        stop_token_ids: f.stop_token_ids.clone().unwrap_or_default(),
        ignore_eos: f.ignore_eos.unwrap_or(false),
        seed: f.seed,
        logprob_mode: LogprobMode::Raw,
    };
    p.validate().map_err(|e| bad(e.to_string()))?;
    Ok(p)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

async fn completions(
    State(s): State<AppState>,
    Json(req): Json<CompletionRequest>,
) -> Result<Json<CompletionResponse>, ApiError> {
    let params = sampling(&req.sampling, 16)?;
    let encode = |t: &str| s.tokenizer.encode(t, true).map_err(|e| bad(e.to_string()));
    let prompts: Vec<Vec<i64>> = match &req.prompt {
        PromptInput::Text(t) => vec![encode(t)?],
        PromptInput::Texts(ts) => ts.iter().map(|t| encode(t)).collect::<Result<_, _>>()?,
        PromptInput::Ids(ids) => vec![ids.clone()],
        PromptInput::IdsBatch(b) => b.clone(),
    };
    let prompt_tokens = prompts.iter().map(Vec::len).sum();
    let streams = SampleStream::sequence(params.seed, prompts.len());
    let (outs, version) = ask(&s, |reply| EngineCommand::Generate {
        prompts: prompts.clone(),
        streams,
        params,
        reply,
    })
    .await?
    .map_err(bad)?;
    let mut choices = Vec::with_capacity(outs.len());
    let mut completion_tokens = 0;
    for (i, (c, prompt)) in outs.into_iter().zip(prompts).enumerate() {
        completion_tokens += c.token_ids.len();
        let text = s
            .tokenizer
            .decode(&c.token_ids, true)
            .map_err(|e| bad(e.to_string()))?;
        let logprobs = match req.logprobs {
            Some(_) => Some(CompletionLogprobs {
                tokens: c
                    .token_ids
                    .iter()
                    .map(|t| s.tokenizer.decode(&[*t], false).unwrap_or_default())
                    .collect(),
                token_logprobs: c.logprobs.clone(),
            }),
            None => None,
        };
        choices.push(CompletionChoice {
            index: i,
            text,
            finish_reason: c.stop_reason.as_str().into(),
            logprobs,
            token_ids: req.return_token_ids.then(|| c.token_ids.clone()),
            prompt_token_ids: req.return_token_ids.then_some(prompt),
        });
    }
    Ok(Json(CompletionResponse {
        id: format!("cmpl-{}", now()),
        object: "text_completion".into(),
        created: now(),
        model: s.model_name.clone(),
        choices,
        usage: Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
        },
        weight_version: Some(version),
    }))
}

async fn chat(
    State(s): State<AppState>,
    Json(req): Json<ChatRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let params = sampling(&req.sampling, 1024)?;
    let messages: Vec<ChatMessage> = req
        .messages
        .iter()
        .map(|m| ChatMessage::new(&m.role, &m.content))
        .collect();
    let prompt = s
        .tokenizer
        .encode_chat(&messages, true)
        .map_err(|e| bad(e.to_string()))?;
    let prompt_tokens = prompt.len();
    let streams = SampleStream::sequence(params.seed, 1);
    let (mut outs, version) = ask(&s, |reply| EngineCommand::Generate {
        prompts: vec![prompt],
        streams,
        params,
        reply,
    })
    .await?
    .map_err(bad)?;
    let c = outs.remove(0);
    let text = s
        .tokenizer
        .decode(&c.token_ids, true)
        .map_err(|e| bad(e.to_string()))?;
    let logprobs = req.logprobs.then(|| {
        json!({"content": c.token_ids.iter().zip(&c.logprobs).map(|(t, lp)| json!({
            "token": s.tokenizer.decode(&[*t], false).unwrap_or_default(),
            "logprob": lp,
            "top_logprobs": [],
        })).collect::<Vec<_>>()})
    });
    Ok(Json(json!({
        "id": format!("chatcmpl-{}", now()),
        "object": "chat.completion",
        "created": now(),
        "model": s.model_name,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": c.stop_reason.as_str(),
            "logprobs": logprobs,
        }],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": c.token_ids.len(), "total_tokens": prompt_tokens + c.token_ids.len()},
        "weight_version": version,
    })))
}
