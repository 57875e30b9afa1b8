//! The `mlflow` tracker over MLflow's REST API (`/api/2.0/mlflow/...`):
//! experiment `trainer.project_name`, run `trainer.run_name`, the config
//! flattened into params, each step's metrics as one `runs/log-batch`, the end
//! as `runs/update`. Server from `$MLFLOW_TRACKING_URI` (http or https), auth
//! from `$MLFLOW_TRACKING_TOKEN` or `$MLFLOW_TRACKING_USERNAME`/`PASSWORD`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use super::delivery::{Sink, Started};
use super::{RunInfo, RunStatus};
use crate::metrics::StepMetrics;

/// The variable naming the tracking server.
pub const URI_VAR: &str = "MLFLOW_TRACKING_URI";
/// MLflow's limits per `log-batch` request.
const MAX_PARAMS_PER_BATCH: usize = 100;
const MAX_METRICS_PER_BATCH: usize = 1000;
/// MLflow's longest param value.
const MAX_PARAM_CHARS: usize = 6000;

/// Connects, finds or creates the experiment, and creates (or, when resuming,
/// re-opens) the run.
pub fn start(info: &RunInfo, resume_id: Option<String>) -> Result<Started> {
    let uri = std::env::var(URI_VAR).map_err(|_| {
        anyhow!(
            "${URI_VAR} is not set: start a server (`mlflow server --port 5000`) and set \
             {URI_VAR}=http://127.0.0.1:5000"
        )
    })?;
    let client = Client::new(&uri)?;
    if let Some(id) = resume_id {
        if client.get("runs/get", &[("run_id", &id)]).is_ok() {
            client.post("runs/update", &json!({"run_id": id, "status": "RUNNING"}))?;
            tracing::info!(run_id = %id, "mlflow: resuming the run");
            return Ok(Started {
                sink: Box::new(MlflowSink {
                    client,
                    run_id: id.clone(),
                }),
                run_id: Some(id),
            });
        }
        tracing::warn!(run_id = %id, "mlflow: the recorded run is gone; starting a new one");
    }
    let experiment_id = client.experiment_id(&info.project)?;
    let created = client.post(
        "runs/create",
        &json!({
            "experiment_id": experiment_id,
            "run_name": info.run_name,
            "start_time": now_ms(),
            "tags": [{"key": "mlflow.runName", "value": info.run_name},
                     {"key": "mlflow.source.name", "value": "skyrl"}],
        }),
    )?;
    let run_id = created["run"]["info"]["run_id"]
        .as_str()
        .ok_or_else(|| anyhow!("mlflow: runs/create answered without a run id: {created}"))?
        .to_string();
    let mut params = Vec::new();
    flatten("", &info.config, &mut params);
    for chunk in params.chunks(MAX_PARAMS_PER_BATCH) {
        let params: Vec<Value> = chunk
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        client.post(
            "runs/log-batch",
            &json!({"run_id": run_id, "params": params}),
        )?;
    }
    tracing::info!(%uri, %run_id, "mlflow run");
    Ok(Started {
        sink: Box::new(MlflowSink {
            client,
            run_id: run_id.clone(),
        }),
        run_id: Some(run_id),
    })
}

struct MlflowSink {
    client: Client,
    run_id: String,
}

impl Sink for MlflowSink {
    fn log(&mut self, step: u64, metrics: &StepMetrics) -> Result<()> {
        let ts = now_ms();
        // JSON has no NaN/inf: those points stay in metrics.jsonl only.
        let points: Vec<Value> = metrics
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(k, v)| json!({"key": metric_key(k), "value": v, "timestamp": ts, "step": step}))
            .collect();
        for chunk in points.chunks(MAX_METRICS_PER_BATCH) {
            self.client.post(
                "runs/log-batch",
                &json!({"run_id": self.run_id, "metrics": chunk}),
            )?;
        }
        Ok(())
    }

    fn finish(&mut self, status: RunStatus) -> Result<()> {
        let status = match status {
            RunStatus::Finished => "FINISHED",
            RunStatus::Failed => "FAILED",
        };
        self.client.post(
            "runs/update",
            &json!({"run_id": self.run_id, "status": status, "end_time": now_ms()}),
        )?;
        Ok(())
    }
}

/// A small blocking REST client for one tracking server.
struct Client {
    base: String,
    http: reqwest::blocking::Client,
    auth: Auth,
}

