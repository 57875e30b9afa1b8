//! The HTTP routes of Tinker's API (`/api/v1/...`), as the official `tinker`
//! 0.38 client calls them: JSON bodies except `forward_backward`, which is
//! protobuf; futures answered by `retrieve_future` (JSON, or protobuf for
//! forward-backward and sample results).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use prost::Message;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::checkpoints;
use crate::error::ApiError;
use crate::loss::LossFn;
use crate::proto::{self, chunk, loss_config_value, ForwardBackwardRequest};
use crate::replicas::Replicated;
use crate::sampler::TinkerSampling;
use crate::store::{FutureState, ModelRow, Store};
use crate::training::{AdamStep, DatumInput};
use crate::worker::{
    path_segment, tinker_path, Job, Op, WorkerConfig, WorkerHandle, SAMPLER, TRAINING,
};

/// How long `retrieve_future` waits for a result before answering `try_again`.
const LONG_POLL: Duration = Duration::from_secs(20);

/// Largest request body: the client splits forward-backward batches into
/// chunks of at most 5 MB of protobuf (`fwdbwd_max_chunk_bytes_count`).
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// Most samples one `asample` may ask for.
pub const MAX_NUM_SAMPLES: usize = 1024;

/// Shared state of the routes.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<Store>,
    pub worker: WorkerHandle,
    pub config: WorkerConfig,
    /// The key every request must carry (`--api-key`), if any.
    pub api_key: Option<Arc<str>>,
}

/// The router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(
            "/api/v1/healthz",
            get(|| async { Json(json!({"status": "ok"})) }),
        )
        .route("/api/v1/client/config", post(client_config))
        .route(
            "/api/v1/telemetry",
            post(|| async { Json(json!({"status": "accepted"})) }),
        )
        .route("/api/v1/get_server_capabilities", get(capabilities))
        .route("/api/v1/create_session", post(create_session))
        .route("/api/v1/session_heartbeat", post(heartbeat))
        .route("/api/v1/sessions/{id}/finish", post(finish_session))
        .route("/api/v1/create_model", post(create_model))
        .route("/api/v1/get_info", post(get_info))
        .route("/api/v1/forward_backward", post(forward_backward))
        .route("/api/v1/optim_step", post(optim_step))
        .route("/api/v1/save_weights_for_sampler", post(save_for_sampler))
        .route(
            "/api/v1/create_sampling_session",
            post(create_sampling_session),
        )
        .route("/api/v1/samplers/{id}", get(get_sampler))
        .route("/api/v1/asample", post(asample))
        .route("/api/v1/save_weights", post(save_weights))
        .route("/api/v1/load_weights", post(load_weights))
        .route("/api/v1/weights_info", post(weights_info))
        .route("/api/v1/training_runs", get(training_runs))
        .route("/api/v1/training_runs/{id}", get(training_run))
        .route(
            "/api/v1/training_runs/{id}/checkpoints",
            get(run_checkpoints),
        )
        .route("/api/v1/retrieve_future", post(retrieve_future))
        .route(
            "/api/v1/save_weights_external",
            post(checkpoints::save_external),
        )
        .route("/api/v1/checkpoints", get(checkpoints::list_all))
        .route(
            "/api/v1/training_runs/{id}/checkpoints/{segment}/{name}",
            delete(checkpoints::delete),
        )
        .route(
            "/api/v1/training_runs/{id}/checkpoints/{segment}/{name}/ttl",
            put(checkpoints::set_ttl),
        )
        .route(
            "/api/v1/training_runs/{id}/checkpoints/{segment}/{name}/publish",
            post(checkpoints::publish).delete(checkpoints::unpublish),
        )
        .route(
            "/api/v1/training_runs/{id}/checkpoints/{segment}/{name}/external_weights_urls",
            get(checkpoints::external_urls),
        )
        .route(
            "/api/v1/downloads/{token}/{*file}",
            get(checkpoints::download),
        )
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::check,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Parses a JSON body, naming the field a malformed one gets wrong.
pub(crate) fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("malformed request body: {e}")))
}

pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}_{:016x}", rand::random::<u64>())
}

/// The session a model id (`SESSION:train:SEQ`) belongs to.
fn session_of(model_id: &str) -> &str {
    model_id.split(':').next().unwrap_or(model_id)
}

/// Answer of a route that queued a job.
pub(crate) fn future_response(request_id: i64, model_id: Option<&str>) -> Json<Value> {
    Json(json!({"request_id": request_id.to_string(), "model_id": model_id}))
}

