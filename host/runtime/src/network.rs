//! Outbound HTTP as a capability: plugins reach only the hosts their policy
//! grants, through `wasi:http/outgoing-handler` served by the host with
//! reqwest. Denied by default.
//!
//! A grant is a list of Spin-style patterns (`http://127.0.0.1:8000`,
//! `https://*.example.com`, `http://localhost:*`). Every request, and every
//! redirect hop (followed here, so a granted host cannot bounce a plugin to
//! one that is not), is checked against it; each request has a deadline
//! (never past the plugin call's own) and a cap on the response body.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime_wasi_http::{Error as HttpError, WasiBody, WasiHttpHooks};

/// Most redirects followed for one request.
const MAX_REDIRECTS: usize = 10;

/// Which hosts a plugin may reach over HTTP, and how much it may fetch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Granted origins, e.g. `http://127.0.0.1:8000`, `https://*.example.com`,
    /// `http://localhost:*`, `*://search.internal:8080`. Empty: no network.
    pub allowed_hosts: Vec<String>,
    /// Deadline per request (connect, send, whole response), milliseconds;
    /// never later than the plugin call's own deadline.
    pub request_timeout_ms: u64,
    /// Largest response body accepted, bytes.
    pub max_response_bytes: usize,
}

impl Default for NetworkPolicy {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            request_timeout_ms: 30_000,
            max_response_bytes: 8 << 20,
        }
    }
}

/// One granted origin pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPattern {
    /// `None`: any of http and https.
    scheme: Option<String>,
    host: HostMatch,
    /// `None`: any port.
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostMatch {
    Any,
    Exact(String),
    /// `*.example.com`: subdomains of `example.com` (not the bare domain).
    Suffix(String),
}

impl HostPattern {
    /// Parses `scheme://host[:port]`; scheme `http`, `https` or `*`, host a
    /// name, an IP, `*` or `*.domain`, port a number or `*` (omitted: the
    /// scheme's default). Paths are refused: grants are per origin.
    pub fn parse(pattern: &str) -> Result<Self, String> {
        let bad = |why: &str| Err(format!("allowed_hosts entry {pattern:?}: {why}"));
        let Some((scheme, rest)) = pattern.split_once("://") else {
            return bad("needs a scheme, e.g. http://127.0.0.1:8000 or https://*.example.com");
        };
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" | "https" => Some(scheme.to_ascii_lowercase()),
            "*" => None,
            _ => return bad("the scheme must be http, https or *"),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') || rest.contains('?') || rest.contains('#') {
            return bad("grants are origins (scheme://host:port), not paths");
        }
        if rest.contains('@') {
            return bad("credentials do not belong in a grant");
        }
        let Some((host, port)) = split_host_port(rest) else {
            return bad("bad host:port");
        };
        let port = match port {
            None => match scheme.as_deref() {
                Some("http") => Some(80),
                Some("https") => Some(443),
                _ => return bad("a `*://` grant needs an explicit port (or `:*`)"),
            },
            Some("*") => None,
            Some(p) => match p.parse::<u16>() {
                Ok(p) => Some(p),
                Err(_) => return bad("the port must be a number or *"),
            },
        };
        let host = host.to_ascii_lowercase();
        let host = if host == "*" {
            HostMatch::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            if domain.is_empty() || domain.contains('*') {
                return bad("a wildcard host is `*` or `*.domain`");
            }
            HostMatch::Suffix(domain.to_string())
        } else if host.is_empty() || host.contains('*') {
            return bad("a wildcard host is `*` or `*.domain`");
        } else {
            HostMatch::Exact(host)
        };
        Ok(Self { scheme, host, port })
    }

    /// Whether `url` is inside this grant.
    pub fn matches(&self, url: &reqwest::Url) -> bool {
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return false;
        }
        if self.scheme.as_deref().is_some_and(|s| s != scheme) {
            return false;
        }
        let Some(port) = url.port_or_known_default() else {
            return false;
        };
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match &self.host {
            HostMatch::Any => true,
            HostMatch::Exact(want) => host.eq_ignore_ascii_case(want.trim_matches(['[', ']'])),
            HostMatch::Suffix(domain) => host
                .to_ascii_lowercase()
                .strip_suffix(domain.as_str())
                .is_some_and(|head| head.ends_with('.') && head.len() > 1),
        }
    }
}

