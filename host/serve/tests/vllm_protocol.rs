//! vLLM's control protocol, both sides: the remote client (`ControlProtocol::Vllm`)
//! against a fake vLLM server that records every call (paths, query strings,
//! bodies, and vLLM's empty answers), and `skyrl serve`'s vLLM routes driven
//! by the same client in process.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::IntoResponse;
use common::{cpu, local_engine, rt, spawn_router, tiny_state};
use serde_json::{json, Value};
use skyrl_inference::placement::WeightSyncBackend;
use skyrl_inference::remote::{ControlProtocol, RemoteEngines, RemoteEnginesConfig};
use skyrl_inference::weight_sync::WeightSync;
use skyrl_inference::RolloutEngine;
use skyrl_model::{
    init_tiny_model, Arch, CausalLm, SampleStream, SamplingParams, StopReason, TinySize, Tokenizer,
};
use skyrl_serve::server::router;
use skyrl_serve::weights_root::WeightsRoot;

fn vllm_client(urls: Vec<String>) -> RemoteEngines {
    let mut c = RemoteEnginesConfig::new(urls);
    c.protocol = ControlProtocol::Vllm;
    c.retry_backoff = Duration::from_millis(20);
    RemoteEngines::new(c).unwrap()
}

/// One recorded request: method, path with query, JSON body (null if empty).
type Call = (String, String, Value);

/// A fake `vllm serve` (with `VLLM_SERVER_DEV_MODE=1`) reporting `world_size`
/// workers. It answers like vLLM 0.20: JSON for the RLHF routes, empty 200s
/// for `/sleep`, `/wake_up`, `/reset_prefix_cache` and `/collective_rpc`.
fn fake_vllm(world_size: usize) -> (String, Arc<Mutex<Vec<Call>>>) {
    let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
    let log = calls.clone();
    let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
        let log = log.clone();
        async move {
            let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let path = uri.path().to_string();
            let full = uri
                .path_and_query()
                .map(|p| p.to_string())
                .unwrap_or_else(|| path.clone());
            log.lock()
                .unwrap()
                .push((method.to_string(), full, parsed.clone()));
            let ok = |v: Value| (StatusCode::OK, axum::Json(v)).into_response();
            match path.as_str() {
                "/health" => StatusCode::OK.into_response(),
                "/v1/models" => ok(json!({"object": "list", "data": [{"id": "Qwen/fake", "object": "model"}]})),
                "/v1/completions" => ok(json!({
                    "id": "cmpl-1", "object": "text_completion", "created": 1, "model": "Qwen/fake",
                    "choices": [{
                        "index": 0, "text": " four", "finish_reason": "length", "stop_reason": null,
                        "logprobs": {"text_offset": [0, 3], "token_logprobs": [-0.5, -0.25],
                                     "tokens": [" fo", "ur"], "top_logprobs": [{" fo": -0.5}, {"ur": -0.25}]},
                        "token_ids": [17, 18], "prompt_token_ids": parsed["prompt"],
                    }],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
                })),
                "/get_world_size" => ok(json!({"world_size": world_size})),
                "/init_weight_transfer_engine" => ok(json!({"message": "Weight transfer initialized"})),
                "/update_weights" => ok(json!({"message": "Weights updated"})),
                "/pause" => ok(json!({"status": "paused"})),
                "/resume" => ok(json!({"status": "resumed"})),
                "/sleep" | "/wake_up" | "/reset_prefix_cache" | "/collective_rpc" => {
                    StatusCode::OK.into_response()
                }
                _ => (StatusCode::NOT_FOUND, axum::Json(json!({"detail": "Not Found"}))).into_response(),
            }
        }
    });
    (spawn_router(app), calls)
}

/// The recorded calls other than readiness probes, as `(METHOD path, body)`.
fn control_calls(calls: &Mutex<Vec<Call>>) -> Vec<(String, Value)> {
    calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, p, _)| !["/health", "/v1/models", "/is_paused"].contains(&p.as_str()))
        .map(|(m, p, b)| (format!("{m} {p}"), b.clone()))
        .collect()
}