impl AppState {
    /// Queues `op` in its model's session's lane (see [`crate::queue`]).
    pub(crate) fn queue(
        &self,
        kind: &str,
        model_id: Option<&str>,
        op: Op,
    ) -> Result<i64, ApiError> {
        let lane = model_id.map_or("", session_of);
        self.queue_in(lane, kind, model_id, op)
    }

    /// Queues `op` in `lane`: a future's id.
    pub(crate) fn queue_in(
        &self,
        lane: &str,
        kind: &str,
        model_id: Option<&str>,
        op: Op,
    ) -> Result<i64, ApiError> {
        let request_id = self.store.create_future(kind, model_id)?;
        if !self.worker.send(lane, Job { request_id, op }) {
            let failed = FutureState::Failed {
                error: "the model thread has stopped".into(),
                category: "server".into(),
            };
            self.store.finish_future(request_id, &failed)?;
        }
        Ok(request_id)
    }

    /// Records a pending checkpoint of `kind` named `path` (else after
    /// `seq_id`) with its time-to-live; its name.
    pub(crate) fn new_checkpoint(
        &self,
        model_id: &str,
        kind: &str,
        path: &Option<String>,
        seq_id: Option<i64>,
        ttl_seconds: Option<i64>,
    ) -> Result<String, ApiError> {
        let name = match (path, seq_id) {
            (Some(p), _) => p.clone(),
            (None, Some(seq)) => format!("seq{seq}"),
            (None, None) => return Err(ApiError::bad_request("path is required")),
        };
        check_name("path", &name)?;
        let ttl = checkpoints::ttl(ttl_seconds)?;
        self.store.create_checkpoint(model_id, &name, kind, ttl)?;
        Ok(name)
    }

    /// Session `id`, which must exist and not be finished.
    fn open_session(&self, id: &str) -> Result<(), ApiError> {
        match self.store.session_finished(id)? {
            None => Ok(()),
            Some(reason) => Err(ApiError::bad_request(format!(
                "session_id `{id}` is finished ({reason}); start a new session"
            ))),
        }
    }

    /// Model `id`, whose session must not be finished.
    pub(crate) fn live_model(&self, id: &str) -> Result<ModelRow, ApiError> {
        let m = self.store.model(id)?;
        if let Some(reason) = self.store.session_finished(&m.session_id)? {
            return Err(ApiError::bad_request(format!(
                "model `{id}`: its session `{}` is finished ({reason})",
                m.session_id
            )));
        }
        Ok(m)
    }

    fn check_base_model(&self, name: &str) -> Result<(), ApiError> {
        if name != self.config.base_name {
            return Err(ApiError::bad_request(format!(
                "base_model `{name}` is not served here; this server trains `{}`",
                self.config.base_name
            )));
        }
        Ok(())
    }
}

async fn client_config() -> Json<Value> {
    // Features this server does not offer are turned off for the client.
    Json(json!({
        "pjwt_auth_enabled": false,
        "proto_compress_fwdbwd": false,
        "sample_use_retrieve_futures": false,
        "sample_join_sampling_session": false,
        "custom_loss_server_side": false,
        "fwdbwd_max_chunk_bytes_count": 5_000_000,
    }))
}

async fn capabilities(State(s): State<AppState>) -> Json<Value> {
    Json(json!({"supported_models": [{"model_name": s.config.base_name}]}))
}

#[derive(Deserialize)]
struct CreateSession {
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    sdk_version: String,
}

async fn create_session(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: CreateSession = parse(&body)?;
    let id = new_id("session");
    s.store.create_session(&id, &req.sdk_version, &req.tags)?;
    Ok(Json(json!({"type": "create_session", "session_id": id})))
}

#[derive(Deserialize)]
struct SessionRef {
    session_id: String,
}

async fn heartbeat(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: SessionRef = parse(&body)?;
    if !s.store.heartbeat(&req.session_id)? {
        return Err(ApiError::not_found(format!(
            "session_id `{}`: no such session",
            req.session_id
        )));
    }
    Ok(Json(json!({"type": "session_heartbeat"})))
}

