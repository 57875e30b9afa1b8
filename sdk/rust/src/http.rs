//! Outbound HTTP from a plugin, over `wasi:http`.
//!
//! The host denies every request unless the run grants the plugin the host
//! (`environment.sandbox.<plugin>.allowed_hosts`); it follows redirects
//! itself (each hop checked), applies a per-request deadline and caps the
//! response body. Failures come back as an [`HttpError`] naming the URL.
//! Outside a wasm host every request fails with [`HttpError::Unavailable`].

use std::fmt;
use std::time::Duration;

/// An HTTP response, body fully read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code, e.g. 200.
    pub status: u16,
    /// Header (name, value) pairs as received.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as UTF-8 (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The host refused it: the URL's origin (or a redirect's) is not granted.
    Denied { url: String },
    /// No answer within the deadline.
    Timeout { url: String },
    /// The response body is larger than the host's cap.
    TooLarge { url: String, limit: Option<u64> },
    /// The server could not be reached.
    Unreachable { url: String, reason: String },
    /// The URL could not be used.
    BadUrl { url: String, reason: String },
    /// Anything else the transport reported.
    Other { url: String, reason: String },
    /// Not running inside a wasm host.
    Unavailable,
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied { url } => write!(
                f,
                "request to {url} denied: its host is not in this plugin's allowed_hosts \
                 (grant it with environment.sandbox.<plugin>.allowed_hosts)"
            ),
            Self::Timeout { url } => write!(f, "request to {url} timed out"),
            Self::TooLarge { url, limit } => match limit {
                Some(n) => write!(f, "response from {url} is larger than {n} bytes"),
                None => write!(f, "response from {url} is too large"),
            },
            Self::Unreachable { url, reason } => write!(f, "cannot reach {url}: {reason}"),
            Self::BadUrl { url, reason } => write!(f, "bad URL {url:?}: {reason}"),
            Self::Other { url, reason } => write!(f, "request to {url} failed: {reason}"),
            Self::Unavailable => write!(f, "HTTP needs the skyrl wasm host"),
        }
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for crate::Error {
    fn from(error: HttpError) -> Self {
        crate::Error::failed(error)
    }
}

/// One request to send.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Absolute `http://` or `https://` URL.
    pub url: String,
    /// Header (name, value) pairs.
    pub headers: Vec<(String, String)>,
    /// Body bytes (empty: none).
    pub body: Vec<u8>,
    /// Deadline for the first response byte (the host's own deadline and the
    /// plugin call's still apply).
    pub timeout: Option<Duration>,
}

impl Request {
    /// A `GET` of `url`.
    pub fn get(url: impl Into<String>) -> Self {
        Self {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout: None,
        }
    }

    /// A `POST` of `value` as JSON to `url`.
    pub fn post_json(url: impl Into<String>, value: &serde_json::Value) -> Self {
        Self {
            method: "POST".into(),
            url: url.into(),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("accept".into(), "application/json".into()),
            ],
            body: value.to_string().into_bytes(),
            timeout: None,
        }
    }

    /// This request with a deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sends it and reads the whole response.
    pub fn send(&self) -> Result<Response, HttpError> {
        imp::send(self)
    }
}

/// `GET url`.
pub fn get(url: &str) -> Result<Response, HttpError> {
    Request::get(url).send()
}

/// `POST url` with a JSON body.
pub fn post_json(url: &str, value: &serde_json::Value) -> Result<Response, HttpError> {
    Request::post_json(url, value).send()
}