#[test]
fn the_client_drives_a_vllm_server_through_generation_sync_and_sleep() {
    let (url, calls) = fake_vllm(2);
    let c = vllm_client(vec![url]);
    let rt = rt();
    rt.block_on(c.wait_ready(Duration::from_secs(10))).unwrap();

    // Generation: token ids in, token ids and log-probs out, model from /v1/models.
    let params = SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(2)
    };
    let out = rt
        .block_on(c.generate(
            &[vec![1, 2, 3]],
            &SampleStream::sequence(Some(1), 1),
            &params,
            &["traj-0".into()],
        ))
        .unwrap();
    assert_eq!(out[0].token_ids, vec![17, 18]);
    assert_eq!(out[0].logprobs, vec![-0.5, -0.25]);
    assert_eq!(out[0].stop_reason, StopReason::Length);
    let gen = control_calls(&calls).remove(0);
    assert_eq!(gen.0, "POST /v1/completions");
    assert_eq!(gen.1["prompt"], json!([1, 2, 3]));
    assert_eq!(gen.1["model"], "Qwen/fake");
    assert_eq!(gen.1["return_token_ids"], true);
    assert_eq!(gen.1["max_tokens"], 2);
    calls.lock().unwrap().clear();

    // A checkpoint weight sync: pause (keep), reload from the checkpoint, drop
    // the prefix cache, resume.
    let tmp = tempfile::tempdir().unwrap();
    let model_dir = tmp.path().join("policy");
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &model_dir, 5).unwrap();
    let policy = CausalLm::from_pretrained(&model_dir, &cpu()).unwrap();
    let tokenizer = Tokenizer::from_dir(&model_dir).unwrap();
    let engine = RolloutEngine::remote(c, None);
    let sync_dir = tmp.path().join("sync");
    let mut sync = WeightSync::new(WeightSyncBackend::Checkpoint, sync_dir.clone());
    let report = sync
        .sync(&policy, &tokenizer, &engine, 1, rt.handle())
        .unwrap();
    assert!(report.bytes > 0);
    assert_eq!(
        report.versions,
        vec![None],
        "vLLM reports no weight version"
    );
    let v1 = sync_dir.join("v1");
    assert_eq!(
        control_calls(&calls),
        vec![
            ("POST /pause?mode=keep&clear_cache=false".into(), json!({})),
            (
                "POST /collective_rpc".into(),
                json!({"method": "reload_weights", "kwargs": {"weights_path": v1}})
            ),
            (
                "POST /reset_prefix_cache?reset_running_requests=true".into(),
                json!({"reset_running_requests": true})
            ),
            ("POST /resume".into(), json!({})),
        ]
    );
    assert!(v1.join("config.json").is_file());
    calls.lock().unwrap().clear();

    // Sleep, wake and cache reset, with vLLM's empty answers.
    let c = engine.remote_client().unwrap();
    rt.block_on(c.sleep(1)).unwrap();
    rt.block_on(c.wake_up(&["weights", "kv_cache"])).unwrap();
    rt.block_on(c.wake_up(&[])).unwrap();
    rt.block_on(c.reset_prefix_cache()).unwrap();
    assert_eq!(rt.block_on(c.world_sizes()).unwrap(), vec![2]);
    assert_eq!(
        control_calls(&calls),
        vec![
            ("POST /sleep?level=1".into(), json!({"level": 1})),
            (
                "POST /wake_up?tags=weights&tags=kv_cache".into(),
                json!({"tags": ["weights", "kv_cache"]})
            ),
            ("POST /wake_up".into(), json!({})),
            (
                "POST /reset_prefix_cache?reset_running_requests=true".into(),
                json!({"reset_running_requests": true})
            ),
            ("GET /get_world_size".into(), Value::Null),
        ]
    );
}

/// SGLang-style control (backend `tch`) against a vLLM server: the 404
/// names the route, so a wrong `backend` is easy to spot.
#[test]
fn the_wrong_protocol_fails_naming_the_route() {
    let (url, _) = fake_vllm(1);
    let c = RemoteEngines::new(RemoteEnginesConfig::new(vec![url])).unwrap();
    let e = rt().block_on(c.pause()).unwrap_err().to_string();
    assert!(e.contains("/pause_generation") && e.contains("404"), "{e}");
}

/// `skyrl serve` for the model in `dir`, in process; returns its url.
/// Weights load from the model's folder's parent (the test's temp dir).
fn serve(dir: &Path) -> String {
    let root = WeightsRoot::new(dir.parent().unwrap()).unwrap();
    spawn_router(router(tiny_state(dir).with_weights_root(root)))
}