#[derive(Deserialize)]
struct FinishReason {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct FinishSession {
    reason: FinishReason,
    detail: Option<String>,
}

/// Ends a session (`ServiceClient.close`): the first reason wins, its models
/// leave memory once their queued requests have run, and later training
/// requests against them are refused. Saved checkpoints stay usable.
async fn finish_session(
    State(s): State<AppState>,
    UrlPath(id): UrlPath<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: FinishSession = parse(&body)?;
    if !["success", "errored", "interrupted"].contains(&req.reason.kind.as_str()) {
        return Err(ApiError::bad_request(format!(
            "reason.type `{}` must be success, errored or interrupted",
            req.reason.kind
        )));
    }
    if !s
        .store
        .finish_session(&id, &req.reason.kind, req.detail.as_deref())?
    {
        return Err(ApiError::not_found(format!(
            "session_id `{id}`: no such session"
        )));
    }
    let model_ids = s.store.session_models(&id)?;
    if !model_ids.is_empty() {
        // In the session's lane: after the requests it already queued.
        let op = Op::Train(Replicated::Unload { model_ids });
        s.queue_in(&id, "unload_model", None, op)?;
    }
    Ok(Json(json!({})))
}

#[derive(Deserialize)]
struct LoraConfigIn {
    rank: i64,
    seed: Option<u64>,
    #[serde(default)]
    train_unembed: bool,
}

#[derive(Deserialize)]
struct OptimizerConfigIn {
    #[serde(rename = "type")]
    kind: String,
}

/// An `optimizer_config`, which may only name adamw.
fn check_optimizer(config: Option<&OptimizerConfigIn>) -> Result<(), ApiError> {
    match config {
        Some(o) if o.kind != "adamw" => Err(ApiError::bad_request(format!(
            "optimizer_config.type `{}` is not supported; this server trains with adamw",
            o.kind
        ))),
        _ => Ok(()),
    }
}

#[derive(Deserialize)]
struct CreateModel {
    session_id: String,
    model_seq_id: Option<i64>,
    base_model: String,
    lora_config: Option<LoraConfigIn>,
    optimizer_config: Option<OptimizerConfigIn>,
}

async fn create_model(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: CreateModel = parse(&body)?;
    s.open_session(&req.session_id)?;
    s.check_base_model(&req.base_model)?;
    check_optimizer(req.optimizer_config.as_ref())?;
    let lora = req.lora_config.unwrap_or(LoraConfigIn {
        rank: 0,
        seed: None,
        train_unembed: false,
    });
    if lora.rank < 0 {
        return Err(ApiError::bad_request(
            "lora_config.rank must not be negative",
        ));
    }
    if lora.train_unembed && lora.rank > 0 {
        // The client's default; adapters here cover the decoder's linear
        // layers (PEFT's all-linear), never the output layer.
        tracing::warn!(
            "lora_config.train_unembed: the output layer gets no adapter on this server"
        );
    }
    let seed = lora.seed.unwrap_or_else(rand::random);
    let model_id = s.new_model_id(&req.session_id, req.model_seq_id)?;
    s.store.create_model(&ModelRow {
        model_id: model_id.clone(),
        session_id: req.session_id,
        base_model: req.base_model,
        lora_rank: lora.rank,
        lora_seed: seed,
        created: 0.0,
    })?;
    let op = Op::Train(Replicated::Create {
        model_id: model_id.clone(),
        rank: lora.rank,
        seed,
    });
    let id = s.queue("create_model", Some(&model_id), op)?;
    Ok(future_response(id, Some(&model_id)))
}

#[derive(Deserialize)]
struct ModelRef {
    model_id: String,
}

async fn get_info(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: ModelRef = parse(&body)?;
    let m = s.store.model(&req.model_id)?;
    Ok(Json(json!({
        "type": "get_info",
        "model_id": m.model_id,
        "model_data": {
            "arch": "unknown",
            "model_name": m.base_model,
            "tokenizer_id": m.base_model,
        },
        "is_lora": m.lora_rank > 0,
        "lora_rank": (m.lora_rank > 0).then_some(m.lora_rank),
        "model_name": m.base_model,
    })))
}

/// The datums of a forward-backward request, checked against `loss`.
fn datums(req: &ForwardBackwardRequest, loss: LossFn) -> Result<Vec<DatumInput>, ApiError> {
    req.data
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut tokens = Vec::new();
            for c in &d.model_input {
                match &c.kind {
                    Some(chunk::Kind::EncodedText(t)) => tokens.extend(proto::tokens_of(&t.tokens)?),
                    Some(_) => {
                        return Err(ApiError::bad_request(format!(
                            "data[{i}].model_input: only encoded_text chunks are supported (no images or audio)"
                        )))
                    }
                    None => {}
                }
            }
            let input = |name: &str| -> Result<Option<Vec<f64>>, ApiError> {
                d.loss_fn_inputs
                    .get(name)
                    .map(|t| proto::tensor_values(name, t))
                    .transpose()
            };
            let targets = input("target_tokens")?.ok_or_else(|| {
                ApiError::bad_request(format!("data[{i}].loss_fn_inputs.target_tokens is required"))
            })?;
            let f32s = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
            let weights = input("weights")?.map(f32s).unwrap_or_else(|| vec![1.0; targets.len()]);
            let need = |name: &str| -> Result<Vec<f32>, ApiError> {
                match input(name)? {
                    Some(v) => Ok(f32s(v)),
                    None if loss.needs_policy_inputs() => Err(ApiError::bad_request(format!(
                        "data[{i}].loss_fn_inputs.{name} is required by this loss_fn"
                    ))),
                    None => Ok(Vec::new()),
                }
            };
            let known = ["target_tokens", "weights", "logprobs", "advantages"];
            if let Some(other) = d.loss_fn_inputs.keys().find(|k| !known.contains(&k.as_str())) {
                return Err(ApiError::bad_request(format!(
                    "data[{i}].loss_fn_inputs.{other} is not an input of the built-in losses"
                )));
            }
            Ok(DatumInput {
                tokens,
                targets: targets.iter().map(|&t| t as i64).collect(),
                weights,
                sampler_logprobs: need("logprobs")?,
                advantages: need("advantages")?,
            })
        })
        .collect()
}

