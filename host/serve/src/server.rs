//! The HTTP routes: OpenAI-compatible generation ([`crate::generate`]) plus
//! weight control (SGLang-style names: `/pause_generation`,
//! `/continue_generation`, `/update_weights_from_disk`, `/get_weight_version`).
//! Every failure, malformed JSON and unknown routes included, is answered in
//! OpenAI's error shape.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::json;
use skyrl_model::Tokenizer;
use tokio::sync::oneshot;

use crate::generate::{chat, completions};
use crate::worker::{EngineCommand, EngineWorker};
use skyrl_inference::nccl::{self, InitGroupRequest, NcclGroup, UpdateWeightsRequest};
use skyrl_inference::openai::{ErrorBody, ErrorDetail};

use crate::auth::AuthKeys;
use crate::limits::Limits;
use crate::weights_root::{confine, WeightsRoot};

/// Request bodies accepted by default: room for batches of long token-id prompts.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 << 20;

/// Shared handler state.
#[derive(Clone)]
pub struct AppState {
    pub worker: EngineWorker,
    pub tokenizer: Arc<Tokenizer>,
    pub model_name: String,
    /// The NCCL weight-update group, once joined.
    pub nccl: Arc<Mutex<Option<NcclGroup>>>,
    /// Keys the routes check ([`crate::auth`]); none by default.
    pub auth: Arc<AuthKeys>,
    /// Where weights may be loaded from disk; `None` refuses disk loads.
    pub weights_root: Option<Arc<WeightsRoot>>,
    /// Bounds on generation requests ([`crate::limits`]).
    pub limits: Arc<Limits>,
    /// Largest request body accepted (a 413 beyond).
    pub max_body_bytes: usize,
}

impl AppState {
    /// State for `worker` serving `model_name` (no NCCL group yet).
    pub fn new(worker: EngineWorker, tokenizer: Tokenizer, model_name: String) -> Self {
        Self {
            worker,
            tokenizer: Arc::new(tokenizer),
            model_name,
            nccl: Arc::new(Mutex::new(None)),
            auth: Arc::new(AuthKeys::default()),
            weights_root: None,
            limits: Arc::new(Limits::default()),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// The same state with `limits` and a body cap of `max_body_bytes`.
    pub fn with_limits(mut self, limits: Limits, max_body_bytes: usize) -> Self {
        self.limits = Arc::new(limits);
        self.max_body_bytes = max_body_bytes;
        self
    }

    /// The same state, loading weights only from under `root`.
    pub fn with_weights_root(mut self, root: WeightsRoot) -> Self {
        self.weights_root = Some(Arc::new(root));
        self
    }

    /// The same state, checking `keys`.
    pub fn with_auth(mut self, keys: AuthKeys) -> Self {
        self.auth = Arc::new(keys);
        self
    }
}

/// An HTTP error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.
#[derive(Debug)]
pub struct ApiError(pub(crate) StatusCode, pub(crate) String);

impl ApiError {
    /// The JSON body (also sent as the last event of a failed stream).
    pub(crate) fn body(&self) -> ErrorBody {
        let kind = match self.0 {
            StatusCode::NOT_FOUND => "not_found_error",
            s if s.is_client_error() => "invalid_request_error",
            _ => "server_error",
        };
        ErrorBody {
            error: ErrorDetail {
                message: self.1.clone(),
                kind: kind.into(),
                param: None,
                code: self.0.as_u16(),
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(self.body())).into_response()
    }
}

/// A 400 with `msg`.
pub(crate) fn bad(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.into())
}

/// A JSON body whose rejections (malformed JSON, missing fields, wrong content
/// type) are answered in OpenAI's error shape instead of axum's plain text.
pub(crate) struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

/// Bodies that are not valid JSON or do not fit the request type are 400s
/// (as in OpenAI and vLLM; axum answers the latter with 422).
fn json_rejection(r: JsonRejection) -> ApiError {
    let status = match r.status() {
        StatusCode::UNPROCESSABLE_ENTITY => StatusCode::BAD_REQUEST,
        s => s,
    };
    ApiError(status, r.body_text())
}

/// The router for `state`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .route(
            "/inference/v1/generate",
            post(crate::token_generate::generate),
        )
        .route("/pause_generation", post(pause))
        .route("/continue_generation", post(resume))
        .route("/update_weights_from_disk", post(update_from_disk))
        .route("/get_weight_version", get(weight_version))
        .route("/init_weights_update_group", post(init_group))
        .route(
            "/update_weights_from_distributed",
            post(update_from_distributed),
        )
        .merge(crate::vllm_routes::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::limits::check,
        ))
        .layer(axum::extract::DefaultBodyLimit::max(state.max_body_bytes))
        // Outermost: requests without the right key take no generation slot.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::check,
        ))
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

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, format!("no route {}", uri.path()))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {}", uri.path()),
    )
}

async fn health(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(
        json!({"status": "ok", "paused": s.worker.is_paused(), "weight_version": s.worker.weight_version()}),
    )
}

async fn models(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"object": "list", "data": [{
        "id": s.model_name, "object": "model", "created": now(), "owned_by": "skyrl",
        "max_model_len": s.worker.max_model_len(),
    }]}))
}

async fn weight_version(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"weight_version": s.worker.weight_version()}))
}

/// Sends the command `make` builds and waits for its reply.
pub(crate) async fn ask<T>(
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
    ApiJson(req): ApiJson<DiskUpdate>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let version = load_weights(&s, &req.model_path).await?;
    Ok(Json(json!({"success": true, "weight_version": version})))
}

/// Loads the weights at `requested`, which must lie under the weights root;
/// errors name `requested`, not the path it resolves to.
pub(crate) async fn load_weights(
    s: &AppState,
    requested: &std::path::Path,
) -> Result<u64, ApiError> {
    let path = confine(s.weights_root.as_deref(), requested)?;
    let resolved = path.display().to_string();
    ask(s, |reply| EngineCommand::LoadWeights { path, reply })
        .await?
        .map_err(|e| bad(e.replace(&resolved, &requested.display().to_string())))
}

async fn init_group(
    State(s): State<AppState>,
    ApiJson(req): ApiJson<InitGroupRequest>,
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
    ApiJson(req): ApiJson<UpdateWeightsRequest>,
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
    // Through `model_mut`: new weights drop the prefix cache.
    let vars = engine.model_mut().var_store().variables();
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

/// Seconds since the Unix epoch (`created` fields).
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