fn post(url: &str, path: &str, body: Value) -> (u16, Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    rt().block_on(async {
        let r = reqwest::Client::new()
            .post(format!("{url}{path}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    })
}

fn get(url: &str, path: &str) -> Value {
    let _ = rustls::crypto::ring::default_provider().install_default();
    rt().block_on(async {
        reqwest::get(format!("{url}{path}"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    })
}

#[test]
fn skyrl_serve_answers_the_vllm_protocol() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &a, 3).unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &b, 4).unwrap();
    let url = serve(&a);
    let c = vllm_client(vec![url.clone()]);
    let rt = rt();
    rt.block_on(c.wait_ready(Duration::from_secs(30))).unwrap();
    assert_eq!(rt.block_on(c.world_sizes()).unwrap(), vec![1]);

    // Pause and resume (any mode), sleep and wake, cache reset.
    rt.block_on(c.pause()).unwrap();
    assert_eq!(get(&url, "/is_paused"), json!({"is_paused": true}));
    rt.block_on(c.resume()).unwrap();
    assert_eq!(get(&url, "/is_paused"), json!({"is_paused": false}));
    assert_eq!(post(&url, "/pause?mode=later", json!({})).0, 400);
    rt.block_on(c.sleep(1)).unwrap();
    assert_eq!(get(&url, "/is_sleeping"), json!({"is_sleeping": true}));
    rt.block_on(c.wake_up(&["weights"])).unwrap();
    assert_eq!(get(&url, "/is_sleeping"), json!({"is_sleeping": false}));
    rt.block_on(c.reset_prefix_cache()).unwrap();

    // Reload from disk through /collective_rpc: now it serves model b.
    let tok = Tokenizer::from_dir(&b).unwrap();
    let prompt = tok.encode("2+2=", false).unwrap();
    let params = SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(4)
    };
    let versions = rt.block_on(c.update_weights_from_disk(&b)).unwrap();
    assert_eq!(versions, vec![Some(1)]);
    let got = rt
        .block_on(c.generate(
            std::slice::from_ref(&prompt),
            &SampleStream::sequence(Some(1), 1),
            &params,
            &["t".into()],
        ))
        .unwrap();
    let local = local_engine(&b);
    let want = local
        .generate(std::slice::from_ref(&prompt), &params)
        .unwrap();
    assert_eq!(
        got[0].token_ids, want[0].token_ids,
        "serves the reloaded weights"
    );

    // Tokenizer routes.
    let (status, t) = post(
        &url,
        "/tokenize",
        json!({"prompt": "2+2=", "add_special_tokens": false}),
    );
    assert_eq!(status, 200);
    assert_eq!(t["tokens"], json!(prompt));
    assert_eq!(t["count"], prompt.len());
    let (_, d) = post(&url, "/detokenize", json!({"tokens": prompt}));
    assert_eq!(d["prompt"], "2+2=");

    // What cannot work here is refused with a reason.
    let (status, e) = post(
        &url,
        "/collective_rpc",
        json!({"method": "update_weights_nccl", "kwargs": {"update_info": {"names": [], "dtype_names": [], "shapes": []}}}),
    );
    assert_eq!(status, 400);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("skyrl_start_weight_update"));
    let (status, e) = post(
        &url,
        "/collective_rpc",
        json!({"method": "update_weights_ipc"}),
    );
    assert_eq!(status, 400);
    assert!(e["error"]["message"].as_str().unwrap().contains("CUDA IPC"));
    let (status, e) = post(&url, "/collective_rpc", json!({"method": "reload_weights"}));
    assert_eq!(status, 400);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("weights_path"));
    let (status, e) = post(
        &url,
        "/init_weight_transfer_engine",
        json!({"init_info": {"master_address": "127.0.0.1", "master_port": 1, "rank_offset": 1, "world_size": 2}}),
    );
    assert_eq!(status, 400);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("nccl weight sync") || msg.contains("no CUDA"),
        "{msg}"
    );
    let (status, _) = post(
        &url,
        "/update_weights",
        json!({"update_info": {"names": ["x"]}}),
    );
    assert_eq!(status, 400);
}

