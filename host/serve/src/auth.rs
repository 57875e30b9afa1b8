//! Bearer-key authentication of `skyrl serve`'s routes.
//!
//! Three kinds of route:
//! - open: `/health`;
//! - user: the OpenAI surface (`/v1/*`), vLLM's token route
//!   (`/inference/v1/generate`), the tokenizer, the weight version and the
//!   world size;
//!   they need `Authorization: Bearer <api key>` when an API key is set (the
//!   admin key is accepted too);
//! - admin: everything else (pause and resume and their status, weight
//!   updates, NCCL groups, sleep and wake, cache resets, RPCs, and unknown
//!   paths); they need the
//!   admin key when one is set, else the API key when that is set.
//!
//! A missing or unknown key is a 401, a user key on an admin route a 403, both
//! in OpenAI's error shape. Keys are compared in constant time and never
//! logged.

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::server::{ApiError, AppState};

/// The keys a server checks (`None`: that kind of route is not guarded by it).
#[derive(Clone, Default)]
pub struct AuthKeys {
    /// Guards the user routes.
    pub api_key: Option<String>,
    /// Guards the admin routes.
    pub admin_key: Option<String>,
}

impl std::fmt::Debug for AuthKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthKeys")
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("admin_key", &self.admin_key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl AuthKeys {
    /// Whether any key is set.
    pub fn any(&self) -> bool {
        self.api_key.is_some() || self.admin_key.is_some()
    }
}

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Open,
    User,
    Admin,
}

/// Read-only or generation routes outside `/v1/`.
const USER_ROUTES: [&str; 5] = [
    "/inference/v1/generate",
    "/tokenize",
    "/detokenize",
    "/get_weight_version",
    "/get_world_size",
];

fn access(path: &str) -> Access {
    if path == "/health" {
        Access::Open
    } else if path.starts_with("/v1/") || USER_ROUTES.contains(&path) {
        Access::User
    } else {
        Access::Admin
    }
}

fn same(given: &str, key: &str) -> bool {
    given.as_bytes().ct_eq(key.as_bytes()).into()
}

/// The middleware: passes the request on when its key fits the route.
pub(crate) async fn check(State(s): State<AppState>, request: Request, next: Next) -> Response {
    let keys = &s.auth;
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let is = |key: &Option<String>| matches!((given, key), (Some(g), Some(k)) if same(g, k));
    let refuse =
        |status: StatusCode, message: &str| ApiError(status, message.to_string()).into_response();
    match access(request.uri().path()) {
        Access::Open => {}
        Access::User => {
            if keys.api_key.is_some() && !is(&keys.api_key) && !is(&keys.admin_key) {
                return refuse(
                    StatusCode::UNAUTHORIZED,
                    "missing or wrong API key (Authorization: Bearer <key>)",
                );
            }
        }
        Access::Admin => {
            // The admin key when set, else the API key.
            let needed = if keys.admin_key.is_some() {
                &keys.admin_key
            } else {
                &keys.api_key
            };
            if needed.is_some() && !is(needed) {
                if keys.admin_key.is_some() && is(&keys.api_key) {
                    return refuse(
                        StatusCode::FORBIDDEN,
                        "this route needs the admin key; the API key only opens /v1/*",
                    );
                }
                return refuse(
                    StatusCode::UNAUTHORIZED,
                    "missing or wrong admin key (Authorization: Bearer <key>)",
                );
            }
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_open_user_or_admin() {
        assert_eq!(access("/health"), Access::Open);
        assert_eq!(access("/v1/completions"), Access::User);
        assert_eq!(access("/v1/models"), Access::User);
        assert_eq!(access("/inference/v1/generate"), Access::User);
        assert_eq!(access("/update_weights_from_disk"), Access::Admin);
        assert_eq!(access("/pause"), Access::Admin);
        assert_eq!(access("/collective_rpc"), Access::Admin);
        assert_eq!(access("/no/such/route"), Access::Admin);
    }

    #[test]
    fn keys_are_not_printed() {
        let k = AuthKeys {
            api_key: Some("secret-1".into()),
            admin_key: None,
        };
        assert!(!format!("{k:?}").contains("secret-1"));
    }
}