async fn forward_backward(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type.starts_with("application/x-protobuf") {
        return Err(ApiError {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            detail: format!(
                "forward_backward takes a protobuf ForwardBackwardRequest (Content-Type \
                 application/x-protobuf, as the tinker client sends it), not `{content_type}`"
            ),
        });
    }
    if headers.get(header::CONTENT_ENCODING).is_some() {
        return Err(ApiError::bad_request(
            "Content-Encoding is not supported (the server's client config turns compression off)",
        ));
    }
    let req = ForwardBackwardRequest::decode(body.as_ref())
        .map_err(|e| ApiError::bad_request(format!("malformed ForwardBackwardRequest: {e}")))?;
    s.live_model(&req.model_id)?;
    let mut config = req.loss_fn_config.clone();
    for (k, v) in &req.loss_fn_config_v2 {
        match &v.value {
            Some(loss_config_value::Value::Number(x)) => {
                config.insert(k.clone(), *x);
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "loss_fn_config.{k}: only numbers are accepted"
                )))
            }
        }
    }
    let loss = LossFn::parse(&req.loss_fn, &config)?;
    let data = datums(&req, loss)?;
    if data.is_empty() {
        return Err(ApiError::bad_request("data is empty"));
    }
    let kind = if req.forward_only {
        "forward"
    } else {
        "forward_backward"
    };
    let op = Op::Train(Replicated::ForwardBackward {
        model_id: req.model_id.clone(),
        data,
        loss,
        backward: !req.forward_only,
    });
    let id = s.queue(kind, Some(&req.model_id), op)?;
    Ok(future_response(id, Some(&req.model_id)))
}

#[derive(Deserialize)]
struct AdamIn {
    #[serde(default = "lr")]
    learning_rate: f64,
    #[serde(default = "b1")]
    beta1: f64,
    #[serde(default = "b2")]
    beta2: f64,
    #[serde(default = "eps")]
    eps: f64,
    #[serde(default)]
    weight_decay: f64,
    #[serde(default)]
    grad_clip_norm: f64,
}

fn lr() -> f64 {
    1e-4
}
fn b1() -> f64 {
    0.9
}
fn b2() -> f64 {
    0.95
}
fn eps() -> f64 {
    1e-12
}

#[derive(Deserialize)]
struct OptimStep {
    model_id: String,
    adam_params: Option<AdamIn>,
    optimizer_params: Option<Value>,
}

