//! A client for any number of OpenAI-compatible inference servers (vLLM,
//! SGLang, `skyrl serve`): token-id prompts through `/v1/completions`,
//! least-in-flight load balancing, sticky sessions (every turn of a trajectory
//! goes to the same server, so its prefix cache is reused), retries with
//! exponential backoff on connection errors, timeouts and 5xx/429, failover to
//! another server, and the weight-control endpoints on every server, in the
//! [`ControlProtocol`] the servers speak.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::openai::CompletionResponse;
use futures::future::join_all;
use serde_json::{json, Value};
use skyrl_model::{Completion, SampleStream, SamplingParams, StopReason};
use thiserror::Error;
use tracing::{debug, warn};

mod control;

/// Settings of a [`RemoteEngines`] client.
#[derive(Debug, Clone)]
pub struct RemoteEnginesConfig {
    /// Base URLs (`http://host:port`, with or without a trailing `/v1`).
    pub urls: Vec<String>,
    /// `model` field of requests; `None` asks each server's `/v1/models`.
    pub model: Option<String>,
    /// Limit for one HTTP request.
    pub request_timeout: Duration,
    /// Extra attempts after a retryable failure.
    pub max_retries: u32,
    /// First backoff; doubles per attempt (capped at 5 s).
    pub retry_backoff: Duration,
    /// How long a server that failed is avoided when others are up.
    pub cooldown: Duration,
    /// Bearer token for servers started with `--api-key`.
    pub api_key: Option<String>,
    /// Bearer token of the control endpoints (`skyrl serve --admin-key`);
    /// the API key is sent instead when unset.
    pub admin_key: Option<String>,
    /// The control endpoints the servers offer.
    pub protocol: ControlProtocol,
}

/// Which control endpoints (pause, weight loads, NCCL sync, sleep) a fleet
/// speaks; generation (`/v1/completions`) is the same for all. `skyrl serve`
/// answers both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ControlProtocol {
    /// SGLang's names: `/pause_generation`, `/continue_generation`,
    /// `/update_weights_from_disk`, `/init_weights_update_group`,
    /// `/update_weights_from_distributed`, `/get_weight_version`.
    #[default]
    Sglang,
    /// vLLM's RLHF endpoints (`VLLM_SERVER_DEV_MODE=1`) as SkyRL drives them:
    /// `/pause`, `/resume`, `/get_world_size`, `/init_weight_transfer_engine`,
    /// `/update_weights`, `/collective_rpc`, `/reset_prefix_cache`.
    Vllm,
}

impl RemoteEnginesConfig {
    /// Defaults for `urls`: 600 s timeout, 3 retries from 0.5 s, 5 s cooldown.
    pub fn new(urls: Vec<String>) -> Self {
        Self {
            urls,
            model: None,
            request_timeout: Duration::from_secs(600),
            max_retries: 3,
            retry_backoff: Duration::from_millis(500),
            cooldown: Duration::from_secs(5),
            api_key: None,
            admin_key: None,
            protocol: ControlProtocol::Sglang,
        }
    }
}

/// Why a remote call failed.
#[derive(Debug, Error)]
pub enum RemoteError {
    #[error("no inference server urls configured (generator.inference_engine.remote_urls)")]
    NoServers,
    #[error("`{0}` is not an http(s) url")]
    BadUrl(String),
    #[error("{url} rejected the request ({status}): {message}")]
    Rejected {
        url: String,
        status: u16,
        message: String,
    },
    #[error("{url} answered something that is not a completion: {message}")]
    BadResponse { url: String, message: String },
    #[error("giving up after {attempts} attempts; last error from {url}: {message}")]
    Exhausted {
        attempts: u32,
        url: String,
        message: String,
    },
    #[error("inference servers not ready after {waited:?}: {detail}")]
    NotReady { waited: Duration, detail: String },
    #[error(
        "{url} refused the key ({status}); set generator.inference_engine.api_key / \
         admin_key (or SKYRL_API_KEY / SKYRL_ADMIN_KEY) to the server's keys"
    )]
    Unauthorized { url: String, status: u16 },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// One attempt's failure: retryable (network, timeout, 5xx, 429, abort) or not.
enum Attempt {
    Retry(String),
    Fatal(RemoteError),
}

/// Counters of one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointStats {
    pub url: String,
    /// Completions returned by this server.
    pub requests: u64,
    /// Failed attempts (each retried elsewhere or later).
    pub failures: u64,
}

