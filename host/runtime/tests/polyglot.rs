//! One conformance suite for the gsm8k example written in every SDK
//! language: the same scripted episodes must give identical observations,
//! rewards, done flags and errors. Languages: Rust (envs/gsm8k), Python
//! (envs/gsm8k_py), JavaScript (envs/gsm8k_js), C (envs/gsm8k_c) and Go
//! (envs/gsm8k_go), each through its SDK under sdk/.

mod common;

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use serde_json::{json, Value};
use skyrl_runtime::{GuestErrorKind, Message, Plugin, PluginError, PluginKind};

/// The gsm8k example per language.
const IMPLEMENTATIONS: &[&str] = &["gsm8k", "gsm8k_py", "gsm8k_js", "gsm8k_c", "gsm8k_go"];

/// (ground truth, response) pairs covering skyrl-gym's strict extraction.
const EPISODES: &[(&str, &str)] = &[
    ("72", "48 + 24 = 72\n#### 72"),
    ("72", "#### 70"),
    ("72", "The answer is 72"),
    ("1234", "#### 1,234"),
    ("1234", "#### $1234"),
    ("-7.5", "so #### -7.5 and #### 3"),
    ("3", "#### - then #### 3"),
    ("42", "##### 42"),
    ("42", ""),
];

/// The loaded implementation `name` (loaded once per test binary).
fn implementation(name: &str) -> Plugin {
    static LOADED: OnceLock<Mutex<BTreeMap<String, Plugin>>> = OnceLock::new();
    let mut loaded = LOADED.get_or_init(Default::default).lock().unwrap();
    loaded
        .entry(name.to_string())
        .or_insert_with(|| common::load(common::shared_engine(), name))
        .clone()
}

/// Everything observable about one episode.
fn transcript(name: &str, truth: &Value, response: &str) -> Value {
    let plugin = implementation(name);
    assert_eq!(
        plugin.metadata().info.kind,
        PluginKind::Environment,
        "{name}"
    );
    let extras = json!({"reward_spec": {"method": "rule", "ground_truth": truth}});
    let mut env = plugin.create_env(&json!({}), &extras).expect("create");
    let prompt = vec![Message::new("system", "sys"), Message::user("question")];
    let init = env.init(&prompt).expect("init");
    let step = env.step(response).expect("step");
    env.close().expect("close");
    json!({
        "prompt": init.prompt.iter().map(|m| [&m.role, &m.content]).collect::<Vec<_>>(),
        "init_metadata": init.metadata,
        "observations": step.observations.iter().map(|m| [&m.role, &m.content]).collect::<Vec<_>>(),
        "reward": step.reward,
        "done": step.done,
    })
}

#[test]
fn every_language_plays_the_same_episodes() {
    for (truth, response) in EPISODES {
        let reference = transcript(IMPLEMENTATIONS[0], &json!(truth), response);
        for name in &IMPLEMENTATIONS[1..] {
            assert_eq!(
                transcript(name, &json!(truth), response),
                reference,
                "{name} on {response:?}"
            );
        }
    }
    // A numeric ground truth reads as its JSON spelling in every language.
    for name in IMPLEMENTATIONS {
        assert_eq!(
            transcript(name, &json!(1234), "#### 1234")["reward"],
            1.0,
            "{name}"
        );
    }
}

#[test]
fn every_language_reports_a_missing_ground_truth_as_a_config_error() {
    for name in IMPLEMENTATIONS {
        let plugin = implementation(name);
        let err = plugin
            .create_env(&json!({}), &json!({"reward_spec": {}}))
            .err()
            .expect("refused");
        assert!(
            matches!(err, PluginError::Guest { kind: GuestErrorKind::InvalidConfig, ref message, .. } if message.contains("ground_truth")),
            "{name}: {err}"
        );
    }
}