/// `host[:port]`, with bracketed IPv6 hosts.
fn split_host_port(text: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let end = rest.find(']')?;
        let after = &rest[end + 1..];
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        return Some((&text[..end + 2], port));
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => Some((host, Some(port))),
        Some(_) => None,
        None => Some((text, None)),
    }
}

/// A compiled [`NetworkPolicy`], shared by the instances of one plugin.
#[derive(Debug)]
pub(crate) struct NetworkGrant {
    patterns: Vec<HostPattern>,
    timeout: Duration,
    max_response_bytes: usize,
}

impl NetworkGrant {
    /// Compiles `policy`; the error names the first bad pattern or limit.
    pub(crate) fn new(policy: &NetworkPolicy) -> Result<Self, String> {
        let patterns = policy
            .allowed_hosts
            .iter()
            .map(|p| HostPattern::parse(p))
            .collect::<Result<_, _>>()?;
        if policy.request_timeout_ms == 0 {
            return Err("request_timeout_ms must be positive".into());
        }
        if policy.max_response_bytes == 0 {
            return Err("max_response_bytes must be positive".into());
        }
        Ok(Self {
            patterns,
            timeout: Duration::from_millis(policy.request_timeout_ms),
            max_response_bytes: policy.max_response_bytes,
        })
    }

    fn allows(&self, url: &reqwest::Url) -> bool {
        self.patterns.iter().any(|p| p.matches(url))
    }
}

/// The `wasi:http` hooks of one instance: its plugin's grant and the
/// deadline of the call in progress.
pub(crate) struct HttpHooks {
    pub(crate) plugin: Arc<str>,
    pub(crate) grant: Option<Arc<NetworkGrant>>,
    /// When the current plugin call must end (set as each call starts).
    pub(crate) call_deadline: Instant,
}

/// The process's one HTTP client: redirects are followed by [`fetch`],
/// which checks each hop against the grant.
fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("building the plugin HTTP client")
    })
}

