//! Test-only environment for the network grant tests: each action is
//! `GET <url>` or `POST <url> <body>`; the observation is `<status> <body>`
//! or `error: <reason>`, the reward 1.0 for an answer and 0.0 for an error.
//! The action `stop` ends the episode. Errors are observations, not plugin
//! errors, so one instance shows that a refused request leaves it usable.

use std::time::Duration;

use serde_json::Value;
use skyrl_sdk::http::Request;
use skyrl_sdk::{Environment, Error, Extras, Message, Result, StepOutput};

/// One probing episode.
pub struct HttpProbe {
    /// Per-request deadline asked of the host (`config.timeout_ms`).
    timeout: Option<Duration>,
}

impl Environment for HttpProbe {
    fn create(config: &Value, _extras: &Extras) -> Result<Self> {
        Ok(Self {
            timeout: config
                .get("timeout_ms")
                .and_then(Value::as_u64)
                .map(Duration::from_millis),
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        if action.trim() == "stop" {
            return Ok(StepOutput::done(0.0));
        }
        let mut request = parse(action)?;
        if let Some(timeout) = self.timeout {
            request = request.with_timeout(timeout);
        }
        let (text, reward) = match request.send() {
            Ok(response) => (format!("{} {}", response.status, response.text()), 1.0),
            Err(err) => (format!("error: {err}"), 0.0),
        };
        Ok(StepOutput::next(vec![Message::new("user", text)], reward))
    }
}

fn parse(action: &str) -> Result<Request> {
    let mut parts = action.trim().splitn(3, ' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("GET"), Some(url), None) => Ok(Request::get(url)),
        (Some("POST"), Some(url), body) => {
            let mut request = Request::get(url);
            request.method = "POST".into();
            request.body = body.unwrap_or("").as_bytes().to_vec();
            Ok(request)
        }
        _ => Err(Error::input(format!(
            "expected `GET <url>`, `POST <url> <body>` or `stop`, got {action:?}"
        ))),
    }
}

skyrl_sdk::export_env!(
    HttpProbe,
    name = "http_probe",
    version = "0.1.0",
    description = "Test-only: makes the HTTP requests its actions name"
);