/// Splits `scheme://authority/path?query`.
fn split_url(url: &str) -> Result<(&str, &str, &str), HttpError> {
    let bad = |reason: &str| HttpError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("needs http:// or https://"))?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(bad("only http and https are supported"));
    }
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    if authority.is_empty() {
        return Err(bad("no host"));
    }
    Ok((scheme, authority, if path.is_empty() { "/" } else { path }))
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::{split_url, HttpError, Request, Response};
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
    };
    use wasip2::io::streams::StreamError;

    /// Largest write `blocking-write-and-flush` accepts.
    const WRITE_CHUNK: usize = 4096;

    pub(super) fn send(request: &Request) -> Result<Response, HttpError> {
        let url = request.url.clone();
        let other = |reason: String| HttpError::Other {
            url: url.clone(),
            reason,
        };
        let (scheme, authority, path) = split_url(&request.url)?;
        let headers: Vec<(String, Vec<u8>)> = request
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.as_bytes().to_vec()))
            .collect();
        let fields = Fields::from_list(&headers).map_err(|e| other(format!("header: {e:?}")))?;
        let outgoing = OutgoingRequest::new(fields);
        let method = match request.method.to_ascii_uppercase().as_str() {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "HEAD" => Method::Head,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            m => Method::Other(m.to_string()),
        };
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "https" => Scheme::Https,
            _ => Scheme::Http,
        };
        outgoing
            .set_method(&method)
            .and_then(|()| outgoing.set_scheme(Some(&scheme)))
            .and_then(|()| outgoing.set_authority(Some(authority)))
            .and_then(|()| outgoing.set_path_with_query(Some(path)))
            .map_err(|()| HttpError::BadUrl {
                url: url.clone(),
                reason: "rejected by wasi:http".into(),
            })?;
        let body = outgoing
            .body()
            .map_err(|()| other("no request body".into()))?;
        let options = request.timeout.map(|t| {
            let options = RequestOptions::new();
            let nanos = t.as_nanos().min(u64::MAX as u128) as u64;
            let _ = options.set_connect_timeout(Some(nanos));
            let _ = options.set_first_byte_timeout(Some(nanos));
            options
        });
        let pending = outgoing_handler::handle(outgoing, options).map_err(|e| error(&url, e))?;
        // The host may answer (a refusal, say) before taking the body: then
        // writing fails, and the response says why.
        let sent = write_body(body, &request.body);
        pending.subscribe().block();
        let response = match pending.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(e))) => return Err(error(&url, e)),
            Some(Err(())) | None => return Err(other("response already taken".into())),
        };
        sent.map_err(other)?;
        let status = response.status();
        let headers = response.headers().entries();
        let incoming = response
            .consume()
            .map_err(|()| other("no response body".into()))?;
        let stream = incoming
            .stream()
            .map_err(|()| other("no response body stream".into()))?;
        let mut bytes = Vec::new();
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    let code = wasip2::http::types::http_error_code(&e);
                    return Err(match code {
                        Some(code) => error(&url, code),
                        None => other(e.to_debug_string()),
                    });
                }
            }
        }
        Ok(Response {
            status,
            headers,
            body: bytes,
        })
    }

    /// Writes `bytes` into the request body and finishes it.
    fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), String> {
        if !bytes.is_empty() {
            let stream = body.write().map_err(|()| "no body stream".to_string())?;
            for chunk in bytes.chunks(WRITE_CHUNK) {
                stream
                    .blocking_write_and_flush(chunk)
                    .map_err(|e| format!("writing the body: {e:?}"))?;
            }
        }
        OutgoingBody::finish(body, None).map_err(|e| format!("finishing the body: {e:?}"))
    }

    fn error(url: &str, code: ErrorCode) -> HttpError {
        let url = url.to_string();
        match code {
            ErrorCode::HttpRequestDenied => HttpError::Denied { url },
            ErrorCode::HttpResponseTimeout
            | ErrorCode::ConnectionTimeout
            | ErrorCode::ConnectionReadTimeout
            | ErrorCode::ConnectionWriteTimeout => HttpError::Timeout { url },
            ErrorCode::HttpResponseBodySize(limit) => HttpError::TooLarge { url, limit },
            ErrorCode::ConnectionRefused
            | ErrorCode::DestinationNotFound
            | ErrorCode::DestinationUnavailable
            | ErrorCode::DnsError(_)
            | ErrorCode::DnsTimeout => HttpError::Unreachable {
                url,
                reason: format!("{code:?}"),
            },
            ErrorCode::HttpRequestUriInvalid => HttpError::BadUrl {
                url,
                reason: "invalid URI".into(),
            },
            ErrorCode::InternalError(Some(reason)) => HttpError::Other { url, reason },
            other => HttpError::Other {
                url,
                reason: format!("{other:?}"),
            },
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::{split_url, HttpError, Request, Response};

    pub(super) fn send(request: &Request) -> Result<Response, HttpError> {
        split_url(&request.url)?;
        Err(HttpError::Unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        assert_eq!(
            split_url("http://127.0.0.1:8000/retrieve?x=1").unwrap(),
            ("http", "127.0.0.1:8000", "/retrieve?x=1")
        );
        assert_eq!(
            split_url("https://example.com").unwrap(),
            ("https", "example.com", "/")
        );
        assert!(matches!(
            split_url("ftp://x/"),
            Err(HttpError::BadUrl { .. })
        ));
        assert!(matches!(split_url("x"), Err(HttpError::BadUrl { .. })));
    }

    #[test]
    fn outside_a_host_requests_fail_plainly() {
        assert_eq!(
            get("http://127.0.0.1:1/").unwrap_err(),
            HttpError::Unavailable
        );
    }
}