/// `/inference/v1/generate` with the payloads SkyRL's `RemoteInferenceClient`
/// sends (`_generate_single` with `get_vllm_sampling_params`, and Tinker's
/// `sample`), read back the way that client reads them.
#[test]
fn skyrl_serve_answers_skyrl_token_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &dir, 3).unwrap();
    let url = serve(&dir);
    let tok = Tokenizer::from_dir(&dir).unwrap();
    let local = local_engine(&dir);
    let prompt = tok.encode("Q: 2+3=", false).unwrap();
    let generate = |body: Value| post(&url, "/inference/v1/generate", body);

    // Rollouts: greedy, as the generator sends them.
    let (status, r) = generate(json!({
        "sampling_params": {"min_tokens": 1, "skip_special_tokens": true,
            "include_stop_str_in_output": true, "max_tokens": 6, "temperature": 0.0,
            "top_p": 1.0, "top_k": -1, "min_p": 0.0, "logprobs": 0, "stop": null,
            "ignore_eos": true},
        "model": "tiny",
        "token_ids": prompt,
    }));
    assert_eq!(status, 200, "{r}");
    let want = local
        .generate(
            std::slice::from_ref(&prompt),
            &SamplingParams {
                ignore_eos: true,
                min_tokens: 1,
                ..SamplingParams::greedy(6)
            },
        )
        .unwrap();
    let choice = &r["choices"][0];
    assert_eq!(choice["token_ids"], json!(want[0].token_ids));
    assert_eq!(choice["finish_reason"], "length");
    let content = choice["logprobs"]["content"].as_array().unwrap();
    assert_eq!(content.len(), 6);
    for (entry, (&id, &lp)) in content
        .iter()
        .zip(want[0].token_ids.iter().zip(&want[0].logprobs))
    {
        assert_eq!(entry["token"], format!("token_id:{id}"));
        assert!((entry["logprob"].as_f64().unwrap() - lp as f64).abs() < 1e-4);
        // logprobs = 0: the sampled token alone, as vLLM answers.
        assert_eq!(entry["top_logprobs"].as_array().unwrap().len(), 1);
    }
    assert!(r["request_id"].is_string());

    // Tinker sampling: n samples with prompt log-probs.
    let (status, r) = generate(json!({
        "sampling_params": {"n": 3, "logprobs": 0, "output_kind": 2, "prompt_logprobs": 2,
            "max_tokens": 4, "temperature": 1.0, "seed": 5},
        "model": "tiny",
        "token_ids": prompt,
    }));
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["choices"].as_array().unwrap().len(), 3);
    let maps = r["prompt_logprobs"].as_array().unwrap();
    assert_eq!(maps.len(), prompt.len());
    assert!(maps[0].is_null());
    for (map, &id) in maps[1..].iter().zip(&prompt[1..]) {
        let map = map.as_object().unwrap();
        assert!((2..=3).contains(&map.len()), "{map:?}");
        let own = &map[&id.to_string()];
        assert!(own["rank"].as_u64().unwrap() >= 1);
        let best = map
            .values()
            .find(|v| v["rank"] == 1)
            .expect("the most likely token");
        assert!(best["logprob"].as_f64() >= own["logprob"].as_f64());
    }

    // min_tokens holds back stop tokens: make greedy's first token a stop token.
    let first = want[0].token_ids[0];
    let with_min = |min_tokens: usize| {
        let (status, r) = generate(json!({
            "sampling_params": {"max_tokens": 4, "temperature": 0.0, "ignore_eos": true,
                "stop_token_ids": [first], "min_tokens": min_tokens},
            "token_ids": prompt,
        }));
        assert_eq!(status, 200, "{r}");
        r["choices"][0].clone()
    };
    let stopped = with_min(0);
    assert_eq!(stopped["token_ids"], json!([first]));
    assert_eq!(stopped["finish_reason"], "stop");
    let held = with_min(2);
    let ids = held["token_ids"].as_array().unwrap();
    assert!(ids.len() >= 2 && ids[0] != json!(first), "{held}");

    // What this engine cannot honour is refused by name.
    for (body, needle) in [
        (
            json!({"token_ids": prompt, "sampling_params": {"structured_outputs": {"json": {}}}}),
            "structured_outputs",
        ),
        (
            json!({"token_ids": prompt, "sampling_params": {"bogus": 1}}),
            "bogus",
        ),
        (
            json!({"token_ids": prompt, "sampling_params": {}, "features": {"mm_hashes": {}}}),
            "features",
        ),
        (
            json!({"token_ids": prompt, "sampling_params": {"logprobs": -1}}),
            "logprobs",
        ),
        (
            json!({"token_ids": prompt, "sampling_params": {"min_tokens": 9, "max_tokens": 2}}),
            "min_tokens",
        ),
        (
            json!({"token_ids": prompt, "sampling_params": {}, "model": "other"}),
            "other",
        ),
    ] {
        let (status, e) = generate(body);
        assert!(status == 400 || status == 404, "{status} {e}");
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{msg}");
    }
}