struct Endpoint {
    base: String,
    model: Mutex<Option<String>>,
    inflight: AtomicUsize,
    requests: AtomicU64,
    failures: AtomicU64,
    down_until: Mutex<Option<Instant>>,
}

impl Endpoint {
    fn is_down(&self, now: Instant) -> bool {
        self.down_until
            .lock()
            .expect("endpoint lock")
            .is_some_and(|t| t > now)
    }
}

/// Decrements an endpoint's in-flight count when a request ends.
struct InflightGuard<'a>(&'a AtomicUsize);

impl Drop for InflightGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A load-balancing client for a fleet of OpenAI-compatible servers.
pub struct RemoteEngines {
    http: reqwest::Client,
    endpoints: Vec<Endpoint>,
    sessions: Mutex<HashMap<String, usize>>,
    next: AtomicUsize,
    cfg: RemoteEnginesConfig,
}

/// `http://host:port` from a configured url (trailing `/` or `/v1` dropped).
fn normalize(url: &str) -> Result<String, RemoteError> {
    let u = url.trim().trim_end_matches('/');
    let u = u.strip_suffix("/v1").unwrap_or(u);
    let u = if u.contains("://") {
        u.to_string()
    } else {
        format!("http://{u}")
    };
    if !(u.starts_with("http://") || u.starts_with("https://")) || u.len() <= "http://".len() {
        return Err(RemoteError::BadUrl(url.to_string()));
    }
    Ok(u)
}