async fn optim_step(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: OptimStep = parse(&body)?;
    s.live_model(&req.model_id)?;
    if req.optimizer_params.is_some() {
        return Err(ApiError::bad_request(
            "optimizer_params: only adam_params are supported (the model trains with adamw)",
        ));
    }
    let a = req
        .adam_params
        .ok_or_else(|| ApiError::bad_request("adam_params is required"))?;
    let ok = a.learning_rate >= 0.0
        && (0.0..1.0).contains(&a.beta1)
        && (0.0..1.0).contains(&a.beta2)
        && a.eps > 0.0
        && a.weight_decay >= 0.0;
    if !ok {
        return Err(ApiError::bad_request(
            "adam_params: learning_rate and weight_decay must be >= 0, beta1/beta2 in [0, 1), eps > 0",
        ));
    }
    let op = Op::Train(Replicated::OptimStep {
        model_id: req.model_id.clone(),
        adam: AdamStep {
            learning_rate: a.learning_rate,
            beta1: a.beta1,
            beta2: a.beta2,
            eps: a.eps,
            weight_decay: a.weight_decay,
            grad_clip_norm: a.grad_clip_norm,
        },
    });
    let id = s.queue("optim_step", Some(&req.model_id), op)?;
    Ok(future_response(id, Some(&req.model_id)))
}

