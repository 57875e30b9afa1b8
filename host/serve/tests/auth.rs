//! Keys on `skyrl serve`: user routes need the API key, control routes the
//! admin key (401 without, 403 with the user key), `/health` stays open; the
//! official `openai` client with and without the key; the remote client
//! sending each key where it belongs, and failing at once on a wrong one.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{python, rt, spawn_router, tiny_state};
use serde_json::{json, Value};
use skyrl_inference::remote::{RemoteEngines, RemoteEnginesConfig, RemoteError};
use skyrl_model::{init_tiny_model, Arch, SampleStream, SamplingParams, TinySize};
use skyrl_serve::auth::AuthKeys;
use skyrl_serve::server::router;

const USER: &str = "user-key-1";
const ADMIN: &str = "admin-key-2";

/// A keyed server for a fresh tiny model; returns its url.
fn serve(dir: &std::path::Path) -> String {
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, dir, 3).unwrap();
    spawn_router(router(tiny_state(dir).with_auth(AuthKeys {
        api_key: Some(USER.into()),
        admin_key: Some(ADMIN.into()),
    })))
}

fn call(url: &str, path: &str, key: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    rt().block_on(async {
        let c = reqwest::Client::new();
        let mut r = match &body {
            Some(b) => c.post(format!("{url}{path}")).json(b),
            None => c.get(format!("{url}{path}")),
        };
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        let r = r.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    })
}

fn client(url: &str, api: &str, admin: &str) -> RemoteEngines {
    let mut c = RemoteEnginesConfig::new(vec![url.to_string()]);
    c.api_key = Some(api.into());
    c.admin_key = Some(admin.into());
    c.max_retries = 0;
    RemoteEngines::new(c).unwrap()
}

#[test]
fn keys_guard_user_and_admin_routes() {
    let dir = tempfile::tempdir().unwrap();
    let url = serve(dir.path());
    let completion = json!({"model": "tiny", "prompt": "hi", "max_tokens": 2});
    let complete = |key| call(&url, "/v1/completions", key, Some(completion.clone()));

    assert_eq!(call(&url, "/health", None, None).0, 200);
    for key in [None, Some("wrong")] {
        let (status, e) = complete(key);
        assert_eq!(status, 401, "{key:?}");
        assert_eq!(e["error"]["type"], "invalid_request_error");
        assert!(e["error"]["message"].as_str().unwrap().contains("API key"));
    }
    assert_eq!(complete(Some(USER)).0, 200);
    assert_eq!(complete(Some(ADMIN)).0, 200);
    assert_eq!(call(&url, "/v1/models", None, None).0, 401);

    let pause = |key| call(&url, "/pause_generation", key, Some(json!({})));
    assert_eq!(pause(None).0, 401);
    let (status, e) = pause(Some(USER));
    assert_eq!(status, 403);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("admin key"));
    assert_eq!(pause(Some(ADMIN)).0, 200);
    assert_eq!(
        call(&url, "/continue_generation", Some(ADMIN), Some(json!({}))).0,
        200
    );
    // A weight load with the user key changes nothing.
    let (status, _) = call(
        &url,
        "/update_weights_from_disk",
        Some(USER),
        Some(json!({"model_path": dir.path()})),
    );
    assert_eq!(status, 403);
    assert_eq!(
        call(&url, "/get_weight_version", Some(USER), None).1["weight_version"],
        0
    );

    // The remote client: generation with the API key, control with the admin key.
    let rt = rt();
    let good = client(&url, USER, ADMIN);
    rt.block_on(good.wait_ready(Duration::from_secs(30)))
        .unwrap();
    let out = rt
        .block_on(good.generate(
            &[vec![1, 2, 3]],
            &SampleStream::sequence(Some(1), 1),
            &SamplingParams::greedy(2),
            &["s".into()],
        ))
        .unwrap();
    assert!(!out[0].token_ids.is_empty());
    rt.block_on(good.pause()).unwrap();
    rt.block_on(good.resume()).unwrap();
    // A wrong key fails start-up at once, naming the server.
    for bad in [client(&url, USER, "nope"), client(&url, "nope", ADMIN)] {
        let start = Instant::now();
        let err = rt
            .block_on(bad.wait_ready(Duration::from_secs(30)))
            .unwrap_err();
        assert!(matches!(err, RemoteError::Unauthorized { .. }), "{err}");
        assert!(err.to_string().contains(&url), "{err}");
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn the_official_openai_client_sends_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let url = serve(dir.path());
    let script = r#"
import sys, openai
url, user = sys.argv[1], sys.argv[2]
ok = openai.OpenAI(base_url=url + "/v1", api_key=user, max_retries=0)
r = ok.completions.create(model="tiny", prompt="hi", max_tokens=2)
assert r.choices[0].text is not None
bad = openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0)
try:
    bad.completions.create(model="tiny", prompt="hi", max_tokens=2)
    raise SystemExit("a wrong key was accepted")
except openai.AuthenticationError as e:
    assert e.status_code == 401
print("ok")
"#;
    let out = Command::new(python())
        .args(["-c", script, &url, USER])
        .output()
        .expect("run the project venv's python (scripts/setup)");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
