//! vLLM's control endpoints on `skyrl serve`, as SkyRL drives vLLM servers,
//! so a trainer speaking either protocol (ours with
//! `generator.inference_engine.backend: vllm`, or SkyRL's Python
//! `RemoteInferenceClient`) can use `skyrl serve` in place of `vllm serve`.
//! `docs/inference.md` has the protocol table and the sources.
//!
//! | route | here |
//! |---|---|
//! | `GET /get_world_size` | `{"world_size": 1}` (one engine, one device) |
//! | `POST /init_weight_transfer_engine` | joins the trainer's NCCL group through vLLM's torch-store rendezvous, as rank `rank_offset` |
//! | `POST /update_weights` | receives `update_info`'s tensors by broadcast (packed or not), copies them in, drops the prefix cache |
//! | `POST /collective_rpc` | `reload_weights` (`weights_path`), and SkyRL's `skyrl_start_weight_update` / `update_weights_nccl` / `skyrl_finish_weight_update` |
//! | `POST /pause`, `/resume`, `GET /is_paused` | pause/resume the engine; every `mode` keeps requests in flight (vLLM's `keep`) |
//! | `POST /sleep`, `/wake_up`, `GET /is_sleeping` | frees the KV pool (re-allocated on the next request); weights stay |
//! | `POST /reset_prefix_cache` | drops cached prefix blocks |
//! | `POST /tokenize`, `/detokenize` | the served tokenizer |

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use skyrl_inference::nccl::{self, stateless, NcclGroup};
use skyrl_inference::vllm::{CollectiveRpc, InitWeightTransferRequest, WeightUpdateInfo};
use skyrl_model::{ChatMessage, InferenceEngine};
use tch::{Kind, Tensor};

use crate::server::{ask, bad, ApiError, AppState};
use crate::worker::EngineCommand;

/// How long a rank waits for the trainer's rendezvous store and unique id.
const RENDEZVOUS_TIMEOUT: Duration = Duration::from_secs(300);

/// State of these routes beside [`AppState`].
#[derive(Default)]
struct VllmState {
    sleeping: AtomicBool,
    /// Between SkyRL's `skyrl_start_weight_update` and `skyrl_finish_weight_update`.
    update_open: AtomicBool,
}

/// The routes, to merge into the server's router (they read [`AppState`]).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/get_world_size", get(world_size))
        .route("/init_weight_transfer_engine", post(init_transfer))
        .route("/update_weights", post(update_weights))
        .route("/collective_rpc", post(collective_rpc))
        .route("/pause", post(pause))
        .route("/resume", post(resume))
        .route("/is_paused", get(is_paused))
        .route("/sleep", post(sleep))
        .route("/wake_up", post(wake_up))
        .route("/is_sleeping", get(is_sleeping))
        .route("/reset_prefix_cache", post(reset_prefix_cache))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .layer(Extension(Arc::new(VllmState::default())))
}

type Answer = Result<Json<Value>, ApiError>;

/// A JSON body (empty reads as `{}`), or a 400 naming the route.
fn body<T: DeserializeOwned>(bytes: &Bytes, route: &str) -> Result<T, ApiError> {
    let text = if bytes.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        &bytes[..]
    };
    serde_json::from_slice(text).map_err(|e| bad(format!("{route}: bad request body: {e}")))
}

/// Query parameters (`?a=1&tags=x&tags=y`), values in order per name.
fn query(uri: &Uri) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for pair in uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.entry(k.to_string()).or_default().push(v.to_string());
    }
    out
}

/// Runs `job` on the engine thread; its error becomes a `status` answer.
async fn with_engine(
    s: &AppState,
    status: StatusCode,
    job: impl FnOnce(&mut InferenceEngine) -> Result<bool, String> + Send + 'static,
) -> Result<u64, ApiError> {
    ask(s, |reply| EngineCommand::WithEngine {
        job: Box::new(job),
        reply,
    })
    .await?
    .map_err(|e| ApiError(status, e))
}

async fn world_size() -> Json<Value> {
    Json(json!({"world_size": 1}))
}