type SendFuture = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<WasiBody>,
                Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> SendFuture {
        let plugin = self.plugin.clone();
        let grant = self.grant.clone();
        let left = self.call_deadline.saturating_duration_since(Instant::now());
        Box::new(async move {
            let Some(grant) = grant else {
                tracing::warn!(
                    target: "skyrl::plugin",
                    plugin = &*plugin,
                    url = %request.uri(),
                    "HTTP request denied: no host is granted to this plugin"
                );
                return Err(HttpError::HttpRequestDenied);
            };
            let timeout = grant.timeout.min(left);
            let response = tokio::time::timeout(timeout, fetch(&plugin, &grant, request))
                .await
                .map_err(|_| HttpError::HttpResponseTimeout)??;
            let done: Pin<Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>> =
                Box::pin(async { Ok(()) });
            Ok((
                response,
                Box::new(done) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

/// Sends `request` and the redirects it leads to, each hop checked against
/// `grant`, and reads the final body up to the grant's cap.
async fn fetch(
    plugin: &str,
    grant: &NetworkGrant,
    request: http::Request<WasiBody>,
) -> wasmtime_wasi_http::Result<http::Response<WasiBody>> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    let mut method = reqwest::Method::from_bytes(parts.method.as_str().as_bytes())
        .map_err(|_| HttpError::HttpRequestMethodInvalid)?;
    let mut url = reqwest::Url::parse(&parts.uri.to_string())
        .map_err(|_| HttpError::HttpRequestUriInvalid)?;
    // reqwest sets these from the URL and the body it is given.
    let mut headers = parts.headers;
    for name in [
        http::header::HOST,
        http::header::CONTENT_LENGTH,
        http::header::TRANSFER_ENCODING,
    ] {
        headers.remove(name);
    }
    let mut body = Some(body);
    for _hop in 0..=MAX_REDIRECTS {
        if !grant.allows(&url) {
            tracing::warn!(
                target: "skyrl::plugin",
                plugin,
                %url,
                "HTTP request denied: the host is not in this plugin's allowed_hosts"
            );
            return Err(HttpError::HttpRequestDenied);
        }
        let mut builder = client()
            .request(method.clone(), url.clone())
            .headers(headers.clone());
        if let Some(body) = &body {
            builder = builder.body(body.clone());
        }
        let response = builder.send().await.map_err(send_error)?;
        let status = response.status();
        let location = response
            .headers()
            .get(http::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .and_then(|l| url.join(l).ok());
        match (status.is_redirection(), location) {
            (true, Some(next)) => {
                // 303, and 301/302 after a POST, become a GET without a body
                // (what browsers and reqwest do); 307/308 resend as is.
                let keep = matches!(status.as_u16(), 307 | 308)
                    || (method == reqwest::Method::GET || method == reqwest::Method::HEAD)
                        && status.as_u16() != 303;
                if !keep {
                    method = reqwest::Method::GET;
                    body = None;
                    headers.remove(http::header::CONTENT_TYPE);
                }
                if next.origin() != url.origin() {
                    headers.remove(http::header::AUTHORIZATION);
                    headers.remove(http::header::COOKIE);
                }
                url = next;
            }
            _ => return read_response(response, grant.max_response_bytes).await,
        }
    }
    Err(HttpError::LoopDetected)
}

/// Buffers a response body of at most `cap` bytes.
async fn read_response(
    mut response: reqwest::Response,
    cap: usize,
) -> wasmtime_wasi_http::Result<http::Response<WasiBody>> {
    let cap64 = cap as u64;
    if response.content_length().is_some_and(|n| n > cap64) {
        return Err(HttpError::HttpResponseBodySize(Some(cap64)));
    }
    let mut builder = http::Response::builder().status(response.status().as_u16());
    for (name, value) in response.headers() {
        if name != http::header::TRANSFER_ENCODING {
            builder = builder.header(name, value);
        }
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(send_error)? {
        if body.len() + chunk.len() > cap {
            return Err(HttpError::HttpResponseBodySize(Some(cap64)));
        }
        body.extend_from_slice(&chunk);
    }
    let body = Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed_unsync();
    builder
        .body(body)
        .map_err(|e| HttpError::InternalError(Some(e.to_string())))
}

fn send_error(err: reqwest::Error) -> HttpError {
    if err.is_timeout() {
        HttpError::ConnectionTimeout
    } else if err.is_connect() {
        HttpError::ConnectionRefused
    } else {
        HttpError::InternalError(Some(err.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn exact_origin_matches_only_itself() {
        let p = HostPattern::parse("http://127.0.0.1:8000").unwrap();
        assert!(p.matches(&url("http://127.0.0.1:8000/retrieve")));
        assert!(!p.matches(&url("http://127.0.0.1:8001/retrieve")));
        assert!(!p.matches(&url("https://127.0.0.1:8000/")));
        assert!(!p.matches(&url("http://127.0.0.2:8000/")));
    }

    #[test]
    fn default_ports_follow_the_scheme() {
        let p = HostPattern::parse("https://example.com").unwrap();
        assert!(p.matches(&url("https://example.com/a")));
        assert!(p.matches(&url("https://EXAMPLE.com:443/a")));
        assert!(!p.matches(&url("https://example.com:8443/a")));
        assert!(!p.matches(&url("http://example.com/a")));
    }

    #[test]
    fn wildcards_cover_subdomains_ports_and_schemes() {
        let sub = HostPattern::parse("https://*.example.com").unwrap();
        assert!(sub.matches(&url("https://api.example.com/")));
        assert!(!sub.matches(&url("https://example.com/")));
        assert!(!sub.matches(&url("https://badexample.com/")));
        let port = HostPattern::parse("http://localhost:*").unwrap();
        assert!(port.matches(&url("http://localhost:1234/")));
        assert!(port.matches(&url("http://localhost/")));
        let scheme = HostPattern::parse("*://search:8080").unwrap();
        assert!(scheme.matches(&url("http://search:8080/")));
        assert!(scheme.matches(&url("https://search:8080/")));
        let v6 = HostPattern::parse("http://[::1]:9000").unwrap();
        assert!(v6.matches(&url("http://[::1]:9000/x")));
    }

    #[test]
    fn malformed_grants_are_refused_by_name() {
        for bad in [
            "127.0.0.1:8000",
            "ftp://host",
            "http://host/path",
            "http://host:port",
            "http://a*b.com",
            "*://host",
            "http://user@host",
        ] {
            let err = HostPattern::parse(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}
