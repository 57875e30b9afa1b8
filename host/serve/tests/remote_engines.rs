//! The remote-engine client against real `skyrl serve` servers (in process, on
//! loopback): load balancing, sticky sessions, failover, retries, timeouts,
//! client errors, pause/resume and weight reload on every server.

mod common;

use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{local_engine, rt, spawn_router, tiny_state};
use skyrl_inference::remote::{RemoteEngines, RemoteEnginesConfig, RemoteError};
use skyrl_model::{init_tiny_model, Arch, SampleStream, SamplingParams, TinySize, Tokenizer};
use skyrl_serve::server::router;
use skyrl_serve::weights_root::WeightsRoot;

fn tiny(dir: &Path, seed: u64) {
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, dir, seed).unwrap();
}

/// A `skyrl serve` for the model in `dir`; returns its url.
fn serve(dir: &Path) -> String {
    // Weights load from the model's folder's parent (the test's temp dir).
    let root = WeightsRoot::new(dir.parent().unwrap()).unwrap();
    spawn_router(router(tiny_state(dir).with_weights_root(root)))
}

/// Posts a completion request body to `upstream`; its status and body.
async fn forward(
    http: &reqwest::Client,
    upstream: &str,
    body: String,
) -> (axum::http::StatusCode, String) {
    let r = http
        .post(format!("{upstream}/v1/completions"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = axum::http::StatusCode::from_u16(r.status().as_u16()).unwrap();
    (status, r.text().await.unwrap())
}

/// Forwards to `upstream` after answering the first `fail_first` completion
/// requests with 503; counts the completion requests it saw.
fn flaky_proxy(upstream: String, fail_first: usize) -> (String, Arc<AtomicUsize>) {
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let app = axum::Router::new()
        .route(
            "/v1/completions",
            axum::routing::post(move |body: String| {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let (http, upstream) = (http.clone(), upstream.clone());
                async move {
                    if n < fail_first {
                        return (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            "overloaded".into(),
                        );
                    }
                    forward(&http, &upstream, body).await
                }
            }),
        )
        .route("/health", axum::routing::get(|| async { "ok" }));
    (spawn_router(app), seen)
}

/// A port that accepts connections and never answers.
fn silent_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
        }
    });
    url
}

/// A loopback url nothing listens on.
fn dead_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

fn client(urls: Vec<String>, f: impl FnOnce(&mut RemoteEnginesConfig)) -> RemoteEngines {
    let mut c = RemoteEnginesConfig::new(urls);
    c.retry_backoff = Duration::from_millis(20);
    f(&mut c);
    RemoteEngines::new(c).unwrap()
}

fn prompts(dir: &Path, n: usize) -> Vec<Vec<i64>> {
    let tok = Tokenizer::from_dir(dir).unwrap();
    (0..n)
        .map(|i| tok.encode(&format!("question {i}: 2+{i}="), false).unwrap())
        .collect()
}

fn greedy(n: usize) -> SamplingParams {
    SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(n)
    }
}

fn sessions(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("traj-{i}")).collect()
}

/// Greedy completions of `prompts` (sessions `traj-<i>`, seed 1) through `c`.
fn generate(
    c: &RemoteEngines,
    prompts: &[Vec<i64>],
    max_tokens: usize,
) -> Result<Vec<skyrl_model::Completion>, RemoteError> {
    let n = prompts.len();
    rt().block_on(c.generate(
        prompts,
        &SampleStream::sequence(Some(1), n),
        &greedy(max_tokens),
        &sessions(n),
    ))
}

