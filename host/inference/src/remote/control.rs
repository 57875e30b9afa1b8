//! Health and weight control on every server of a [`RemoteEngines`] fleet:
//! readiness (`/health`), and the calls a weight sync makes (pause, reload
//! from disk, resume, versions, KV-cache release), sent to all servers at once
//! and never retried, in the fleet's [`ControlProtocol`].

use std::net::{IpAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::{json, Value};

use super::{describe, error_message, ControlProtocol, Endpoint, RemoteEngines, RemoteError};

/// Why a server is not ready yet, or never will be.
enum Probe {
    NotYet(String),
    /// The server refused the key (url, status).
    Unauthorized(String, u16),
}

/// A 401 or 403: the server will not take this key.
fn refused_key(resp: &reqwest::Response, base: &str) -> Result<(), Probe> {
    let status = resp.status().as_u16();
    if status == 401 || status == 403 {
        return Err(Probe::Unauthorized(base.to_string(), status));
    }
    Ok(())
}

impl RemoteEngines {
    /// Waits until every server answers `/health` (and learns its model name).
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), RemoteError> {
        let start = Instant::now();
        loop {
            let checks = join_all(self.endpoints.iter().map(|e| self.probe(e))).await;
            let mut failed = Vec::new();
            for check in checks {
                match check {
                    Ok(()) => {}
                    // A server that refuses the key will not accept it later.
                    Err(Probe::Unauthorized(url, status)) => {
                        return Err(RemoteError::Unauthorized { url, status })
                    }
                    Err(Probe::NotYet(detail)) => failed.push(detail),
                }
            }
            if failed.is_empty() {
                return Ok(());
            }
            if start.elapsed() >= timeout {
                return Err(RemoteError::NotReady {
                    waited: start.elapsed(),
                    detail: failed.join("; "),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn probe(&self, e: &Endpoint) -> Result<(), Probe> {
        let not_yet = |m: String| Probe::NotYet(m);
        let health = self
            .request(reqwest::Method::GET, format!("{}/health", e.base))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|err| not_yet(format!("{}: {err}", e.base)))?;
        if !health.status().is_success() {
            return Err(not_yet(format!(
                "{}: /health answered {}",
                e.base,
                health.status()
            )));
        }
        // The keys are checked on every probe: a user route, and a read-only
        // control route (`skyrl serve` guards it with the admin key; servers
        // without it answer 404).
        let models = self
            .request(reqwest::Method::GET, format!("{}/v1/models", e.base))
            .send()
            .await
            .map_err(|err| not_yet(format!("{}: {err}", e.base)))?;
        refused_key(&models, &e.base)?;
        let paused = self
            .control_request(reqwest::Method::GET, format!("{}/is_paused", e.base))
            .send()
            .await
            .map_err(|err| not_yet(format!("{}: {err}", e.base)))?;
        refused_key(&paused, &e.base)?;
        if e.model.lock().expect("model lock").is_some() {
            return Ok(());
        }
        let models: Value = models
            .json()
            .await
            .map_err(|err| not_yet(format!("{}: /v1/models: {err}", e.base)))?;
        let id = models["data"][0]["id"]
            .as_str()
            .ok_or_else(|| not_yet(format!("{}: /v1/models lists no model", e.base)))?;
        *e.model.lock().expect("model lock") = Some(id.to_string());
        Ok(())
    }

    /// POSTs `body` to `path` on every server concurrently (no retries: weight
    /// control must not be applied twice); returns each JSON answer in order
    /// (`null` for an empty body).
    pub async fn broadcast(&self, path: &str, body: Value) -> Result<Vec<Value>, RemoteError> {
        self.broadcast_with(path, |_| body.clone()).await
    }

    /// Like [`RemoteEngines::broadcast`] with a body per server (`body(i)` for server `i`).
    pub async fn broadcast_with(
        &self,
        path: &str,
        body: impl Fn(usize) -> Value,
    ) -> Result<Vec<Value>, RemoteError> {
        let calls = self.endpoints.iter().enumerate().map(|(i, e)| {
            let url = format!("{}{path}", e.base);
            let body = body(i);
            self.call(reqwest::Method::POST, url, Some(body))
        });
        join_all(calls).await.into_iter().collect()
    }

    /// One control call (no retries); the JSON answer, `null` when empty.
    async fn call(
        &self,
        method: reqwest::Method,
        url: String,
        body: Option<Value>,
    ) -> Result<Value, RemoteError> {
        let mut req = self.control_request(method, url.clone());
        if let Some(b) = &body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|err| RemoteError::Exhausted {
            attempts: 1,
            url: url.clone(),
            message: describe(&err),
        })?;
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        if !status.is_success() {
            let message = error_message(&text);
            return Err(RemoteError::Rejected {
                url,
                status: status.as_u16(),
                message,
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|err| RemoteError::BadResponse {
            url,
            message: err.to_string(),
        })
    }

    /// GETs `path` from every server; each JSON answer in order.
    pub async fn query_all(&self, path: &str) -> Result<Vec<Value>, RemoteError> {
        let calls = self
            .endpoints
            .iter()
            .map(|e| self.call(reqwest::Method::GET, format!("{}{path}", e.base), None));
        join_all(calls).await.into_iter().collect()
    }

    /// Pauses generation on every server (vLLM: `keep` mode, as SkyRL does:
    /// requests in flight are frozen and continue after [`RemoteEngines::resume`]).
    pub async fn pause(&self) -> Result<(), RemoteError> {
        let path = match self.cfg.protocol {
            ControlProtocol::Sglang => "/pause_generation",
            ControlProtocol::Vllm => "/pause?mode=keep&clear_cache=false",
        };
        self.broadcast(path, json!({})).await.map(drop)
    }

    /// Resumes generation on every server.
    pub async fn resume(&self) -> Result<(), RemoteError> {
        let path = match self.cfg.protocol {
            ControlProtocol::Sglang => "/continue_generation",
            ControlProtocol::Vllm => "/resume",
        };
        self.broadcast(path, json!({})).await.map(drop)
    }

    /// Every server reloads its weights from `model_path` (a Hugging Face
    /// checkpoint directory all servers can read); returns their weight
    /// versions. vLLM servers reload through `/collective_rpc reload_weights`
    /// and then drop their prefix caches (KV of the old weights).
    pub async fn update_weights_from_disk(
        &self,
        model_path: &Path,
    ) -> Result<Vec<Option<u64>>, RemoteError> {
        let answers = match self.cfg.protocol {
            ControlProtocol::Sglang => {
                self.broadcast(
                    "/update_weights_from_disk",
                    json!({"model_path": model_path}),
                )
                .await?
            }
            ControlProtocol::Vllm => {
                let answers = self
                    .broadcast(
                        "/collective_rpc",
                        json!({"method": "reload_weights", "kwargs": {"weights_path": model_path}}),
                    )
                    .await?;
                self.reset_prefix_cache().await?;
                answers
            }
        };
        Ok(answers
            .iter()
            .map(|a| a["weight_version"].as_u64())
            .collect())
    }

    /// Every server drops its prefix cache, running requests' KV included
    /// (after a weight change). Same path in both protocols (`skyrl serve`
    /// and vLLM); SGLang calls it `/flush_cache`.
    pub async fn reset_prefix_cache(&self) -> Result<(), RemoteError> {
        self.broadcast(
            "/reset_prefix_cache?reset_running_requests=true",
            json!({"reset_running_requests": true}),
        )
        .await
        .map(drop)
    }

    /// Every server releases accelerator memory (vLLM `level` 1: weights to
    /// CPU and KV cache freed; 2: both discarded). Sent both as vLLM's query
    /// parameter and as the JSON body older SkyRL servers read.
    pub async fn sleep(&self, level: u8) -> Result<(), RemoteError> {
        self.broadcast(&format!("/sleep?level={level}"), json!({"level": level}))
            .await
            .map(drop)
    }

    /// Every server takes its memory back (`tags`: `weights`, `kv_cache`;
    /// empty for all).
    pub async fn wake_up(&self, tags: &[&str]) -> Result<(), RemoteError> {
        let query: Vec<String> = tags.iter().map(|t| format!("tags={t}")).collect();
        let path = if query.is_empty() {
            "/wake_up".to_string()
        } else {
            format!("/wake_up?{}", query.join("&"))
        };
        let body = if tags.is_empty() {
            json!({})
        } else {
            json!({ "tags": tags })
        };
        self.broadcast(&path, body).await.map(drop)
    }

    /// Each server's NCCL world size (`/get_world_size`: its workers, TP x PP x DP).
    pub async fn world_sizes(&self) -> Result<Vec<usize>, RemoteError> {
        let answers = self.query_all("/get_world_size").await?;
        answers
            .iter()
            .zip(&self.endpoints)
            .map(|(a, e)| {
                a["world_size"]
                    .as_u64()
                    .filter(|&w| w > 0)
                    .map(|w| w as usize)
                    .ok_or_else(|| RemoteError::BadResponse {
                        url: format!("{}/get_world_size", e.base),
                        message: format!("no positive `world_size` in {a}"),
                    })
            })
            .collect()
    }

    /// This host's address as the first server sees it (the interface the
    /// route to it leaves from), for rendezvous the servers connect back to.
    pub fn local_address(&self) -> Result<IpAddr, RemoteError> {
        let base = &self.endpoints[0].base;
        let host_port = base
            .split("://")
            .nth(1)
            .unwrap_or(base)
            .split('/')
            .next()
            .unwrap_or_default();
        let target = if host_port.contains(':') {
            host_port.to_string()
        } else {
            format!("{host_port}:80")
        };
        let socket = UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.connect(&target).map(|()| s))
            .and_then(|s| s.local_addr())
            .map_err(|e| RemoteError::BadUrl(format!("{base} (cannot route to it: {e})")))?;
        Ok(socket.ip())
    }

    /// Each server's `/get_weight_version` (`None` where the server has none).
    pub async fn weight_versions(&self) -> Vec<Option<u64>> {
        let calls = self.endpoints.iter().map(|e| async move {
            let v: Value = self
                .request(
                    reqwest::Method::GET,
                    format!("{}/get_weight_version", e.base),
                )
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            v["weight_version"].as_u64()
        });
        join_all(calls).await
    }
}