/// A checkpoint or sampler name: letters, digits, `_`, `-`, `.` (no path tricks).
pub(crate) fn check_name(field: &str, name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if !ok {
        return Err(ApiError::bad_request(format!(
            "{field} `{name}` must be 1-128 letters, digits, `_`, `-` or `.`, not starting with `.`"
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
struct SaveForSampler {
    model_id: String,
    path: Option<String>,
    sampling_session_seq_id: Option<i64>,
    seq_id: Option<i64>,
    ttl_seconds: Option<i64>,
}

async fn save_for_sampler(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: SaveForSampler = parse(&body)?;
    let model = s.live_model(&req.model_id)?;
    let (checkpoint_id, session) = match (&req.path, req.sampling_session_seq_id, req.seq_id) {
        (Some(p), _, _) => (p.clone(), None),
        (None, Some(ss), Some(seq)) => (format!("ss{ss}_seq{seq}"), Some(ss)),
        _ => {
            return Err(ApiError::bad_request(
                "either path or both sampling_session_seq_id and seq_id are required",
            ))
        }
    };
    check_name("path", &checkpoint_id)?;
    let ttl = checkpoints::ttl(req.ttl_seconds)?;
    s.store
        .create_checkpoint(&req.model_id, &checkpoint_id, SAMPLER, ttl)?;
    let sampling_session_id = match session {
        Some(ss) => {
            let id = new_id("sampling");
            let path = tinker_path(&req.model_id, SAMPLER, &checkpoint_id);
            s.store
                .create_sampling_session(&id, &model.session_id, ss, None, Some(&path))?;
            Some(id)
        }
        None => None,
    };
    let op = Op::SaveForSampler {
        model_id: req.model_id.clone(),
        checkpoint_id,
        sampling_session_id,
    };
    let id = s.queue("save_weights_for_sampler", Some(&req.model_id), op)?;
    Ok(future_response(id, Some(&req.model_id)))
}

#[derive(Deserialize)]
struct CreateSamplingSession {
    session_id: String,
    sampling_session_seq_id: i64,
    base_model: Option<String>,
    model_path: Option<String>,
}

async fn create_sampling_session(
    State(s): State<AppState>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: CreateSamplingSession = parse(&body)?;
    s.open_session(&req.session_id)?;
    match (&req.base_model, &req.model_path) {
        (Some(b), None) => s.check_base_model(b)?,
        (None, Some(p)) => {
            s.sampler_dir(p)?;
        }
        _ => {
            return Err(ApiError::bad_request(
                "exactly one of base_model or model_path is required",
            ))
        }
    }
    let id = new_id("sampling");
    s.store.create_sampling_session(
        &id,
        &req.session_id,
        req.sampling_session_seq_id,
        req.base_model.as_deref(),
        req.model_path.as_deref(),
    )?;
    Ok(Json(
        json!({"type": "create_sampling_session", "sampling_session_id": id}),
    ))
}

async fn get_sampler(
    State(s): State<AppState>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let (base, path) = s.store.sampling_session(&id)?;
    Ok(Json(json!({
        "sampler_id": id,
        "base_model": base.unwrap_or_else(|| s.config.base_name.clone()),
        "model_path": path,
    })))
}

impl AppState {
    /// The model id the client derives from its session and model sequence
    /// number (`SESSION:train:SEQ`), or a fresh one; a 400 when taken (not a 409, which the client retries).
    fn new_model_id(&self, session_id: &str, seq: Option<i64>) -> Result<String, ApiError> {
        let id = match seq {
            Some(seq) => format!("{session_id}:train:{seq}"),
            None => new_id("model"),
        };
        if self.store.model(&id).is_ok() {
            return Err(ApiError::bad_request(format!(
                "model `{id}` already exists"
            )));
        }
        Ok(id)
    }

    /// The model id, checkpoint name and directory of a completed checkpoint
    /// `tinker://MODEL/weights/NAME` (`training`) or
    /// `tinker://MODEL/sampler_weights/NAME` (`sampler`; `tinker://MODEL/NAME`
    /// too).
    fn checkpoint(
        &self,
        field: &str,
        path: &str,
        kind: &str,
    ) -> Result<(String, String, std::path::PathBuf), ApiError> {
        let segment = path_segment(kind);
        let bad = || {
            ApiError::bad_request(format!(
                "{field} `{path}` must be tinker://MODEL_ID/{segment}/NAME"
            ))
        };
        let rest = path.strip_prefix("tinker://").ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split('/').collect();
        let (model_id, name) = match parts.as_slice() {
            [m, seg, n] if *seg == segment => (*m, *n),
            [m, n] if kind == SAMPLER => (*m, *n),
            _ => return Err(bad()),
        };
        self.completed_checkpoint(field, path, model_id, kind, name)?;
        let dir = self.config.checkpoint_dir(model_id, kind, name);
        Ok((model_id.to_string(), name.to_string(), dir))
    }

    /// The row of checkpoint `name` of `kind` of `model_id` (named `path`
    /// in `field`), which must exist and be completed.
    pub(crate) fn completed_checkpoint(
        &self,
        field: &str,
        path: &str,
        model_id: &str,
        kind: &str,
        name: &str,
    ) -> Result<crate::store::CheckpointRow, ApiError> {
        check_name(field, name)?;
        self.store.model(model_id)?;
        match self.store.checkpoint(model_id, name, kind)? {
            Some(c) if c.status == "completed" => Ok(c),
            Some(c) => Err(ApiError::bad_request(format!(
                "{field} `{path}`: that save is {}",
                c.status
            ))),
            None => Err(ApiError::not_found(format!(
                "{field} `{path}`: no {kind} checkpoint was saved under that name"
            ))),
        }
    }

    /// The directory of completed sampler weights.
    fn sampler_dir(&self, path: &str) -> Result<std::path::PathBuf, ApiError> {
        Ok(self.checkpoint("model_path", path, SAMPLER)?.2)
    }
}

#[derive(Deserialize)]
struct SaveWeights {
    model_id: String,
    path: Option<String>,
    seq_id: Option<i64>,
    ttl_seconds: Option<i64>,
}

async fn save_weights(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: SaveWeights = parse(&body)?;
    s.live_model(&req.model_id)?;
    let name = s.new_checkpoint(
        &req.model_id,
        TRAINING,
        &req.path,
        req.seq_id,
        req.ttl_seconds,
    )?;
    let op = Op::SaveWeights {
        model_id: req.model_id.clone(),
        checkpoint_id: name,
    };
    let id = s.queue("save_weights", Some(&req.model_id), op)?;
    Ok(future_response(id, Some(&req.model_id)))
}

#[derive(Deserialize)]
struct LoadWeights {
    model_id: Option<String>,
    session_id: Option<String>,
    model_seq_id: Option<i64>,
    base_model: Option<String>,
    path: String,
    #[serde(default)]
    optimizer: bool,
    optimizer_config: Option<OptimizerConfigIn>,
}

/// `(base_model, lora_rank, lora_seed)` of a training checkpoint directory.
fn checkpoint_meta(dir: &std::path::Path) -> Result<(String, i64, u64), ApiError> {
    let path = dir.join(crate::training::STATE_META_FILE);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ApiError::internal(format!("cannot read {}: {e}", path.display())))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| ApiError::internal(format!("{}: {e}", path.display())))?;
    let base = v["base_model"].as_str().unwrap_or_default().to_string();
    Ok((
        base,
        v["lora_rank"].as_i64().unwrap_or(0),
        v["lora_seed"].as_u64().unwrap_or(0),
    ))
}

async fn load_weights(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: LoadWeights = parse(&body)?;
    let (_, _, dir) = s.checkpoint("path", &req.path, TRAINING)?;
    let (base, rank, seed) = checkpoint_meta(&dir)?;
    s.check_base_model(&base)?;
    if let Some(b) = &req.base_model {
        s.check_base_model(b)?;
    }
    check_optimizer(req.optimizer_config.as_ref())?;
    let (model_id, create) = match (&req.model_id, &req.session_id) {
        (Some(id), None) => {
            let m = s.live_model(id)?;
            if m.lora_rank != rank {
                return Err(ApiError::bad_request(format!(
                    "path `{}` holds rank-{rank} weights; model `{id}` has lora_config.rank {}",
                    req.path, m.lora_rank
                )));
            }
            (id.clone(), None)
        }
        (None, Some(session)) => {
            s.open_session(session)?;
            let id = s.new_model_id(session, req.model_seq_id)?;
            s.store.create_model(&ModelRow {
                model_id: id.clone(),
                session_id: session.clone(),
                base_model: base.clone(),
                lora_rank: rank,
                lora_seed: seed,
                created: 0.0,
            })?;
            (id, Some((rank, seed)))
        }
        _ => {
            return Err(ApiError::bad_request(
                "exactly one of model_id or session_id (with model_seq_id) is required",
            ))
        }
    };
    let op = Op::Train(Replicated::Load {
        model_id: model_id.clone(),
        source: dir,
        optimizer: req.optimizer,
        create,
    });
    let id = s.queue("load_weights", Some(&model_id), op)?;
    Ok(future_response(id, Some(&model_id)))
}

#[derive(Deserialize)]
struct WeightsInfo {
    tinker_path: String,
}

async fn weights_info(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: WeightsInfo = parse(&body)?;
    let kind = if req.tinker_path.contains("/sampler_weights/") {
        SAMPLER
    } else {
        TRAINING
    };
    let (model_id, _, _) = s.checkpoint("tinker_path", &req.tinker_path, kind)?;
    let m = s.store.model(&model_id)?;
    Ok(Json(json!({
        "base_model": m.base_model,
        "is_lora": m.lora_rank > 0,
        "lora_rank": (m.lora_rank > 0).then_some(m.lora_rank),
    })))
}

/// RFC 3339 time of `secs` since the epoch.
pub(crate) fn timestamp(secs: f64) -> String {
    chrono::DateTime::from_timestamp_millis((secs * 1000.0) as i64)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(crate) fn checkpoint_json(c: &crate::store::CheckpointRow) -> Value {
    json!({
        "checkpoint_id": format!("{}/{}", path_segment(&c.kind), c.checkpoint_id),
        "checkpoint_type": c.kind,
        "time": timestamp(c.created),
        "tinker_path": tinker_path(&c.model_id, &c.kind, &c.checkpoint_id),
        "public": c.public,
        "expires_at": c.expires.map(timestamp),
    })
}

fn training_run_json(s: &AppState, m: &ModelRow) -> Result<Value, ApiError> {
    let done: Vec<_> = s
        .store
        .checkpoints(&m.model_id)?
        .into_iter()
        .filter(|c| c.status == "completed")
        .collect();
    let last = |kind: &str| {
        done.iter()
            .rev()
            .find(|c| c.kind == kind)
            .map(checkpoint_json)
    };
    Ok(json!({
        "training_run_id": m.model_id,
        "base_model": m.base_model,
        "model_owner": "local",
        "is_lora": m.lora_rank > 0,
        "corrupted": false,
        "lora_rank": (m.lora_rank > 0).then_some(m.lora_rank),
        "last_request_time": timestamp(m.created),
        "last_checkpoint": last(TRAINING),
        "last_sampler_checkpoint": last(SAMPLER),
    }))
}

#[derive(Deserialize)]
pub(crate) struct Page {
    #[serde(default)]
    pub offset: usize,
    #[serde(default = "page_limit")]
    pub limit: usize,
}

fn page_limit() -> usize {
    20
}

async fn training_runs(
    State(s): State<AppState>,
    axum::extract::Query(page): axum::extract::Query<Page>,
) -> Result<Json<Value>, ApiError> {
    let models = s.store.models()?;
    let runs = models
        .iter()
        .skip(page.offset)
        .take(page.limit)
        .map(|m| training_run_json(&s, m))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(json!({
        "training_runs": runs,
        "cursor": {"offset": page.offset, "limit": page.limit, "total_count": models.len()},
    })))
}

async fn training_run(
    State(s): State<AppState>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let m = s.store.model(&id)?;
    Ok(Json(training_run_json(&s, &m)?))
}

async fn run_checkpoints(
    State(s): State<AppState>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    s.store.model(&id)?;
    let list: Vec<Value> = s
        .store
        .checkpoints(&id)?
        .iter()
        .filter(|c| c.status == "completed")
        .map(checkpoint_json)
        .collect();
    Ok(Json(json!({"checkpoints": list})))
}

#[derive(Deserialize)]
struct ModelInputIn {
    chunks: Vec<Value>,
}

#[derive(Deserialize)]
struct Sample {
    #[serde(default = "one")]
    num_samples: usize,
    prompt: ModelInputIn,
    sampling_params: TinkerSampling,
    base_model: Option<String>,
    model_path: Option<String>,
    sampling_session_id: Option<String>,
    prompt_logprobs: Option<bool>,
    #[serde(default)]
    topk_prompt_logprobs: usize,
}

fn one() -> usize {
    1
}

async fn asample(State(s): State<AppState>, body: Bytes) -> Result<Json<Value>, ApiError> {
    let req: Sample = parse(&body)?;
    if req.topk_prompt_logprobs > 0 {
        return Err(ApiError::bad_request(
            "topk_prompt_logprobs is not supported by this server",
        ));
    }
    if req.num_samples == 0 || req.num_samples > MAX_NUM_SAMPLES {
        return Err(ApiError::bad_request(format!(
            "num_samples must be between 1 and {MAX_NUM_SAMPLES}, got {}",
            req.num_samples
        )));
    }
    let (base, path) = match &req.sampling_session_id {
        Some(id) => s.store.sampling_session(id)?,
        None => (req.base_model.clone(), req.model_path.clone()),
    };
    // Each sampler is a client of its own for the queue's turns.
    let lane = format!(
        "sampler:{}",
        req.sampling_session_id
            .as_deref()
            .or(path.as_deref())
            .or(base.as_deref())
            .unwrap_or_default()
    );
    let dir = match (base, path) {
        (_, Some(p)) => s.sampler_dir(&p)?,
        (Some(b), None) => {
            s.check_base_model(&b)?;
            s.config.base_dir.clone()
        }
        (None, None) => {
            return Err(ApiError::bad_request(
                "one of base_model, model_path or sampling_session_id is required",
            ))
        }
    };
    let mut prompt = Vec::new();
    for (i, c) in req.prompt.chunks.iter().enumerate() {
        let kind = c
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("encoded_text");
        let tokens = c.get("tokens").and_then(Value::as_array);
        match (kind, tokens) {
            ("encoded_text", Some(t)) => {
                for v in t {
                    prompt.push(v.as_i64().ok_or_else(|| {
                        ApiError::bad_request(format!("prompt.chunks[{i}].tokens must be integers"))
                    })?);
                }
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "prompt.chunks[{i}]: only encoded_text chunks are supported"
                )))
            }
        }
    }
    if prompt.is_empty() {
        return Err(ApiError::bad_request("prompt has no tokens"));
    }
    let params = req
        .sampling_params
        .to_engine()
        .map_err(ApiError::bad_request)?;
    let op = Op::Sample {
        dir,
        prompt,
        num_samples: req.num_samples,
        params,
        prompt_logprobs: req.prompt_logprobs.unwrap_or(false),
    };
    let n = req.num_samples;
    let id = s.queue_in(&lane, "sample", None, op)?;
    // Each sequence's session-scoped id, in the response's order.
    let ids: Vec<String> = (0..n).map(|i| format!("seq_{id}_{i}")).collect();
    Ok(Json(
        json!({"request_id": id.to_string(), "sample_sequence_ids": ids}),
    ))
}

