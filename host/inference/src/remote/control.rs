//! Health and weight control on every server of a [`RemoteEngines`] fleet:
//! readiness (`/health`), and the calls a weight sync makes (pause, reload
//! from disk, resume, versions), sent to all servers at once and never retried.

use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::{json, Value};

use super::{describe, error_message, Endpoint, RemoteEngines, RemoteError};

impl RemoteEngines {
    /// Waits until every server answers `/health` (and learns its model name).
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), RemoteError> {
        let start = Instant::now();
        loop {
            let checks = join_all(self.endpoints.iter().map(|e| self.probe(e))).await;
            let failed: Vec<String> = checks.into_iter().filter_map(Result::err).collect();
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

    async fn probe(&self, e: &Endpoint) -> Result<(), String> {
        let health = self
            .request(reqwest::Method::GET, format!("{}/health", e.base))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|err| format!("{}: {err}", e.base))?;
        if !health.status().is_success() {
            return Err(format!("{}: /health answered {}", e.base, health.status()));
        }
        if e.model.lock().expect("model lock").is_some() {
            return Ok(());
        }
        let models: Value = self
            .request(reqwest::Method::GET, format!("{}/v1/models", e.base))
            .send()
            .await
            .map_err(|err| format!("{}: {err}", e.base))?
            .json()
            .await
            .map_err(|err| format!("{}: /v1/models: {err}", e.base))?;
        let id = models["data"][0]["id"]
            .as_str()
            .ok_or_else(|| format!("{}: /v1/models lists no model", e.base))?;
        *e.model.lock().expect("model lock") = Some(id.to_string());
        Ok(())
    }

    /// POSTs `body` to `path` on every server concurrently (no retries: weight
    /// control must not be applied twice); returns each JSON answer in order.
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
            async move {
                let resp = self
                    .request(reqwest::Method::POST, url.clone())
                    .json(&body)
                    .send()
                    .await
                    .map_err(|err| RemoteError::Exhausted {
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
                serde_json::from_str(&text).map_err(|err| RemoteError::BadResponse {
                    url,
                    message: err.to_string(),
                })
            }
        });
        join_all(calls).await.into_iter().collect()
    }

    /// Pauses generation on every server.
    pub async fn pause(&self) -> Result<(), RemoteError> {
        self.broadcast("/pause_generation", json!({}))
            .await
            .map(drop)
    }

    /// Resumes generation on every server.
    pub async fn resume(&self) -> Result<(), RemoteError> {
        self.broadcast("/continue_generation", json!({}))
            .await
            .map(drop)
    }

    /// Every server reloads its weights from `model_path` (a Hugging Face
    /// checkpoint directory all servers can read); returns their weight versions.
    pub async fn update_weights_from_disk(
        &self,
        model_path: &std::path::Path,
    ) -> Result<Vec<Option<u64>>, RemoteError> {
        let answers = self
            .broadcast(
                "/update_weights_from_disk",
                json!({"model_path": model_path}),
            )
            .await?;
        Ok(answers
            .iter()
            .map(|a| a["weight_version"].as_u64())
            .collect())
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
