//! Bounds on what generation requests may take from a server: how many are
//! in flight at once (more get a 429 with `Retry-After`, instead of queueing
//! without bound), and how long one may run (a 504; its sequences are aborted
//! when the handler is dropped). Request bodies are capped separately
//! ([`axum::extract::DefaultBodyLimit`], `--max-body-bytes`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use tokio::sync::Semaphore;

use crate::server::{ApiError, AppState};

/// Routes that generate (the ones these limits apply to).
const GENERATION_ROUTES: [&str; 3] = [
    "/v1/completions",
    "/v1/chat/completions",
    "/inference/v1/generate",
];

/// Seconds a client refused for load is told to wait.
const RETRY_AFTER_S: &str = "1";

/// The limits of one server.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Generation requests in flight at once (streams count until they end).
    pub max_concurrent_requests: usize,
    /// Longest a generation request may take before its answer (a stream's
    /// first event); `None`: no deadline.
    pub request_timeout: Option<Duration>,
    permits: Arc<Semaphore>,
}

impl Limits {
    /// Limits with `max_concurrent_requests` slots.
    pub fn new(max_concurrent_requests: usize, request_timeout: Option<Duration>) -> Self {
        let n = max_concurrent_requests.max(1);
        Limits {
            max_concurrent_requests: n,
            request_timeout,
            permits: Arc::new(Semaphore::new(n)),
        }
    }
}

impl Default for Limits {
    /// Effectively unbounded (for tests and in-process servers).
    fn default() -> Self {
        Limits::new(Semaphore::MAX_PERMITS, None)
    }
}

/// The middleware: a slot per generation request, held until its body ends.
pub(crate) async fn check(State(s): State<AppState>, request: Request, next: Next) -> Response {
    if !GENERATION_ROUTES.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let limits = &s.limits;
    let Ok(permit) = limits.permits.clone().try_acquire_owned() else {
        let mut r = ApiError(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "the server is busy ({} generation requests in flight, --max-concurrent-requests); \
                 retry later",
                limits.max_concurrent_requests
            ),
        )
        .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_S));
        return r;
    };
    let response = match limits.request_timeout {
        Some(t) => match tokio::time::timeout(t, next.run(request)).await {
            Ok(r) => r,
            Err(_) => {
                return ApiError(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "the request ran past the server's deadline ({}s, --request-timeout-s); \
                         its sequences were aborted",
                        t.as_secs_f64()
                    ),
                )
                .into_response()
            }
        },
        None => next.run(request).await,
    };
    // Hold the slot until the body (a stream, maybe) is done.
    let (parts, body) = response.into_parts();
    let guarded = body.into_data_stream().map(move |chunk| {
        let _held = &permit;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(guarded))
}
