//! Checkpoint management beyond saving and loading, as the `tinker` 0.38
//! client and its `tinker checkpoint` CLI call it: weights exported for use
//! elsewhere (`save_weights_external`) and their download links
//! (`external_weights_urls`: one link per file, opened by a random token
//! without the API key, as the CLI fetches them with plain GETs), deletion,
//! time-to-live (honoured by a sweeper that deletes expired checkpoints),
//! publishing, and the list of every checkpoint.

use std::path::{Component, Path, PathBuf};

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::routes::{checkpoint_json, future_response, new_id, parse, timestamp, AppState, Page};
use crate::store::CheckpointRow;
use crate::worker::{segment_kind, tinker_path, Op, WorkerConfig, EXTERNAL};

/// Shortest and longest time-to-live Tinker accepts: 1 hour to 10 years.
pub const MIN_TTL_SECONDS: i64 = 3600;
pub const MAX_TTL_SECONDS: i64 = 10 * 365 * 24 * 3600;

/// How long a download link stays valid.
pub const DOWNLOAD_LINK_SECONDS: f64 = 3600.0;

/// Checks an optional `ttl_seconds` field: seconds, or `None` for never.
pub fn ttl(field_value: Option<i64>) -> Result<Option<f64>, ApiError> {
    match field_value {
        None => Ok(None),
        Some(t) if (MIN_TTL_SECONDS..=MAX_TTL_SECONDS).contains(&t) => Ok(Some(t as f64)),
        Some(t) => Err(ApiError::bad_request(format!(
            "ttl_seconds {t} must be between {MIN_TTL_SECONDS} (1 hour) and {MAX_TTL_SECONDS} \
             (10 years), or null for no expiry"
        ))),
    }
}

/// Every file under `dir` (relative paths with `/`, sizes), sorted.
pub fn dir_files(dir: &Path) -> Vec<(String, u64)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, u64)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => walk(root, &path, out),
                Ok(t) if t.is_file() => {
                    let rel = path.strip_prefix(root).unwrap_or(&path);
                    let rel: Vec<String> = rel
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect();
                    let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                    out.push((rel.join("/"), len));
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Deletes checkpoints whose time-to-live has passed (files, then rows);
/// returns how many went.
pub fn sweep_expired(state: &AppState) -> Result<usize, ApiError> {
    let expired = state.store.expired_checkpoints()?;
    for c in &expired {
        remove(&state.config, c)?;
        state
            .store
            .delete_checkpoint(&c.model_id, &c.checkpoint_id, &c.kind)?;
        tracing::info!(path = %tinker_path(&c.model_id, &c.kind, &c.checkpoint_id), "checkpoint expired");
    }
    Ok(expired.len())
}

/// Removes a checkpoint's files.
fn remove(config: &WorkerConfig, c: &CheckpointRow) -> Result<(), ApiError> {
    let dir = config.checkpoint_dir(&c.model_id, &c.kind, &c.checkpoint_id);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ApiError::internal(format!(
            "cannot delete {}: {e}",
            dir.display()
        ))),
    }
}

#[derive(Deserialize)]
struct SaveExternal {
    model_id: String,
    path: Option<String>,
    seq_id: Option<i64>,
    ttl_seconds: Option<i64>,
    age_encryption_recipients: Option<Vec<String>>,
}

/// `save_weights_external`: queues the export of a model's weights.
pub(crate) async fn save_external(
    State(s): State<AppState>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let req: SaveExternal = parse(&body)?;
    if req
        .age_encryption_recipients
        .as_ref()
        .is_some_and(|r| !r.is_empty())
    {
        return Err(ApiError::bad_request(
            "age_encryption_recipients: this server does not encrypt exports; leave it out \
             (downloads go over the connection you serve the API on)",
        ));
    }
    s.live_model(&req.model_id)?;
    let name = s.new_checkpoint(
        &req.model_id,
        EXTERNAL,
        &req.path,
        req.seq_id,
        req.ttl_seconds,
    )?;
    let op = Op::SaveExternal {
        model_id: req.model_id.clone(),
        checkpoint_id: name,
    };
    let id = s.queue("save_weights_external", Some(&req.model_id), op)?;
    Ok(future_response(id, Some(&req.model_id)))
}

/// `(run, segment, name)` of the checkpoint routes: the completed
/// checkpoint's row.
fn completed(
    s: &AppState,
    (run, segment, name): &(String, String, String),
) -> Result<CheckpointRow, ApiError> {
    let path = format!("tinker://{run}/{segment}/{name}");
    let kind = segment_kind(segment).ok_or_else(|| {
        ApiError::bad_request(format!(
            "checkpoint `{path}`: `{segment}` is not weights, sampler_weights or external_weights"
        ))
    })?;
    s.completed_checkpoint("checkpoint", &path, run, kind, name)
}

