//! Limits of `skyrl serve`: generation requests over `max_concurrent_requests`
//! get 429 with `Retry-After` while the admitted ones are all answered; a
//! request past its deadline gets a 504 and the server goes on; an oversized
//! body gets a 413.

mod common;

use std::time::{Duration, Instant};

use common::{rt, spawn_router, tiny_state};
use serde_json::{json, Value};
use skyrl_model::{init_tiny_model, Arch, TinySize};
use skyrl_serve::limits::Limits;
use skyrl_serve::server::router;

fn serve(dir: &std::path::Path, limits: Limits, max_body: usize) -> String {
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, dir, 3).unwrap();
    spawn_router(router(tiny_state(dir).with_limits(limits, max_body)))
}

async fn complete(
    http: &reqwest::Client,
    url: &str,
    max_tokens: usize,
) -> (u16, Option<String>, Value) {
    let r = http
        .post(format!("{url}/v1/completions"))
        .json(&json!({"prompt": [1, 2, 3], "max_tokens": max_tokens, "ignore_eos": true}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, retry, r.json().await.unwrap_or(Value::Null))
}

#[test]
fn requests_over_the_limit_are_told_to_retry_and_the_rest_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let url = serve(dir.path(), Limits::new(4, None), 16 << 20);
    let _ = rustls::crypto::ring::default_provider().install_default();
    rt().block_on(async {
        let http = reqwest::Client::new();
        let all = futures_util::future::join_all((0..64).map(|_| complete(&http, &url, 48))).await;
        let ok = all.iter().filter(|(s, _, _)| *s == 200).count();
        let busy: Vec<_> = all.iter().filter(|(s, _, _)| *s == 429).collect();
        assert_eq!(ok + busy.len(), 64, "only 200s and 429s");
        assert!(ok >= 4, "{ok} answered");
        assert!(!busy.is_empty(), "64 at once over a limit of 4");
        for (_, retry, body) in &busy {
            assert_eq!(retry.as_deref(), Some("1"));
            assert!(body["error"]["message"].as_str().unwrap().contains("busy"));
        }
        for (s, _, body) in &all {
            if *s == 200 {
                assert_eq!(
                    body["choices"][0]["token_ids"].as_array().map(Vec::len),
                    None
                );
                assert_eq!(body["usage"]["completion_tokens"], 48);
            }
        }
        // The slots are free again.
        assert_eq!(complete(&http, &url, 2).await.0, 200);
    });
}

#[test]
fn a_request_past_its_deadline_gets_504_and_the_server_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let url = serve(
        dir.path(),
        Limits::new(8, Some(Duration::from_millis(200))),
        1024,
    );
    let _ = rustls::crypto::ring::default_provider().install_default();
    rt().block_on(async {
        let http = reqwest::Client::new();
        let start = Instant::now();
        let (status, _, body) = complete(&http, &url, 4000).await;
        assert_eq!(status, 504, "{body}");
        assert!(start.elapsed() < Duration::from_secs(3));
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deadline"));
        assert_eq!(complete(&http, &url, 2).await.0, 200);
        // A body over the cap.
        let big = http
            .post(format!("{url}/v1/completions"))
            .json(&json!({"prompt": vec![1; 2000], "max_tokens": 1}))
            .send()
            .await
            .unwrap();
        assert_eq!(big.status().as_u16(), 413);
    });
}
