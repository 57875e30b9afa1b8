//! The OpenAI-compatible API of `skyrl serve` (in process, on loopback): the
//! official `openai` Python client end to end (tests/openai_client.py), the
//! server-sent event format of streams, stop-string truncation, and errors in
//! OpenAI's shape.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use common::{python, spawn_router};
use serde_json::{json, Value};
use skyrl_model::{
    init_tiny_model, Arch, CausalLm, EngineSettings, InferenceEngine, LoadOptions, TinySize,
    Tokenizer,
};
use skyrl_serve::server::{router, AppState};
use skyrl_serve::EngineWorker;

const MODEL: &str = "tiny";
const MAX_NUM_SEQS: usize = 8;

/// A server for a fresh tiny model; returns its url (the model directory
/// lives as long as the returned guard).
fn serve() -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, dir.path(), 3).unwrap();
    let options = LoadOptions {
        device: tch::Device::Cpu,
        kind: tch::Kind::Float,
    };
    let engine = InferenceEngine::new(
        CausalLm::from_pretrained(dir.path(), &options).unwrap(),
        Some(Tokenizer::from_dir(dir.path()).unwrap()),
    )
    .with_settings(EngineSettings {
        max_num_seqs: MAX_NUM_SEQS,
        ..Default::default()
    })
    .unwrap();
    let state = AppState::new(
        EngineWorker::spawn(engine),
        Tokenizer::from_dir(dir.path()).unwrap(),
        MODEL.into(),
    );
    let url = spawn_router(router(state));
    (url, dir)
}

/// Runs `f` with an HTTP client on a small runtime.
fn with_client<T>(f: impl AsyncFnOnce(reqwest::Client) -> T) -> T {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f(reqwest::Client::new()))
}