/// Per-request seed of a sampling stream (servers take one seed per request).
fn request_seed(stream: &SampleStream) -> u64 {
    stream.seed
        ^ stream
            .index
            .wrapping_add(1)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl RemoteEngines {
    /// A client for `cfg.urls` (nothing is contacted until the first call).
    pub fn new(cfg: RemoteEnginesConfig) -> Result<Self, RemoteError> {
        if cfg.urls.is_empty() {
            return Err(RemoteError::NoServers);
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(cfg.request_timeout)
            .connect_timeout(cfg.request_timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| RemoteError::Client(e.to_string()))?;
        let endpoints = cfg
            .urls
            .iter()
            .map(|u| {
                Ok(Endpoint {
                    base: normalize(u)?,
                    model: Mutex::new(cfg.model.clone()),
                    inflight: AtomicUsize::new(0),
                    requests: AtomicU64::new(0),
                    failures: AtomicU64::new(0),
                    down_until: Mutex::new(None),
                })
            })
            .collect::<Result<_, RemoteError>>()?;
        Ok(Self {
            http,
            endpoints,
            sessions: Mutex::new(HashMap::new()),
            next: AtomicUsize::new(0),
            cfg,
        })
    }

    /// Number of servers.
    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    /// Always false (a client has at least one server).
    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The control protocol the servers speak.
    pub fn protocol(&self) -> ControlProtocol {
        self.cfg.protocol
    }

    /// Base URLs of the servers.
    pub fn urls(&self) -> Vec<String> {
        self.endpoints.iter().map(|e| e.base.clone()).collect()
    }

    /// Per-server counters.
    pub fn stats(&self) -> Vec<EndpointStats> {
        self.endpoints
            .iter()
            .map(|e| EndpointStats {
                url: e.base.clone(),
                requests: e.requests.load(Ordering::SeqCst),
                failures: e.failures.load(Ordering::SeqCst),
            })
            .collect()
    }

    /// The server a session is pinned to, if it has been routed yet.
    pub fn session_server(&self, session: &str) -> Option<String> {
        let map = self.sessions.lock().expect("session lock");
        map.get(session).map(|&i| self.endpoints[i].base.clone())
    }

    /// Forgets the pins of sessions whose id starts with `prefix` (call when
    /// those trajectories end).
    pub fn forget_sessions(&self, prefix: &str) {
        self.sessions
            .lock()
            .expect("session lock")
            .retain(|id, _| !id.starts_with(prefix));
    }

    fn request(&self, method: reqwest::Method, url: String) -> reqwest::RequestBuilder {
        let r = self.http.request(method, url);
        match &self.cfg.api_key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    /// A request to a control endpoint, with the admin key (else the API key).
    fn control_request(&self, method: reqwest::Method, url: String) -> reqwest::RequestBuilder {
        let r = self.http.request(method, url);
        match self.cfg.admin_key.as_ref().or(self.cfg.api_key.as_ref()) {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    /// Chooses a server for `session`: its pinned one when up, else the up
    /// server with the fewest requests in flight (round-robin among ties),
    /// skipping `avoid` unless nothing else is left.
    fn pick(&self, session: &str, avoid: Option<usize>) -> usize {
        let now = Instant::now();
        let mut sessions = self.sessions.lock().expect("session lock");
        if let Some(&i) = sessions.get(session) {
            if Some(i) != avoid && !self.endpoints[i].is_down(now) {
                return i;
            }
        }
        let n = self.endpoints.len();
        let start = self.next.fetch_add(1, Ordering::SeqCst);
        let order: Vec<usize> = (0..n).map(|k| (start + k) % n).collect();
        let choose = |allow_down: bool, allow_avoid: bool| {
            order
                .iter()
                .copied()
                .filter(|&i| allow_down || !self.endpoints[i].is_down(now))
                .filter(|&i| allow_avoid || Some(i) != avoid)
                .min_by_key(|&i| self.endpoints[i].inflight.load(Ordering::SeqCst))
        };
        let i = choose(false, false)
            .or_else(|| choose(false, true))
            .or_else(|| choose(true, false))
            .unwrap_or(order[0]);
        sessions.insert(session.to_string(), i);
        i
    }

    /// One completion per prompt (same order), prompt `i` in session
    /// `sessions[i]`, all sent concurrently.
    pub async fn generate(
        &self,
        prompts: &[Vec<i64>],
        streams: &[SampleStream],
        params: &SamplingParams,
        sessions: &[String],
    ) -> Result<Vec<Completion>, RemoteError> {
        let calls = prompts
            .iter()
            .zip(streams)
            .zip(sessions)
            .map(|((p, s), id)| self.generate_one(p, s, params, id));
        join_all(calls).await.into_iter().collect()
    }

    async fn generate_one(
        &self,
        prompt: &[i64],
        stream: &SampleStream,
        params: &SamplingParams,
        session: &str,
    ) -> Result<Completion, RemoteError> {
        let attempts = self.cfg.max_retries + 1;
        let mut last: Option<(usize, String)> = None;
        for attempt in 0..attempts {
            if attempt > 0 {
                let backoff = self.cfg.retry_backoff * 2u32.saturating_pow(attempt - 1);
                tokio::time::sleep(backoff.min(Duration::from_secs(5))).await;
            }
            let i = self.pick(session, last.as_ref().map(|l| l.0));
            let e = &self.endpoints[i];
            e.inflight.fetch_add(1, Ordering::SeqCst);
            let _guard = InflightGuard(&e.inflight);
            match self.attempt(e, prompt, stream, params).await {
                Ok(c) => {
                    e.requests.fetch_add(1, Ordering::SeqCst);
                    *e.down_until.lock().expect("endpoint lock") = None;
                    return Ok(c);
                }
                Err(Attempt::Fatal(err)) => return Err(err),
                Err(Attempt::Retry(msg)) => {
                    e.failures.fetch_add(1, Ordering::SeqCst);
                    *e.down_until.lock().expect("endpoint lock") =
                        Some(Instant::now() + self.cfg.cooldown);
                    warn!(server = %e.base, attempt = attempt + 1, "inference request failed: {msg}");
                    last = Some((i, msg));
                }
            }
        }
        let (i, message) = last.expect("at least one attempt");
        Err(RemoteError::Exhausted {
            attempts,
            url: self.endpoints[i].base.clone(),
            message,
        })
    }

    async fn attempt(
        &self,
        e: &Endpoint,
        prompt: &[i64],
        stream: &SampleStream,
        params: &SamplingParams,
    ) -> Result<Completion, Attempt> {
        let model = e.model.lock().expect("model lock").clone();
        let mut body = json!({
            "prompt": prompt,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k,
            "min_p": params.min_p,
            "seed": request_seed(stream),
            "logprobs": 0,
            "return_token_ids": true,
            "skip_special_tokens": true,
            "ignore_eos": params.ignore_eos,
        });
        if let Some(m) = model {
            body["model"] = json!(m);
        }
        if !params.stop.is_empty() {
            body["stop"] = json!(params.stop);
        }
        if !params.stop_token_ids.is_empty() {
            body["stop_token_ids"] = json!(params.stop_token_ids);
        }
        // vLLM's defaults otherwise; sent only when set so any server takes them.
        if params.repetition_penalty != 1.0 {
            body["repetition_penalty"] = json!(params.repetition_penalty);
        }
        if params.presence_penalty != 0.0 {
            body["presence_penalty"] = json!(params.presence_penalty);
        }
        if params.frequency_penalty != 0.0 {
            body["frequency_penalty"] = json!(params.frequency_penalty);
        }
        if params.min_tokens > 0 {
            body["min_tokens"] = json!(params.min_tokens);
        }
        let url = format!("{}/v1/completions", e.base);
        let resp = self
            .request(reqwest::Method::POST, url.clone())
            .json(&body)
            .send()
            .await
            .map_err(|err| Attempt::Retry(describe(&err)))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|err| Attempt::Retry(describe(&err)))?;
        if status.is_server_error() || status.as_u16() == 429 {
            return Err(Attempt::Retry(format!("{status}: {}", short(&text))));
        }
        if !status.is_success() {
            let message = error_message(&text);
            return Err(Attempt::Fatal(RemoteError::Rejected {
                url,
                status: status.as_u16(),
                message,
            }));
        }
        let bad = |message: String| {
            Attempt::Fatal(RemoteError::BadResponse {
                url: url.clone(),
                message,
            })
        };
        let parsed: CompletionResponse =
            serde_json::from_str(&text).map_err(|err| bad(format!("{err}: {}", short(&text))))?;
        let choice = parsed
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| bad("no choices".into()))?;
        let token_ids = choice.token_ids.ok_or_else(|| {
            bad(
                "no `token_ids` in the choice; the server must support `return_token_ids` \
                 (vLLM >= 0.10.2, or skyrl serve)"
                    .into(),
            )
        })?;
        let logprobs = choice
            .logprobs
            .map(|l| l.token_logprobs)
            .ok_or_else(|| bad("no `logprobs` in the choice".into()))?;
        if logprobs.len() != token_ids.len() {
            return Err(bad(format!(
                "{} token ids but {} logprobs",
                token_ids.len(),
                logprobs.len()
            )));
        }
        let stop_reason = match choice.finish_reason.as_str() {
            "stop" => StopReason::Stop,
            "length" => StopReason::Length,
            // vLLM reports `abort` for requests cut by a pause or shutdown.
            other => return Err(Attempt::Retry(format!("finish_reason `{other}`"))),
        };
        debug!(server = %e.base, tokens = token_ids.len(), "completion");
        Ok(Completion {
            token_ids,
            logprobs,
            stop_reason,
            stop_match: None,
            top_logprobs: Vec::new(),
            prompt_logprobs: None,
            cached_prompt_tokens: 0,
        })
    }
}

fn describe(err: &reqwest::Error) -> String {
    if err.is_timeout() {
        format!("timed out: {err}")
    } else if err.is_connect() {
        format!("cannot connect: {err}")
    } else {
        err.to_string()
    }
}

/// The OpenAI-style `error.message` of an error body, else the (shortened) body.
fn error_message(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| short(text))
}

fn short(text: &str) -> String {
    let t = text.trim();
    if t.len() > 300 {
        format!("{}...", &t[..t.floor_char_boundary(300)])
    } else {
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalized_and_checked() {
        assert_eq!(normalize("http://a:1/v1/").unwrap(), "http://a:1");
        assert_eq!(
            normalize("127.0.0.1:8000").unwrap(),
            "http://127.0.0.1:8000"
        );
        assert!(normalize("ftp://x").is_err());
        assert!(matches!(
            RemoteEngines::new(RemoteEnginesConfig::new(vec![])),
            Err(RemoteError::NoServers)
        ));
    }

    #[test]
    fn request_seeds_differ_per_stream() {
        let a = request_seed(&SampleStream { seed: 1, index: 0 });
        let b = request_seed(&SampleStream { seed: 1, index: 1 });
        assert_ne!(a, b);
        assert_eq!(a, request_seed(&SampleStream { seed: 1, index: 0 }));
    }

    #[test]
    fn sessions_stick_and_spread_by_load() {
        let r = RemoteEngines::new(RemoteEnginesConfig::new(vec![
            "http://a:1".into(),
            "http://b:1".into(),
        ]))
        .unwrap();
        let first = r.pick("s0", None);
        r.endpoints[first].inflight.fetch_add(1, Ordering::SeqCst);
        let second = r.pick("s1", None);
        assert_ne!(first, second, "the idle server takes the new session");
        assert_eq!(r.pick("s0", None), first, "sessions stay pinned");
        assert_ne!(
            r.pick("s0", Some(first)),
            first,
            "failover avoids the failed one"
        );
        *r.endpoints[second].down_until.lock().unwrap() =
            Some(Instant::now() + Duration::from_secs(60));
        assert_eq!(r.pick("s2", None), first, "servers in cooldown are skipped");
    }
}
