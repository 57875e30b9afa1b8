//! The official `tinker` client (pinned by scripts/setup) against the service
//! on a tiny model on loopback: supervised and RL loops that learn, sampler
//! weights that survive a server restart, and bad requests that fail with
//! the field named while the server keeps serving; an API key, exported
//! weights and their download links, and the `tinker checkpoint` CLI.

mod common;

use common::{
    client, client_with_key, floats, options, restart_keeps_saved_weights, serve, server,
    tiny_model,
};

#[test]
fn supervised_and_rl_loops_learn_through_the_official_client() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let url = server(&model, &dir.path().join("data"), None);
    let base = model.display().to_string();

    let sft = client(&["sft", &url, &base]);
    let losses = floats(&sft["losses"]);
    assert_eq!(losses.len(), 10);
    assert!(
        losses[9] < 0.85 * losses[0],
        "cross_entropy losses {losses:?}"
    );

    // 16 samples per iteration, 10 iterations: the share of rewarded tokens
    // starts near half and climbs.
    let rl = client(&["rl", &url, &base]);
    let rewards = floats(&rl["rewards"]);
    let first: f64 = rewards[..3].iter().sum::<f64>() / 3.0;
    let last: f64 = rewards[7..].iter().sum::<f64>() / 3.0;
    assert!(last > first + 0.15, "rewards {rewards:?}");
}

#[test]
fn sampler_weights_and_results_survive_a_restart_and_bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let data = dir.path().join("data");
    let base = model.display().to_string();
    let second = restart_keeps_saved_weights(&model, &data, None);

    let errors = client(&["errors", &second, &base]);
    for key in [
        "vocab",
        "context",
        "lengths",
        "policy_inputs",
        "sampler_path",
        "num_samples",
        "big_body",
    ] {
        assert!(errors["errors"][key].is_string(), "{key}: {errors}");
    }
    assert!(floats(&errors["after"])[0].is_finite());
}

#[test]
fn saved_state_resumes_exactly_with_its_optimizer() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let url = server(&model, &dir.path().join("data"), None);
    let out = client(&["state", &url, &model.display().to_string()]);
    let (after, resumed) = (floats(&out["after"]), floats(&out["resumed"]));
    // The resumed client's two steps are the original's next two steps.
    for (a, b) in after.iter().zip(&resumed) {
        assert!((a - b).abs() <= 1e-5 * a.abs(), "{after:?} vs {resumed:?}");
    }
    // Without the optimizer state the first step is the same (same weights),
    // the second differs (fresh Adam moments).
    let fresh = floats(&out["fresh_optimizer"]);
    assert!((fresh[0] - after[0]).abs() <= 1e-5 * after[0].abs());
    assert!(
        (fresh[1] - after[1]).abs() > 1e-5 * after[1].abs(),
        "{fresh:?} vs {after:?}"
    );
    let path = out["path"].as_str().unwrap();
    assert!(path.ends_with("/weights/ckpt"), "{path}");
    assert!(
        out["listed"].as_array().unwrap().iter().any(|p| p == path),
        "{out}"
    );
    assert_eq!(out["lora_rank"], 8);
    let closed = out["closed"].as_str().unwrap();
    assert!(
        closed.starts_with("400") && closed.contains("finished"),
        "{closed}"
    );
}

#[test]
fn api_keys_checkpoint_exports_and_the_cli_download() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let key = "tml-test-key-0123";
    let mut opts = options(&model, &dir.path().join("data"), None);
    opts.api_key = Some(key.into());
    let url = serve(&opts);
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let base = model.display().to_string();
    let out = client_with_key(
        &["checkpoints", &url, &base, out_dir.to_str().unwrap()],
        key,
    );
    let seen = &out["seen"];
    let wrong = seen["wrong_key"].as_str().unwrap();
    assert!(
        wrong.starts_with("401") && wrong.contains("API key"),
        "{wrong}"
    );
    assert_eq!(seen["no_key"], 401);
    assert_eq!(seen["healthz"], 200);
    // TTLs are kept, cleared and listed; publishing shows in the list.
    assert_eq!(seen["listed_expires"], true);
    assert_eq!(
        seen["after_ttl_and_publish"],
        serde_json::json!([true, true])
    );
    assert!(
        seen["short_ttl"]
            .as_str()
            .unwrap()
            .contains("ttl_seconds 5"),
        "{seen}"
    );
    // The export is PEFT's adapter files; the CLI downloads the same files
    // with the same tensors, and its temporary export is deleted after.
    let files = out["files"].as_object().unwrap();
    let mut names: Vec<&String> = files.keys().collect();
    names.sort();
    assert_eq!(
        names,
        ["adapter_config.json", "adapter_model.safetensors"],
        "{out}"
    );
    assert_eq!(out["cli_files"], serde_json::json!(names));
    assert_eq!(seen["same_adapter"], true);
    assert_eq!(seen["adapter_r"], 8);
    assert_eq!(seen["exports_left"], serde_json::json!([out["ext"]]));
    // A deleted export's links are dead and it leaves the list.
    assert_eq!(seen["link_after_delete"], 404);
    assert_eq!(seen["listed_after_delete"], false);
}

#[test]
fn a_clients_backlog_does_not_hold_up_another_client() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let data = dir.path().join("data");
    let url = server(&model, &data, None);
    let out = client(&["fair", &url, &model.display().to_string()]);
    let (a, b) = (out["a"].as_str().unwrap(), out["b"].as_str().unwrap());
    // The order the model thread finished the forward-backward passes in.
    let db = rusqlite::Connection::open(data.join("tinker.sqlite")).unwrap();
    let mut st = db
        .prepare(
            "SELECT model_id FROM futures WHERE kind = 'forward_backward' AND status = 'completed'
             ORDER BY finished, request_id",
        )
        .unwrap();
    let order: Vec<String> = st
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(order.len(), 25, "{order:?}");
    let b_at = order.iter().position(|m| m == b).unwrap();
    // Served in turns: B's one pass does not wait for A's whole backlog
    // (first in, first out would put it last).
    let a_after_b = order[b_at + 1..].iter().filter(|m| *m == a).count();
    assert!(a_after_b >= 8, "B finished at {b_at} of {order:?}");
}