#[test]
fn balances_load_keeps_sessions_on_one_server_and_matches_local_output() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), 3);
    let urls = vec![serve(tmp.path()), serve(tmp.path())];
    let c = client(urls.clone(), |_| {});
    let rt = rt();
    rt.block_on(c.wait_ready(Duration::from_secs(30))).unwrap();
    let ps = prompts(tmp.path(), 8);
    let ids = sessions(8);
    let streams = SampleStream::sequence(Some(1), 8);
    let got = rt
        .block_on(c.generate(&ps, &streams, &greedy(6), &ids))
        .unwrap();
    let want = local_engine(tmp.path()).generate(&ps, &greedy(6)).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.token_ids, w.token_ids);
        let diff: f32 = g
            .logprobs
            .iter()
            .zip(&w.logprobs)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(diff < 1e-4, "logprobs differ by {diff}");
    }
    let stats = c.stats();
    assert_eq!(stats.iter().map(|s| s.requests).sum::<u64>(), 8);
    assert!(
        stats.iter().all(|s| s.requests >= 2),
        "both servers take work: {stats:?}"
    );
    let pinned: Vec<String> = ids.iter().map(|s| c.session_server(s).unwrap()).collect();
    // A second turn of every trajectory goes back to the same server.
    let before: Vec<u64> = stats.iter().map(|s| s.requests).collect();
    rt.block_on(c.generate(&ps, &streams, &greedy(2), &ids))
        .unwrap();
    for (s, p) in ids.iter().zip(&pinned) {
        assert_eq!(&c.session_server(s).unwrap(), p);
    }
    let after: Vec<u64> = c.stats().iter().map(|s| s.requests).collect();
    for (k, url) in urls.iter().enumerate() {
        let on_k = pinned.iter().filter(|p| *p == url).count() as u64;
        assert_eq!(
            after[k] - before[k],
            on_k,
            "server {k} got its sessions' turns"
        );
    }
}

#[test]
fn fails_over_from_a_dead_server() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), 3);
    let live = serve(tmp.path());
    let c = client(vec![dead_url(), live.clone()], |_| {});
    let ps = prompts(tmp.path(), 4);
    let out = generate(&c, &ps, 3).unwrap();
    assert_eq!(out.len(), 4);
    let stats = c.stats();
    assert_eq!(stats[0].requests, 0);
    assert!(stats[0].failures >= 1, "{stats:?}");
    assert_eq!(stats[1].requests, 4);
    for s in sessions(4) {
        assert_eq!(
            c.session_server(&s).unwrap(),
            live,
            "sessions move to the live server"
        );
    }
}

#[test]
fn retries_server_errors_then_succeeds() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), 3);
    let (proxy, seen) = flaky_proxy(serve(tmp.path()), 2);
    let c = client(vec![proxy], |c| c.max_retries = 3);
    let ps = prompts(tmp.path(), 1);
    let out = generate(&c, &ps, 3).unwrap();
    assert_eq!(out[0].token_ids.len(), 3);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        3,
        "two 503s, then the real answer"
    );
    assert_eq!(c.stats()[0].failures, 2);
}

#[test]
fn gives_up_with_a_clear_error_when_no_server_answers() {
    let c = client(vec![dead_url()], |c| c.max_retries = 2);
    let start = Instant::now();
    let err = generate(&c, &[vec![1, 2]], 2).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, RemoteError::Exhausted { attempts: 3, .. }),
        "{msg}"
    );
    assert!(msg.contains("cannot connect"), "{msg}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_silent_server_times_out() {
    let c = client(vec![silent_server()], |c| {
        c.request_timeout = Duration::from_millis(400);
        c.max_retries = 1;
    });
    let start = Instant::now();
    let err = generate(&c, &[vec![1, 2]], 2).unwrap_err();
    assert!(err.to_string().contains("timed out"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn bad_requests_are_not_retried() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), 3);
    let (proxy, seen) = flaky_proxy(serve(tmp.path()), 0);
    let c = client(vec![proxy], |c| c.max_retries = 3);
    let err = generate(&c, &[vec![1, 1_000_000]], 2).unwrap_err();
    match &err {
        RemoteError::Rejected {
            status, message, ..
        } => {
            assert_eq!(*status, 400);
            assert!(message.contains("outside the vocabulary"), "{message}");
        }
        other => panic!("expected a rejection, got {other}"),
    }
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[test]
fn weight_reload_and_pause_reach_every_server() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    tiny(&a, 3);
    tiny(&b, 4);
    let c = client(vec![serve(&a), serve(&a)], |_| {});
    let rt = rt();
    assert_eq!(rt.block_on(c.weight_versions()), vec![Some(0), Some(0)]);
    let versions = rt.block_on(c.update_weights_from_disk(&b)).unwrap();
    assert_eq!(versions, vec![Some(1), Some(1)]);
    let ps = prompts(&b, 4);
    let got = rt
        .block_on(c.generate(
            &ps,
            &SampleStream::sequence(Some(1), 4),
            &greedy(5),
            &sessions(4),
        ))
        .unwrap();
    let want = local_engine(&b).generate(&ps, &greedy(5)).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.token_ids, w.token_ids, "servers now run the new weights");
    }
    // A missing checkpoint is an error naming the path, and nothing changes.
    let err = rt
        .block_on(c.update_weights_from_disk(&tmp.path().join("missing")))
        .unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    assert_eq!(rt.block_on(c.weight_versions()), vec![Some(1), Some(1)]);

    // While paused, requests wait; after resume they finish.
    rt.block_on(c.pause()).unwrap();
    let c = Arc::new(c);
    let c2 = c.clone();
    let ps2 = ps.clone();
    let pending = rt.spawn(async move {
        c2.generate(
            &ps2,
            &SampleStream::sequence(Some(1), 4),
            &greedy(2),
            &sessions(4),
        )
        .await
    });
    std::thread::sleep(Duration::from_millis(400));
    assert!(!pending.is_finished(), "generation must wait while paused");
    rt.block_on(c.resume()).unwrap();
    let out = rt.block_on(pending).unwrap().unwrap();
    assert_eq!(out.len(), 4);
}