#[derive(Deserialize)]
struct RetrieveFuture {
    request_id: String,
}

async fn retrieve_future(State(s): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    let req: RetrieveFuture = parse(&body)?;
    let id: i64 = req.request_id.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "request_id `{}` is not a request id",
            req.request_id
        ))
    })?;
    let mut finished = s.worker.finished.clone();
    let deadline = tokio::time::Instant::now() + LONG_POLL;
    loop {
        finished.mark_unchanged();
        match s.store.future(id)? {
            None => {
                return Err(ApiError::not_found(format!(
                    "request_id `{id}`: no such future"
                )))
            }
            Some(FutureState::Completed { content_type, body }) => {
                return Ok(([(header::CONTENT_TYPE, content_type)], body).into_response())
            }
            Some(FutureState::Failed { error, category }) => {
                return Ok(Json(json!({"error": error, "category": category})).into_response())
            }
            Some(FutureState::Pending) => {}
        }
        let now = tokio::time::Instant::now();
        let woke = now < deadline
            && matches!(
                tokio::time::timeout(deadline - now, finished.changed()).await,
                Ok(Ok(()))
            );
        if !woke {
            return Ok(Json(json!({
                "type": "try_again",
                "request_id": id.to_string(),
                "queue_state": "active",
            }))
            .into_response());
        }
    }
}