async fn init_transfer(State(s): State<AppState>, bytes: Bytes) -> Answer {
    let req: InitWeightTransferRequest = body(&bytes, "/init_weight_transfer_engine")?;
    let info = req.init_info;
    let rank = info.rank_offset;
    if rank < 1 || rank >= info.world_size {
        return Err(bad(format!(
            "rank_offset {rank} does not fit a group of {} (the trainer is rank 0)",
            info.world_size
        )));
    }
    nccl::check_available().map_err(|e| bad(e.to_string()))?;
    let world = info.world_size;
    let id = tokio::task::spawn_blocking(move || {
        stateless::fetch_unique_id(
            (&info.master_address, info.master_port),
            world as usize,
            RENDEZVOUS_TIMEOUT,
        )
    })
    .await
    .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
    .map_err(|e| bad(e.to_string()))?;
    let slot = s.nccl.clone();
    // Joining blocks until every rank joins; run it where the weights live.
    with_engine(&s, StatusCode::BAD_REQUEST, move |engine| {
        let device = nccl::cuda_index(engine.model().device(), "the engine", "")
            .map_err(|e| e.to_string())?;
        let group = NcclGroup::join(&id, rank, world, device).map_err(|e| e.to_string())?;
        group.warm_up().map_err(|e| e.to_string())?;
        *slot.lock().expect("nccl lock") = Some(group);
        Ok(false)
    })
    .await?;
    Ok(Json(json!({"message": "Weight transfer initialized"})))
}

