//! Every key of skyrl-train 0.3.1's ppo_base_config.yaml (fixture regenerated
//! by tests/fixtures/make_skyrl_keys.py), of skyrl 0.3.0's AlgorithmConfig and
//! of its SFTConfig (the `skyrl sft` config; both from
//! tests/fixtures/make_skyrl030_keys.py), set to skyrl's default: the config
//! loads with it, or refuses it with an error naming the key. Nothing of a
//! SkyRL config is silently dropped: unknown keys fail by name (every section
//! denies unknown fields), and keys this trainer parses but cannot honour are
//! refused by validation (tests/config.rs covers those one by one).

use serde_json::Value;
use skyrl_train::config::legacy::LEGACY_ENGINE_KEYS;
use skyrl_train::config::load_config_str;
use skyrl_train::sft::load_sft_config_str;

#[derive(serde::Deserialize)]
struct Key {
    key: String,
    default: Value,
}

fn keys(fixture: &str) -> Vec<Key> {
    let path = format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn every_skyrl_key_loads_or_is_refused_by_name() {
    let (accepted, _) = check_keys("skyrl_train_0.3.1_keys.json", rl_loads);
    assert!(
        accepted.len() > 100,
        "only {} SkyRL keys load",
        accepted.len()
    );
}

#[test]
fn every_skyrl_0_3_0_algorithm_key_loads() {
    let (accepted, refused) = check_keys("skyrl_0.3.0_keys.json", rl_loads);
    assert!(
        refused.is_empty(),
        "skyrl 0.3.0 algorithm keys refused at their defaults: {refused:?}"
    );
    assert_eq!(accepted.len(), 45, "{accepted:?}");
}

/// SkyRL's SFTConfig: every key loads at its default or is refused by name.
/// Refused: `strategy` (0.3.0's default megatron is not run here),
/// `placement.num_gpus_per_node` (4 ranks cannot split the default batch of
/// 4 into micro-batches of 2, as in 0.3.0), and the Megatron TP/PP sizes at
/// the dataclass's 1 (SFTConfig's own default is 2; Megatron keys load only
/// at SFTConfig's defaults). Every other key loads.
#[test]
fn every_skyrl_0_3_0_sft_key_loads_or_is_refused_by_name() {
    let (accepted, mut refused) = check_keys("skyrl_0.3.0_sft_keys.json", sft_loads);
    refused.sort();
    assert_eq!(
        refused,
        [
            "megatron_config.pipeline_model_parallel_size",
            "megatron_config.tensor_model_parallel_size",
            "placement.num_gpus_per_node",
            "strategy",
        ],
        "accepted: {accepted:?}"
    );
    assert_eq!(accepted.len(), 91, "{accepted:?}");
}

fn rl_loads(arg: String) -> Result<(), String> {
    load_config_str("", "<skyrl default>", &[arg])
        .map(drop)
        .map_err(|e| format!("{e:#}"))
}

fn sft_loads(arg: String) -> Result<(), String> {
    load_sft_config_str("", "<skyrl default>", &[arg])
        .map(drop)
        .map_err(|e| format!("{e:#}"))
}

/// Loads every key of `fixture` at its default with `load`; returns the
/// accepted and the refused-by-name keys, failing on any refused without its name.
fn check_keys(fixture: &str, load: fn(String) -> Result<(), String>) -> (Vec<String>, Vec<String>) {
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    let mut silent = Vec::new();
    for k in keys(fixture) {
        if k.default.is_null() {
            continue; // an interpolation or null default: nothing to set
        }
        let arg = format!("{}={}", k.key, k.default);
        match load(arg) {
            Ok(()) => accepted.push(k.key),
            Err(text) => {
                let last = k.key.rsplit('.').next().unwrap();
                // skyrl-train 0.3.1's flat engine keys are refused by their new name.
                let moved = LEGACY_ENGINE_KEYS
                    .iter()
                    .find(|(old, _)| k.key == format!("generator.{old}"))
                    .map(|(_, new)| format!("generator.inference_engine.{new}"));
                if text.contains(&k.key)
                    || text.contains(last)
                    || moved.is_some_and(|m| text.contains(&m))
                {
                    refused.push(k.key);
                } else {
                    silent.push(format!("{}: {text}", k.key));
                }
            }
        }
    }
    println!("accepted {}: {accepted:?}", accepted.len());
    println!("refused by name {}: {refused:?}", refused.len());
    assert!(
        silent.is_empty(),
        "refused without naming the key:\n{}",
        silent.join("\n")
    );
    (accepted, refused)
}

#[test]
fn skyrl_train_0_3_1_engine_keys_move_to_the_inference_engine_section() {
    let ov = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let c = load_config_str(
        "generator:\n  num_inference_engines: 2\n  max_num_seqs: 64\n",
        "old.yaml",
        &ov(&["generator.remote_inference_engine_urls=[]"]),
    )
    .unwrap();
    let ie = &c.generator.inference_engine;
    assert_eq!((ie.num_engines, ie.max_num_seqs), (2, 64));
    assert!(ie.remote_urls.is_empty());
    let e = load_config_str(
        "",
        "x",
        &ov(&[
            "generator.max_num_seqs=8",
            "generator.inference_engine.max_num_seqs=16",
        ]),
    )
    .unwrap_err();
    assert!(format!("{e}").contains("both set"), "{e}");
    // A moved key this trainer does not know is still refused by its new name.
    let e = load_config_str(
        "",
        "x",
        &ov(&["generator.inference_engine_pipeline_parallel_size=2"]),
    )
    .unwrap_err();
    assert!(
        format!("{e}").contains("pipeline_parallel_size=2: only 1"),
        "{e}"
    );
    let e = load_config_str("", "x", &ov(&["generator.enable_chunked_prefill=false"])).unwrap_err();
    assert!(format!("{e}").contains("enable_chunked_prefill"), "{e}");
}