/// `DELETE .../checkpoints/{segment}/{name}`.
pub(crate) async fn delete(
    State(s): State<AppState>,
    UrlPath(key): UrlPath<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    let c = completed(&s, &key)?;
    remove(&s.config, &c)?;
    s.store
        .delete_checkpoint(&c.model_id, &c.checkpoint_id, &c.kind)?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
struct Ttl {
    ttl_seconds: Option<i64>,
}

/// `PUT .../ttl` `{"ttl_seconds": N | null}`.
pub(crate) async fn set_ttl(
    State(s): State<AppState>,
    UrlPath(key): UrlPath<(String, String, String)>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let req: Ttl = parse(&body)?;
    let ttl = ttl(req.ttl_seconds)?;
    let c = completed(&s, &key)?;
    s.store
        .set_checkpoint_ttl(&c.model_id, &c.checkpoint_id, &c.kind, ttl)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST .../publish`: idempotent (a 409 would make the client retry).
pub(crate) async fn publish(
    State(s): State<AppState>,
    UrlPath(key): UrlPath<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    set_public(&s, &key, true)
}

/// `DELETE .../publish`.
pub(crate) async fn unpublish(
    State(s): State<AppState>,
    UrlPath(key): UrlPath<(String, String, String)>,
) -> Result<StatusCode, ApiError> {
    set_public(&s, &key, false)
}

fn set_public(
    s: &AppState,
    key: &(String, String, String),
    public: bool,
) -> Result<StatusCode, ApiError> {
    let c = completed(s, key)?;
    s.store
        .set_checkpoint_public(&c.model_id, &c.checkpoint_id, &c.kind, public)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/v1/checkpoints`: every completed checkpoint, oldest first.
pub(crate) async fn list_all(
    State(s): State<AppState>,
    Query(page): Query<Page>,
) -> Result<Json<Value>, ApiError> {
    let (rows, total) = s.store.all_checkpoints(page.offset, page.limit)?;
    let list: Vec<Value> = rows.iter().map(checkpoint_json).collect();
    Ok(Json(json!({
        "checkpoints": list,
        "cursor": {"offset": page.offset, "limit": page.limit, "total_count": total},
    })))
}

/// The scheme and host clients reach this server at (from `Host` and
/// `X-Forwarded-Proto`, so links work behind a TLS proxy).
fn base_url(headers: &HeaderMap) -> Result<String, ApiError> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .ok_or_else(|| ApiError::bad_request("a Host header is needed to build download links"))?;
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .filter(|p| *p == "https" || *p == "http")
        .unwrap_or("http");
    Ok(format!("{scheme}://{host}"))
}

/// `GET .../external_weights/{name}/external_weights_urls`: a link per file,
/// valid for an hour.
pub(crate) async fn external_urls(
    State(s): State<AppState>,
    UrlPath(key): UrlPath<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let c = completed(&s, &key)?;
    if c.kind != EXTERNAL {
        return Err(ApiError::bad_request(format!(
            "checkpoint `{}`: only external_weights checkpoints (save_weights_external) have \
             download links",
            tinker_path(&c.model_id, &c.kind, &c.checkpoint_id)
        )));
    }
    let base = base_url(&headers)?;
    let token = format!("{}{}", new_id("dl"), new_id(""));
    let expires = s.store.create_download(
        &token,
        &c.model_id,
        &c.checkpoint_id,
        &c.kind,
        DOWNLOAD_LINK_SECONDS,
    )?;
    let dir = s
        .config
        .checkpoint_dir(&c.model_id, &c.kind, &c.checkpoint_id);
    let urls: serde_json::Map<String, Value> = dir_files(&dir)
        .into_iter()
        .map(|(rel, _)| {
            let url = format!("{base}/api/v1/downloads/{token}/{rel}");
            (rel, Value::String(url))
        })
        .collect();
    Ok(Json(json!({"urls": urls, "expires": timestamp(expires)})))
}

/// A relative file path with only normal components.
fn safe_relative(file: &str) -> Option<PathBuf> {
    let p = PathBuf::from(file);
    p.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then_some(p)
}

/// `GET /api/v1/downloads/{token}/{file}`: one file of an exported
/// checkpoint, opened by the link's token (no API key).
pub(crate) async fn download(
    State(s): State<AppState>,
    UrlPath((token, file)): UrlPath<(String, String)>,
) -> Result<Response, ApiError> {
    let (model_id, checkpoint_id, kind) = s.store.download(&token)?.ok_or_else(|| {
        ApiError::not_found("this download link is unknown or has expired; ask for new links")
    })?;
    let rel = safe_relative(&file)
        .ok_or_else(|| ApiError::bad_request(format!("file `{file}` is not a relative path")))?;
    let path = s
        .config
        .checkpoint_dir(&model_id, &kind, &checkpoint_id)
        .join(rel);
    let f = tokio::fs::File::open(&path)
        .await
        .map_err(|_| ApiError::not_found(format!("file `{file}` is not in this checkpoint")))?;
    let len = f
        .metadata()
        .await
        .map_err(|e| ApiError::internal(format!("{}: {e}", path.display())))?
        .len();
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(f));
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, len.to_string()),
        ],
        body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_follow_tinkers_range() {
        assert_eq!(ttl(None).unwrap(), None);
        assert_eq!(ttl(Some(3600)).unwrap(), Some(3600.0));
        assert!(ttl(Some(59)).unwrap_err().detail.contains("ttl_seconds 59"));
        assert!(ttl(Some(MAX_TTL_SECONDS + 1)).is_err());
    }

    #[test]
    fn download_paths_stay_inside_the_checkpoint() {
        assert!(safe_relative("adapter_model.safetensors").is_some());
        assert!(safe_relative("sub/file.json").is_some());
        assert!(safe_relative("../x").is_none());
        assert!(safe_relative("/etc/passwd").is_none());
        assert!(safe_relative("a/../../x").is_none());
    }

    #[test]
    fn files_are_listed_relative_and_sorted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("b.json"), b"{}").unwrap();
        std::fs::write(dir.path().join("sub/a.bin"), [0u8; 5]).unwrap();
        assert_eq!(
            dir_files(dir.path()),
            [("b.json".to_string(), 2), ("sub/a.bin".to_string(), 5)]
        );
    }
}