/// Forwards completions to `upstream`, keeping every request body it saw.
fn recording_proxy(upstream: String) -> (String, Arc<std::sync::Mutex<Vec<serde_json::Value>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let bodies = seen.clone();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let (models_http, models_upstream) = (http.clone(), upstream.clone());
    let app = axum::Router::new()
        .route(
            "/v1/models",
            axum::routing::get(move || {
                let (http, upstream) = (models_http.clone(), models_upstream.clone());
                async move {
                    let r = http
                        .get(format!("{upstream}/v1/models"))
                        .send()
                        .await
                        .unwrap();
                    (
                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                        r.text().await.unwrap(),
                    )
                }
            }),
        )
        .route(
            "/v1/completions",
            axum::routing::post(move |body: String| {
                bodies
                    .lock()
                    .unwrap()
                    .push(serde_json::from_str(&body).unwrap());
                let (http, upstream) = (http.clone(), upstream.clone());
                async move { forward(&http, &upstream, body).await }
            }),
        )
        .route("/health", axum::routing::get(|| async { "ok" }));
    (spawn_router(app), seen)
}

#[test]
fn penalties_and_min_tokens_reach_the_server_and_act_as_locally() {
    let tmp = tempfile::tempdir().unwrap();
    tiny(tmp.path(), 5);
    let (url, bodies) = recording_proxy(serve(tmp.path()));
    let c = client(vec![url], |_| {});
    let rt = rt();
    rt.block_on(c.wait_ready(Duration::from_secs(30))).unwrap();
    let ps = prompts(tmp.path(), 3);
    let params = SamplingParams {
        repetition_penalty: 1.5,
        presence_penalty: 0.7,
        frequency_penalty: 0.3,
        min_tokens: 4,
        ..SamplingParams::greedy(8)
    };
    let got = rt
        .block_on(c.generate(
            &ps,
            &SampleStream::sequence(Some(1), 3),
            &params,
            &sessions(3),
        ))
        .unwrap();
    let want = local_engine(tmp.path()).generate(&ps, &params).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.token_ids, w.token_ids);
    }
    let plain = local_engine(tmp.path())
        .generate(&ps, &SamplingParams::greedy(8))
        .unwrap();
    assert_ne!(
        plain.iter().map(|c| &c.token_ids).collect::<Vec<_>>(),
        want.iter().map(|c| &c.token_ids).collect::<Vec<_>>(),
        "the penalties change greedy output on this model"
    );
    for b in bodies.lock().unwrap().iter() {
        assert_eq!(b["repetition_penalty"], 1.5);
        assert_eq!(b["presence_penalty"], 0.7);
        assert_eq!(b["frequency_penalty"], 0.3);
        assert_eq!(b["min_tokens"], 4);
    }
}
