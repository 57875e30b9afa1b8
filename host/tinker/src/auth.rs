//! API-key authentication, as the official `tinker` client sends it: the
//! key in an `X-API-Key` header (`Authorization: Bearer` is accepted too).
//! With a key set, every route needs it except the health check and the
//! download links (which carry a token of their own). A missing or wrong
//! key is a 401 with FastAPI's `{"detail": ...}`, which the client raises
//! as `tinker.AuthenticationError` without retrying. Keys are compared in
//! constant time and never logged.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::routes::AppState;

/// The prefixes the official client accepts for a key (it refuses to send
/// any other): an API key `tml-...` or a JWT `eyJ...`.
pub const CLIENT_KEY_PREFIXES: [&str; 2] = ["tml-", "eyJ"];

/// Checks a server key at start-up: the client could not send another.
pub fn check_server_key(key: &str) -> anyhow::Result<()> {
    if key.trim() != key || key.len() < 8 {
        anyhow::bail!("--api-key: the key must be at least 8 characters, without spaces around it");
    }
    if !CLIENT_KEY_PREFIXES.iter().any(|p| key.starts_with(p)) {
        anyhow::bail!(
            "--api-key: the official tinker client only sends keys starting with `tml-` (or JWTs \
             starting with `eyJ`); choose a key like `tml-...`"
        );
    }
    Ok(())
}

/// Routes open without a key.
fn open(path: &str) -> bool {
    path == "/api/v1/healthz" || path.starts_with("/api/v1/downloads/")
}

fn same(given: &str, key: &str) -> bool {
    given.as_bytes().ct_eq(key.as_bytes()).into()
}

/// The middleware: passes the request on when it carries the key.
pub async fn check(State(s): State<AppState>, request: Request, next: Next) -> Response {
    let Some(key) = s.api_key.as_deref() else {
        return next.run(request).await;
    };
    if open(request.uri().path()) {
        return next.run(request).await;
    }
    let headers = request.headers();
    let given = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .or_else(|| {
            headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
        })
        .map(str::trim);
    match given {
        Some(g) if same(g, key) => next.run(request).await,
        _ => ApiError {
            status: axum::http::StatusCode::UNAUTHORIZED,
            detail: "missing or wrong API key (X-API-Key: set TINKER_API_KEY to the server's key)"
                .into(),
        }
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_keys_must_be_sendable_by_the_client() {
        assert!(check_server_key("tml-0123456789").is_ok());
        let e = check_server_key("secret-key-1").unwrap_err().to_string();
        assert!(e.contains("--api-key") && e.contains("tml-"), "{e}");
        assert!(check_server_key("tml-").is_err());
        assert!(check_server_key(" tml-0123456789").is_err());
    }

    #[test]
    fn only_health_and_download_links_are_open() {
        assert!(open("/api/v1/healthz"));
        assert!(open("/api/v1/downloads/dl_1/adapter_model.safetensors"));
        assert!(!open("/api/v1/create_session"));
        assert!(!open("/api/v1/checkpoints"));
    }
}