enum Auth {
    None,
    Bearer(String),
    Basic(String, String),
}

impl Client {
    fn new(uri: &str) -> Result<Self> {
        let base = uri.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            bail!(
                "{URI_VAR}={uri}: only an MLflow tracking server (http:// or https://) is supported, \
                 not a local store; run `mlflow server --backend-store-uri {uri}` and point {URI_VAR} at it"
            );
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let auth = match (
            std::env::var("MLFLOW_TRACKING_TOKEN"),
            std::env::var("MLFLOW_TRACKING_USERNAME"),
        ) {
            (Ok(t), _) => Auth::Bearer(t),
            (_, Ok(u)) => Auth::Basic(
                u,
                std::env::var("MLFLOW_TRACKING_PASSWORD").unwrap_or_default(),
            ),
            _ => Auth::None,
        };
        Ok(Self { base, http, auth })
    }

    fn url(&self, endpoint: &str) -> String {
        format!("{}/api/2.0/mlflow/{endpoint}", self.base)
    }

    fn send(&self, req: reqwest::blocking::RequestBuilder, endpoint: &str) -> Result<Value> {
        let req = match &self.auth {
            Auth::None => req,
            Auth::Bearer(t) => req.bearer_auth(t),
            Auth::Basic(u, p) => req.basic_auth(u, Some(p)),
        };
        let resp = req
            .send()
            .with_context(|| format!("mlflow {endpoint}: cannot reach {}", self.base))?;
        let status = resp.status();
        let text = resp.text().unwrap_or_default();
        if !status.is_success() {
            bail!("mlflow {endpoint}: HTTP {status}: {text}");
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn post(&self, endpoint: &str, body: &Value) -> Result<Value> {
        self.send(self.http.post(self.url(endpoint)).json(body), endpoint)
    }

    fn get(&self, endpoint: &str, query: &[(&str, &str)]) -> Result<Value> {
        self.send(self.http.get(self.url(endpoint)).query(query), endpoint)
    }

    /// The id of experiment `name`, created when missing.
    fn experiment_id(&self, name: &str) -> Result<String> {
        if let Ok(v) = self.get("experiments/get-by-name", &[("experiment_name", name)]) {
            if let Some(id) = v["experiment"]["experiment_id"].as_str() {
                return Ok(id.to_string());
            }
        }
        let v = self.post("experiments/create", &json!({"name": name}))?;
        v["experiment_id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("mlflow: experiments/create answered without an id: {v}"))
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// MLflow accepts alphanumerics, `_ - . / ` and space in names; others become `_`.
fn metric_key(k: &str) -> String {
    k.chars()
        .map(|c| match c {
            c if c.is_ascii_alphanumeric() => c,
            '_' | '-' | '.' | '/' | ' ' => c,
            '@' => '_',
            _ => '_',
        })
        .collect()
}

/// Config leaves as `(dotted.key, value)` params (lists and nulls as JSON text).
fn flatten(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = match prefix {
                    "" => k.clone(),
                    p => format!("{p}.{k}"),
                };
                flatten(&key, x, out);
            }
        }
        _ => {
            let mut text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if text.len() > MAX_PARAM_CHARS {
                let mut cut = MAX_PARAM_CHARS;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text.truncate(cut);
            }
            out.push((metric_key(prefix), text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_flattens_into_dotted_params() {
        let mut out = Vec::new();
        flatten(
            "",
            &json!({"trainer": {"epochs": 2, "logger": ["tensorboard"], "x": null}, "data": {"train_data": ["a"]}}),
            &mut out,
        );
        assert_eq!(
            out,
            [
                ("data.train_data".to_string(), "[\"a\"]".to_string()),
                ("trainer.epochs".into(), "2".into()),
                ("trainer.logger".into(), "[\"tensorboard\"]".into()),
                ("trainer.x".into(), "null".into()),
            ]
        );
    }

    #[test]
    fn keys_keep_mlflow_characters() {
        assert_eq!(metric_key("eval/pass@4 (gsm8k)"), "eval/pass_4 _gsm8k_");
    }

    #[test]
    fn a_file_store_uri_is_refused_with_a_hint() {
        let e = Client::new("./mlruns").err().unwrap().to_string();
        assert!(e.contains("mlflow server"), "{e}");
    }
}