/// Receives `info`'s tensors into the engine (which drops its prefix cache).
async fn receive(s: &AppState, info: WeightUpdateInfo) -> Result<u64, ApiError> {
    let n = info.names.len();
    if info.dtype_names.len() != n || info.shapes.len() != n {
        return Err(bad(format!(
            "names, dtype_names and shapes must have the same length ({n}, {}, {})",
            info.dtype_names.len(),
            info.shapes.len()
        )));
    }
    let kinds = info
        .dtype_names
        .iter()
        .map(|d| nccl::kind_of(d.strip_prefix("torch.").unwrap_or(d)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    let slot = s.nccl.clone();
    with_engine(s, StatusCode::BAD_REQUEST, move |engine| {
        let guard = slot.lock().expect("nccl lock");
        let group = guard.as_ref().ok_or(
            "no weight transfer group; call /init_weight_transfer_engine first".to_string(),
        )?;
        receive_into(engine, group, &info, &kinds)?;
        Ok(true)
    })
    .await
}

/// Receives every tensor of `info` by broadcast from rank 0 (all of them,
/// even after a mismatch, so the collective stays in step) and copies each
/// into the parameter of its name. Like vLLM, a subset of the parameters
/// may be sent; a tied `lm_head.weight` is skipped.
fn receive_into(
    engine: &mut InferenceEngine,
    group: &NcclGroup,
    info: &WeightUpdateInfo,
    kinds: &[Kind],
) -> Result<(), String> {
    let device = tch::Device::Cuda(group.device);
    let tied = engine.model().config().tie_word_embeddings;
    // Through `model_mut`: new weights drop the prefix cache.
    let vars = engine.model_mut().var_store().variables();
    let _guard = tch::no_grad_guard();
    let mut problems = Vec::new();
    let mut load = |name: &str, t: &Tensor| match vars.get(name) {
        Some(var) if var.size() == t.size() => {
            var.shallow_clone().copy_(t);
        }
        Some(var) => problems.push(format!(
            "`{name}` has shape {:?} here, {:?} sent",
            var.size(),
            t.size()
        )),
        None if name == "lm_head.weight" && tied => {}
        None => problems.push(format!("unknown parameter `{name}`")),
    };
    if info.packed {
        let sizes: Vec<u64> = info
            .shapes
            .iter()
            .zip(kinds)
            .map(|(s, k)| s.iter().product::<i64>().max(0) as u64 * k.elt_size_in_bytes() as u64)
            .collect();
        for range in info.packed_groups(&sizes) {
            let total: u64 = sizes[range.clone()].iter().sum();
            let mut buf = Tensor::empty([total as i64], (Kind::Uint8, device));
            group.broadcast(&mut buf, 0).map_err(|e| e.to_string())?;
            let mut offset = 0i64;
            for i in range {
                let part = buf
                    .narrow(0, offset, sizes[i] as i64)
                    .view_dtype(kinds[i])
                    .reshape(info.shapes[i].as_slice());
                load(&info.names[i], &part);
                offset += sizes[i] as i64;
            }
        }
    } else {
        for ((name, shape), kind) in info.names.iter().zip(&info.shapes).zip(kinds) {
            let mut buf = Tensor::empty(shape.as_slice(), (*kind, device));
            group.broadcast(&mut buf, 0).map_err(|e| e.to_string())?;
            load(name, &buf);
        }
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

#[derive(Deserialize)]
struct UpdateBody {
    update_info: WeightUpdateInfo,
}

async fn update_weights(State(s): State<AppState>, bytes: Bytes) -> Answer {
    let req: UpdateBody = body(&bytes, "/update_weights")?;
    let version = receive(&s, req.update_info).await?;
    Ok(Json(
        json!({"message": "Weights updated", "weight_version": version}),
    ))
}

async fn collective_rpc(
    State(s): State<AppState>,
    Extension(v): Extension<Arc<VllmState>>,
    bytes: Bytes,
) -> Answer {
    let rpc: CollectiveRpc = body(&bytes, "/collective_rpc")?;
    let kwarg = |k: &str| rpc.kwargs.get(k).cloned().unwrap_or(Value::Null);
    let version = match rpc.method.as_str() {
        "reload_weights" => {
            let path = match (kwarg("weights_path"), rpc.args.first()) {
                (Value::String(p), _) => PathBuf::from(p),
                (Value::Null, Some(Value::String(p))) => PathBuf::from(p),
                _ => {
                    return Err(bad(
                        "reload_weights needs kwargs.weights_path (skyrl serve does not keep \
                         the path it started from)",
                    ))
                }
            };
            // Loading drops the prefix cache (`InferenceEngine::model_mut`).
            crate::server::load_weights(&s, &path).await?
        }
        "skyrl_start_weight_update" => {
            v.update_open.store(true, Ordering::SeqCst);
            s.worker.weight_version()
        }
        "update_weights_nccl" => {
            if !v.update_open.load(Ordering::SeqCst) {
                return Err(bad(
                    "skyrl_start_weight_update must be called before update_weights_nccl",
                ));
            }
            let info: WeightUpdateInfo = serde_json::from_value(kwarg("update_info"))
                .map_err(|e| bad(format!("update_weights_nccl: bad update_info: {e}")))?;
            receive(&s, info).await?
        }
        "skyrl_finish_weight_update" => {
            v.update_open.store(false, Ordering::SeqCst);
            s.worker.weight_version()
        }
        "update_weights_ipc" => {
            return Err(bad(
                "CUDA IPC weight transfer is not supported by skyrl serve; use the NCCL \
                 broadcast (update_weights_nccl or /update_weights)",
            ))
        }
        other => {
            return Err(bad(format!(
                "collective_rpc method `{other}` is not supported by skyrl serve (it runs \
                 reload_weights, skyrl_start_weight_update, update_weights_nccl and \
                 skyrl_finish_weight_update)"
            )))
        }
    };
    Ok(Json(json!({"results": [null], "weight_version": version})))
}

async fn pause(State(s): State<AppState>, uri: Uri) -> Answer {
    let q = query(&uri);
    if let Some(mode) = q.get("mode").and_then(|m| m.last()) {
        if !matches!(mode.as_str(), "abort" | "wait" | "keep") {
            return Err(bad(format!(
                "mode `{mode}` is not one of abort, wait, keep"
            )));
        }
    }
    ask(&s, |reply| EngineCommand::Pause { reply }).await?;
    Ok(Json(json!({"status": "paused"})))
}

async fn resume(State(s): State<AppState>) -> Answer {
    ask(&s, |reply| EngineCommand::Resume { reply }).await?;
    Ok(Json(json!({"status": "resumed"})))
}

async fn is_paused(State(s): State<AppState>) -> Json<Value> {
    Json(json!({"is_paused": s.worker.is_paused()}))
}

#[derive(Deserialize, Default)]
struct SleepBody {
    #[serde(default)]
    level: Option<Value>,
}

async fn sleep(
    State(s): State<AppState>,
    Extension(v): Extension<Arc<VllmState>>,
    uri: Uri,
    bytes: Bytes,
) -> Answer {
    let q = query(&uri);
    let b: SleepBody = body(&bytes, "/sleep")?;
    let level = q
        .get("level")
        .and_then(|l| l.last().cloned())
        .or_else(|| b.level.map(|l| l.to_string().trim_matches('"').to_string()))
        .unwrap_or_else(|| "1".into());
    if !matches!(level.as_str(), "1" | "2") {
        return Err(bad(format!("sleep level `{level}` is not 1 or 2")));
    }
    with_engine(&s, StatusCode::CONFLICT, |e| {
        e.sleep().map_err(|err| err.to_string())?;
        Ok(false)
    })
    .await?;
    v.sleeping.store(true, Ordering::SeqCst);
    Ok(Json(json!({"status": "ok"})))
}

async fn wake_up(Extension(v): Extension<Arc<VllmState>>) -> Json<Value> {
    // The KV pool is allocated again on the next request.
    v.sleeping.store(false, Ordering::SeqCst);
    Json(json!({"status": "ok"}))
}

async fn is_sleeping(Extension(v): Extension<Arc<VllmState>>) -> Json<Value> {
    Json(json!({"is_sleeping": v.sleeping.load(Ordering::SeqCst)}))
}

async fn reset_prefix_cache(State(s): State<AppState>) -> Answer {
    with_engine(&s, StatusCode::INTERNAL_SERVER_ERROR, |e| {
        e.reset_prefix_cache();
        Ok(false)
    })
    .await?;
    Ok(Json(json!({"status": "ok"})))
}

#[derive(Deserialize)]
struct MessageIn {
    role: String,
    content: String,
}

#[derive(Deserialize)]
struct TokenizeBody {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<Vec<MessageIn>>,
    #[serde(default)]
    add_special_tokens: Option<bool>,
    #[serde(default)]
    add_generation_prompt: Option<bool>,
}

async fn tokenize(State(s): State<AppState>, bytes: Bytes) -> Answer {
    let b: TokenizeBody = body(&bytes, "/tokenize")?;
    let tokens = match (&b.prompt, &b.messages) {
        (Some(p), None) => s.tokenizer.encode(p, b.add_special_tokens.unwrap_or(true)),
        (None, Some(m)) => {
            let msgs: Vec<ChatMessage> = m
                .iter()
                .map(|m| ChatMessage::new(&m.role, &m.content))
                .collect();
            s.tokenizer
                .encode_chat(&msgs, b.add_generation_prompt.unwrap_or(true))
        }
        _ => return Err(bad("/tokenize takes `prompt` or `messages`")),
    }
    .map_err(|e| bad(e.to_string()))?;
    Ok(Json(json!({
        "count": tokens.len(),
        "max_model_len": s.worker.max_model_len(),
        "tokens": tokens,
        "token_strs": null,
    })))
}

#[derive(Deserialize)]
struct DetokenizeBody {
    tokens: Vec<i64>,
}

async fn detokenize(State(s): State<AppState>, bytes: Bytes) -> Answer {
    let b: DetokenizeBody = body(&bytes, "/detokenize")?;
    let text = s
        .tokenizer
        .decode(&b.tokens, false)
        .map_err(|e| bad(e.to_string()))?;
    Ok(Json(json!({"prompt": text})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_keep_repeated_names() {
        let uri: Uri = "/wake_up?tags=weights&tags=kv_cache&x".parse().unwrap();
        let q = query(&uri);
        assert_eq!(q["tags"], ["weights", "kv_cache"]);
        assert_eq!(q["x"], [""]);
    }

    #[test]
    fn empty_bodies_read_as_empty_objects() {
        let b: SleepBody = body(&Bytes::from_static(b""), "/sleep").unwrap();
        assert!(b.level.is_none());
        assert!(body::<UpdateBody>(&Bytes::from_static(b"{}"), "/update_weights").is_err());
    }
}