/// POSTs `body` (JSON text); returns the status and the body text.
async fn post(http: &reqwest::Client, url: &str, body: String) -> (u16, String) {
    let r = http
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn post_json(http: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let (code, text) = post(http, url, body.to_string()).await;
    (
        code,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The `data:` payloads of an SSE body; panics on anything else.
fn sse_data(body: &str) -> Vec<String> {
    assert!(
        body.ends_with("\n\n"),
        "events end with a blank line: {body:?}"
    );
    body.trim_end()
        .split("\n\n")
        .map(|event| {
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {event:?}"))
                .to_string()
        })
        .collect()
}

#[test]
fn the_official_openai_client_works() {
    let (url, _dir) = serve();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/openai_client.py");
    let out = Command::new(python())
        .arg(&script)
        .args([&url, MODEL, &MAX_NUM_SEQS.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} failed:\n{}\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn streams_are_server_sent_events_that_add_up_to_the_answer() {
    let (url, _dir) = serve();
    with_client(async |http| {
        let request = json!({
            "prompt": "abc", "max_tokens": 6, "n": 2, "seed": 5, "ignore_eos": true,
            "logprobs": 1, "stream_options": {"include_usage": true},
        });
        let (code, whole) =
            post_json(&http, &format!("{url}/v1/completions"), request.clone()).await;
        assert_eq!(code, 200, "{whole}");
        let mut streamed = request;
        streamed["stream"] = json!(true);
        let r = http
            .post(format!("{url}/v1/completions"))
            .json(&streamed)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "text/event-stream");
        let data = sse_data(&r.text().await.unwrap());
        assert_eq!(data.last().unwrap(), "[DONE]");
        let chunks: Vec<Value> = data[..data.len() - 1]
            .iter()
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let (usage, chunks) = chunks.split_last().unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(usage["usage"]["completion_tokens"], 12);
        let mut text: BTreeMap<u64, String> = BTreeMap::new();
        let mut tokens: BTreeMap<u64, usize> = BTreeMap::new();
        let mut finished: BTreeMap<u64, Value> = BTreeMap::new();
        for c in chunks {
            assert_eq!(c["object"], "text_completion");
            assert_eq!(c["id"], chunks[0]["id"]);
            let choice = &c["choices"][0];
            let i = choice["index"].as_u64().unwrap();
            assert!(!finished.contains_key(&i), "a choice's finish comes last");
            *text.entry(i).or_default() += choice["text"].as_str().unwrap();
            *tokens.entry(i).or_default() += choice["logprobs"]["tokens"].as_array().unwrap().len();
            if !choice["finish_reason"].is_null() {
                finished.insert(i, choice["finish_reason"].clone());
            }
        }
        for i in 0..2 {
            assert_eq!(text[&i], whole["choices"][i as usize]["text"], "choice {i}");
            assert_eq!(tokens[&i], 6);
            assert_eq!(finished[&i], "length");
        }

        // Chat: a role delta first, then content deltas.
        let (code, body) = post(
            &http,
            &format!("{url}/v1/chat/completions"),
            json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                   "temperature": 0, "stream": true})
            .to_string(),
        )
        .await;
        assert_eq!(code, 200, "{body}");
        let data = sse_data(&body);
        let first: Value = serde_json::from_str(&data[0]).unwrap();
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
        let last: Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
        assert!(!last["choices"][0]["finish_reason"].is_null());
        assert_eq!(data.last().unwrap(), "[DONE]");
    });
}

#[test]
fn stop_strings_are_cut_from_whole_and_streamed_text() {
    let (url, _dir) = serve();
    with_client(async |http| {
        let completions = format!("{url}/v1/completions");
        let ask = |extra: Value| {
            let mut body = json!({"prompt": "hello", "max_tokens": 20, "temperature": 0,
                                  "ignore_eos": true, "return_token_ids": true});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            body
        };
        let (_, free) = post_json(&http, &completions, ask(json!({}))).await;
        let text = free["choices"][0]["text"].as_str().unwrap().to_string();
        let stop: String = text.chars().skip(6).take(3).collect();
        let cut = &text[..text.find(&stop).unwrap()];
        let (code, r) = post_json(&http, &completions, ask(json!({"stop": [&stop]}))).await;
        assert_eq!(code, 200, "{r}");
        let choice = &r["choices"][0];
        assert_eq!(choice["text"], cut);
        assert_eq!(choice["finish_reason"], "stop");
        assert_eq!(choice["stop_reason"], stop.as_str());
        // Token ids stay as generated: they end with the stop string.
        let ids = choice["token_ids"].as_array().unwrap().len();
        assert_eq!(ids, cut.chars().count() + stop.chars().count());
        let (_, kept) = post_json(
            &http,
            &completions,
            ask(json!({"stop": &stop, "include_stop_str_in_output": true})),
        )
        .await;
        assert_eq!(kept["choices"][0]["text"], format!("{cut}{stop}"));
        let (_, body) = post(
            &http,
            &completions,
            ask(json!({"stop": [&stop], "stream": true})).to_string(),
        )
        .await;
        let streamed: String = sse_data(&body)
            .iter()
            .filter(|d| *d != "[DONE]")
            .map(|d| {
                let c: Value = serde_json::from_str(d).unwrap();
                c["choices"][0]["text"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(streamed, cut, "no part of the stop string is ever sent");
    });
}

#[test]
fn every_failure_is_an_openai_error() {
    let (url, _dir) = serve();
    with_client(async |http| {
        let completions = format!("{url}/v1/completions");
        let check = |code: u16, body: &str, want: u16, needle: &str| {
            assert_eq!(code, want, "{body}");
            let v: Value =
                serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
            let message = v["error"]["message"].as_str().unwrap();
            assert!(message.contains(needle), "`{needle}` not in {message}");
            assert!(v["error"]["type"].is_string() && v["error"]["code"] == want);
            assert!(v["error"].as_object().unwrap().contains_key("param"));
        };
        let (code, body) = post(&http, &completions, "{not json".into()).await;
        check(code, &body, 400, "JSON");
        let (code, body) = post(&http, &completions, json!({"max_tokens": 2}).to_string()).await;
        check(code, &body, 400, "prompt");
        let (code, body) = post(
            &http,
            &completions,
            json!({"model": "gpt-9", "prompt": "a"}).to_string(),
        )
        .await;
        check(code, &body, 404, "gpt-9");
        let (code, body) = post(
            &http,
            &completions,
            json!({"model": MODEL, "prompt": "a", "n": MAX_NUM_SEQS + 1}).to_string(),
        )
        .await;
        check(code, &body, 400, "max_num_seqs");
        let (code, body) = post(
            &http,
            &completions,
            json!({"prompt": "a".repeat(5000), "stream": true}).to_string(),
        )
        .await;
        check(code, &body, 400, "context");
        let r = http.get(format!("{url}/v1/nothing")).send().await.unwrap();
        let code = r.status().as_u16();
        check(code, &r.text().await.unwrap(), 404, "/v1/nothing");
        let r = http.get(&completions).send().await.unwrap();
        let code = r.status().as_u16();
        check(code, &r.text().await.unwrap(), 405, "GET");
    });
}
