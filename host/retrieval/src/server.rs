//! The HTTP side: `POST /retrieve` (Search-R1's protocol, [`crate::protocol`])
//! and `GET /health`. Every refusal is a JSON `{"error": "..."}` with a 4xx
//! status; the server keeps running.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::index::Index;
use crate::protocol::{answer, Request, RequestError};

/// Largest request body accepted (1 MiB); larger ones get 413.
pub const MAX_BODY_BYTES: usize = 1 << 20;

#[derive(Clone)]
struct AppState {
    index: Arc<Index>,
    default_topk: usize,
}

/// The routes over `index`; `default_topk` (1..=100) answers requests that
/// give no `topk`.
pub fn router(index: Arc<Index>, default_topk: usize) -> Router {
    Router::new()
        .route("/retrieve", post(retrieve))
        .route("/health", get(health))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(AppState {
            index,
            default_topk,
        })
}

/// Serves [`router`] on `listener` until the listener fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    index: Arc<Index>,
    default_topk: usize,
) -> std::io::Result<()> {
    tracing::info!(
        addr = %listener.local_addr()?,
        passages = index.len(),
        "retrieval server up"
    );
    axum::serve(listener, router(index, default_topk)).await
}

/// [`serve`] on a bound std listener, on a runtime of its own; blocks.
pub fn serve_blocking(
    listener: std::net::TcpListener,
    index: Arc<Index>,
    default_topk: usize,
) -> std::io::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async move {
            listener.set_nonblocking(true)?;
            let listener = tokio::net::TcpListener::from_std(listener)?;
            serve(listener, index, default_topk).await
        })
}

async fn health(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"status": "ok", "passages": state.index.len()}))
}

async fn retrieve(State(state): State<AppState>, body: Result<Bytes, BytesRejection>) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    let request = match Request::parse(&body, state.default_topk) {
        Ok(request) => request,
        Err(e) => {
            let status = match e {
                RequestError::Syntax(_) => StatusCode::BAD_REQUEST,
                RequestError::Invalid(_) => StatusCode::UNPROCESSABLE_ENTITY,
            };
            tracing::debug!(%status, error = %e, "refused a /retrieve request");
            return error(status, e.to_string());
        }
    };
    tracing::debug!(
        queries = request.queries.len(),
        topk = request.topk,
        "retrieve"
    );
    // Scoring walks posting lists: keep it off the async workers.
    let index = state.index.clone();
    let encoded =
        tokio::task::spawn_blocking(move || serde_json::to_vec(&answer(&index, &request))).await;
    match encoded {
        Ok(Ok(bytes)) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::{to_bytes, Body};
    use axum::http::Request as HttpRequest;
    use serde_json::Value;
    use tower_service::Service;

    use super::*;
    use crate::index::tests::index_of;

    fn app() -> Router {
        let index = index_of(&[
            ("0", "\"Paris\"\nParis is the capital of France."),
            ("1", "\"Nile\"\nThe Nile is a river in Africa."),
        ]);
        router(Arc::new(index), 3)
    }

    async fn call(app: &mut Router, method: &str, uri: &str, body: Vec<u8>) -> (StatusCode, Value) {
        let req = HttpRequest::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let resp = app.call(req).await.unwrap();
        let status = resp.status();
        let bytes = to_bytes(resp.into_body(), usize::MAX).await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn health_answers_ok() {
        let (status, body) = call(&mut app(), "GET", "/health", vec![]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["passages"], 2);
    }

    #[tokio::test]
    async fn retrieve_answers_both_shapes() {
        let mut app = app();
        let body =
            br#"{"queries": ["capital of France", "river"], "topk": 1, "return_scores": true}"#;
        let (status, v) = call(&mut app, "POST", "/retrieve", body.to_vec()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(v["result"][0][0]["document"]["id"], "0");
        assert_eq!(v["result"][1][0]["document"]["id"], "1");
        let body = br#"{"query": "Nile"}"#;
        let (status, v) = call(&mut app, "POST", "/retrieve", body.to_vec()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(v["result"][0][0]["id"], "1");
        assert!(v["result"][0][0].get("score").is_none());
    }

    #[tokio::test]
    async fn refusals_are_json_with_4xx() {
        let mut app = app();
        let (status, v) = call(&mut app, "POST", "/retrieve", b"{not json".to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(v["error"].as_str().unwrap().contains("JSON"));
        let (status, v) = call(&mut app, "POST", "/retrieve", br#"{"topk": 2}"#.to_vec()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(v["error"].as_str().unwrap().contains("`queries`"));
        let big = format!(r#"{{"query": "{}"}}"#, "a".repeat(MAX_BODY_BYTES));
        let (status, v) = call(&mut app, "POST", "/retrieve", big.into_bytes()).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(v["error"].is_string());
        // Still answering.
        let (status, _) = call(
            &mut app,
            "POST",
            "/retrieve",
            br#"{"query": "Paris"}"#.to_vec(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
}
