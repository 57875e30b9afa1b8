//! End to end over TCP on 127.0.0.1:0: the toy corpus (data/search) served
//! in-process, queried with reqwest in both request shapes, each toy question
//! answered within the top 3, refusals as JSON, and the background server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use skyrl_retrieval::{serve, BackgroundServer, Index, MAX_BODY_BYTES};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/search")
        .join(name)
}

fn toy_index() -> Arc<Index> {
    Arc::new(Index::load(&data("toy_corpus.jsonl")).expect("toy corpus loads"))
}

/// The toy questions and their accepted answers.
fn toy_questions() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(data("toy_questions.jsonl")).unwrap();
    text.lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            assert_eq!(row["env_class"], "search");
            let targets = row["reward_spec"]["ground_truth"]["target"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_owned())
                .collect();
            (
                row["extra_info"]["question"].as_str().unwrap().to_owned(),
                targets,
            )
        })
        .collect()
}

async fn start() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, toy_index(), 3));
    addr
}

fn client() -> reqwest::Client {
    // Built with the rest of the workspace, reqwest has rustls without a
    // default provider (other crates enable it): install ring's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

async fn post(
    client: &reqwest::Client,
    addr: SocketAddr,
    body: impl Into<reqwest::Body>,
) -> (u16, Value) {
    let resp = client
        .post(format!("http://{addr}/retrieve"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

#[tokio::test]
async fn every_toy_question_is_answered_in_the_top_three() {
    let addr = start().await;
    let client = client();
    let health = client
        .get(format!("http://{addr}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);

    let questions = toy_questions();
    assert!(questions.len() >= 8);
    for (question, targets) in &questions {
        // skyrl-gym 0.4.0's shape: one string.
        let body = json!({"query": question, "topk": 3, "return_scores": true});
        let (status, v) = post(&client, addr, body.to_string()).await;
        assert_eq!(status, 200, "{v}");
        let hits = v["result"][0].as_array().unwrap();
        assert_eq!(hits.len(), 3, "{question}: {v}");
        let scores: Vec<f64> = hits.iter().map(|h| h["score"].as_f64().unwrap()).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
        let answered = hits.iter().any(|h| {
            let contents = h["document"]["contents"].as_str().unwrap();
            targets.iter().any(|t| contents.contains(t.as_str()))
        });
        assert!(
            answered,
            "{question}: no top-3 passage holds {targets:?}: {v}"
        );
    }
}

#[tokio::test]
async fn search_r1_batch_shape_and_default_topk() {
    let addr = start().await;
    let client = client();
    // Search-R1 / SkyRL's shape; no topk (the server's 3), no scores.
    let body = json!({"queries": ["capital of Japan", "Gutenberg"]});
    let (status, v) = post(&client, addr, body.to_string()).await;
    assert_eq!(status, 200, "{v}");
    let result = v["result"].as_array().unwrap();
    assert_eq!(result.len(), 2);
    let first = &result[0][0];
    assert_eq!(first["id"], "14", "{v}");
    assert!(first["contents"]
        .as_str()
        .unwrap()
        .starts_with("\"Tokyo\"\n"));
    assert!(first.get("score").is_none());
    assert_eq!(result[1][0]["id"], "27", "{v}");
    assert_eq!(
        result[1][0]["contents"].as_str().unwrap().lines().next(),
        Some("\"Johannes Gutenberg\"")
    );
    // Three by default; only two passages mention Gutenberg.
    assert_eq!(result[0].as_array().unwrap().len(), 3);
    assert_eq!(result[1].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn refusals_are_json_and_the_server_keeps_running() {
    let addr = start().await;
    let client = client();
    let (status, v) = post(&client, addr, "{\"queries\": [").await;
    assert_eq!(status, 400);
    assert!(v["error"].is_string(), "{v}");
    let (status, v) = post(
        &client,
        addr,
        json!({"queries": ["a"], "topk": 0}).to_string(),
    )
    .await;
    assert_eq!(status, 422);
    assert!(v["error"].as_str().unwrap().contains("`topk`"), "{v}");
    let (status, v) = post(&client, addr, json!({"q": "Paris"}).to_string()).await;
    assert_eq!(status, 422);
    assert!(v["error"].as_str().unwrap().contains("`queries`"), "{v}");
    let big = format!(r#"{{"query": "{}"}}"#, "a".repeat(MAX_BODY_BYTES));
    let (status, v) = post(&client, addr, big).await;
    assert_eq!(status, 413);
    assert!(v["error"].is_string(), "{v}");
    let (status, v) = post(&client, addr, json!({"query": "Canberra"}).to_string()).await;
    assert_eq!(status, 200);
    assert_eq!(v["result"][0][0]["id"], "11");
}

#[tokio::test]
async fn background_server_serves_until_dropped() {
    let server = BackgroundServer::start("127.0.0.1:0".parse().unwrap(), toy_index(), 2).unwrap();
    let client = client();
    let resp = client
        .post(server.retrieve_url())
        .json(&json!({"query": "Who wrote Pride and Prejudice?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["result"][0].as_array().unwrap().len(), 2);
    let addr = server.addr();
    drop(server);
    let after = client.get(format!("http://{addr}/health")).send().await;
    assert!(after.is_err(), "still answering after drop: {after:?}");
}
