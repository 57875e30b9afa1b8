//! Network as a capability: a plugin reaches only the origins its policy
//! grants (wasi:http served by the host), redirects are checked hop by hop,
//! responses are capped and requests bounded by deadlines; a refused
//! request is an error the plugin sees, and the episode goes on.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;
use skyrl_runtime::{
    EnvInstance, Message, NetworkPolicy, Plugin, PluginError, SandboxLimits, SandboxPolicy,
};

/// Two loopback servers: `granted` (the one policies allow) and `other`.
struct Servers {
    granted: SocketAddr,
    other: SocketAddr,
}

fn servers() -> &'static Servers {
    static SERVERS: std::sync::OnceLock<Servers> = std::sync::OnceLock::new();
    SERVERS.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let other_addr = other.local_addr().unwrap();
                let granted = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let granted_addr = granted.local_addr().unwrap();
                let other_app = Router::new().route("/ok", get(|| async { "secret" }));
                let granted_app = Router::new()
                    .route("/ok", get(|| async { "hello" }))
                    .route("/echo", post(|body: String| async move { body }))
                    .route("/big", get(|| async { "x".repeat(300 << 10) }))
                    .route(
                        "/slow",
                        get(|| async {
                            tokio::time::sleep(Duration::from_secs(3)).await;
                            "late"
                        }),
                    )
                    .route("/to-ok", get(|| async { redirect("/ok".into()) }))
                    .route(
                        "/to-other",
                        get(|State(other): State<SocketAddr>| async move {
                            redirect(format!("http://{other}/ok"))
                        }),
                    )
                    .with_state(other_addr);
                tokio::spawn(async move { axum::serve(other, other_app).await });
                tokio::spawn(async move { axum::serve(granted, granted_app).await });
                tx.send(Servers {
                    granted: granted_addr,
                    other: other_addr,
                })
                .unwrap();
                std::future::pending::<()>().await;
            });
        });
        rx.recv().unwrap()
    })
}

fn redirect(location: String) -> impl IntoResponse {
    (StatusCode::FOUND, [(header::LOCATION, location)])
}

fn granting(plugin: Plugin, network: NetworkPolicy) -> Plugin {
    plugin
        .with_policy(SandboxPolicy {
            network,
            ..SandboxPolicy::default()
        })
        .unwrap()
}

fn grant_granted() -> NetworkPolicy {
    NetworkPolicy {
        allowed_hosts: vec![format!("http://{}", servers().granted)],
        ..NetworkPolicy::default()
    }
}

/// A probe episode of the shared engine's plugin under `network`.
fn probe_granted(network: NetworkPolicy) -> EnvInstance {
    probe(&granting(
        common::load(common::shared_engine(), "http_probe"),
        network,
    ))
}

fn probe(plugin: &Plugin) -> EnvInstance {
    let mut env = plugin.create_env(&json!({}), &json!({})).unwrap();
    env.init(&[Message::user("go")]).unwrap();
    env
}

/// The observation of one action.
fn ask(env: &mut EnvInstance, action: &str) -> String {
    let step = env.step(action).unwrap();
    assert!(!step.done);
    step.observations[0].content.clone()
}

#[test]
fn granted_origin_answers_and_every_other_origin_is_refused() {
    let s = servers();
    let mut env = probe_granted(grant_granted());
    assert_eq!(
        ask(&mut env, &format!("GET http://{}/ok", s.granted)),
        "200 hello"
    );
    let denied = ask(&mut env, &format!("GET http://{}/ok", s.other));
    assert!(
        denied.starts_with(&format!("error: request to http://{}/ok denied", s.other))
            && denied.contains("allowed_hosts"),
        "{denied}"
    );
    // The same host under another name is another origin.
    let port = s.granted.port();
    let renamed = ask(&mut env, &format!("GET http://localhost:{port}/ok"));
    assert!(renamed.contains("denied"), "{renamed}");
    // The refusals left the instance working.
    assert_eq!(
        ask(&mut env, &format!("POST http://{}/echo ping", s.granted)),
        "200 ping"
    );
    assert!(env.step("stop").unwrap().done);
}

#[test]
fn redirects_are_followed_only_inside_the_grant() {
    let s = servers();
    let mut env = probe_granted(grant_granted());
    assert_eq!(
        ask(&mut env, &format!("GET http://{}/to-ok", s.granted)),
        "200 hello"
    );
    let bounced = ask(&mut env, &format!("GET http://{}/to-other", s.granted));
    assert!(bounced.contains("denied"), "{bounced}");
    assert!(!bounced.contains("secret"), "{bounced}");
    assert_eq!(
        ask(&mut env, &format!("GET http://{}/ok", s.granted)),
        "200 hello"
    );
}

#[test]
fn without_a_grant_there_is_no_network() {
    let s = servers();
    let plugin = common::load(common::shared_engine(), "http_probe");
    let mut env = probe(&plugin);
    let denied = ask(&mut env, &format!("GET http://{}/ok", s.granted));
    assert!(denied.contains("denied"), "{denied}");
}

#[test]
fn an_oversized_response_is_refused_and_the_next_request_works() {
    let s = servers();
    let network = NetworkPolicy {
        max_response_bytes: 100 << 10,
        ..grant_granted()
    };
    let mut env = probe_granted(network);
    let big = ask(&mut env, &format!("GET http://{}/big", s.granted));
    assert!(big.contains("larger than 102400 bytes"), "{big}");
    assert_eq!(
        ask(&mut env, &format!("GET http://{}/ok", s.granted)),
        "200 hello"
    );
}

#[test]
fn a_slow_server_meets_the_request_deadline() {
    let s = servers();
    let network = NetworkPolicy {
        request_timeout_ms: 300,
        ..grant_granted()
    };
    let mut env = probe_granted(network);
    let start = Instant::now();
    let slow = ask(&mut env, &format!("GET http://{}/slow", s.granted));
    let took = start.elapsed();
    assert!(slow.contains("timed out"), "{slow}");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    assert_eq!(
        ask(&mut env, &format!("GET http://{}/ok", s.granted)),
        "200 hello"
    );
}

#[test]
fn a_request_never_outlives_the_plugin_call() {
    let s = servers();
    let engine = common::engine(SandboxLimits {
        call_timeout_ms: 400,
        ..SandboxLimits::default()
    });
    let plugin = granting(common::load(&engine, "http_probe"), grant_granted());
    let mut env = probe(&plugin);
    let start = Instant::now();
    let outcome = env.step(&format!("GET http://{}/slow", s.granted));
    let took = start.elapsed();
    assert!(took < Duration::from_millis(1200), "took {took:?}");
    match outcome {
        Err(PluginError::Timeout { .. }) => {}
        Ok(step) => assert!(step.observations[0].content.contains("timed out")),
        Err(other) => panic!("unexpected {other}"),
    }
}

#[test]
fn malformed_grants_are_refused_when_applied() {
    let plugin = common::load(common::shared_engine(), "http_probe");
    let err = plugin
        .with_policy(SandboxPolicy {
            network: NetworkPolicy {
                allowed_hosts: vec!["127.0.0.1:8000".into()],
                ..NetworkPolicy::default()
            },
            ..SandboxPolicy::default()
        })
        .err()
        .expect("a grant without a scheme is refused");
    assert!(err.to_string().contains("\"127.0.0.1:8000\""), "{err}");
}
