//! Every shipped plugin runs through its world's contract with scripted
//! episodes whose expected rewards follow skyrl-gym's semantics.

mod common;

use std::sync::Arc;

use serde_json::{json, Value};
use skyrl_runtime::{CacheOutcome, Message, Plugin, PluginKind, ToolRouter, World};

struct Episode {
    plugin: &'static str,
    config: Value,
    extras: Value,
    actions: &'static [&'static str],
    rewards: &'static [f64],
    done_at_end: bool,
}

fn episodes() -> Vec<Episode> {
    vec![
        Episode {
            plugin: "gsm8k",
            config: json!({}),
            extras: json!({ "reward_spec": { "ground_truth": "72" } }),
            actions: &["She sold 48 + 24 = 72 clips.\n#### 72"],
            rewards: &[1.0],
            done_at_end: true,
        },
        Episode {
            plugin: "gsm8k",
            config: json!({}),
            extras: json!({ "reward_spec": { "ground_truth": "72" } }),
            actions: &["The answer is 72"],
            rewards: &[0.0],
            done_at_end: true,
        },
        Episode {
            plugin: "gsm8k_multi_turn",
            config: json!({}),
            extras: json!({ "reward_spec": { "ground_truth": "1000" }, "max_turns": 3 }),
            actions: &["#### 7", "no answer", "#### 1,000"],
            rewards: &[0.2 / 3.0, 0.0, 1.0],
            done_at_end: true,
        },
        Episode {
            plugin: "aime",
            config: json!({}),
            extras: json!({ "reward_model": { "ground_truth": "204" } }),
            actions: &["So m + n = 204.\nAnswer: $204$"],
            rewards: &[1.0],
            done_at_end: true,
        },
        Episode {
            plugin: "aime",
            config: json!({}),
            extras: json!({ "reward_model": { "ground_truth": "204" } }),
            actions: &["The answer is \\boxed{204}"],
            rewards: &[-1.0],
            done_at_end: true,
        },
        Episode {
            plugin: "string_transform",
            config: json!({}),
            extras: json!({ "reward_spec": { "ground_truth": "abca" }, "extra_info": { "task": "copy", "input": "abca" } }),
            actions: &["abcb"],
            rewards: &[0.75],
            done_at_end: true,
        },
        Episode {
            plugin: "hostile",
            config: json!({ "attack": "none" }),
            extras: json!({}),
            actions: &["x"],
            rewards: &[1.0],
            done_at_end: true,
        },
    ]
}

#[test]
fn scripted_episodes_match_reference_rewards() {
    let engine = common::engine(Default::default());
    for episode in episodes() {
        let plugin = common::load(&engine, episode.plugin);
        assert_eq!(plugin.metadata().info.kind, PluginKind::Environment);
        assert_eq!(plugin.metadata().worlds, vec![World::EnvironmentPlugin]);
        let mut env = plugin.create_env(&episode.config, &episode.extras).unwrap();
        let prompt = vec![Message::user("question")];
        let init = env.init(&prompt).unwrap();
        assert!(
            !init.prompt.is_empty(),
            "{}: init returned no prompt",
            episode.plugin
        );
        for (turn, (action, expected)) in episode.actions.iter().zip(episode.rewards).enumerate() {
            let step = env.step(action).unwrap();
            assert!(
                (step.reward - expected).abs() < 1e-9,
                "{} turn {turn}: reward {} != {expected}",
                episode.plugin,
                step.reward
            );
            let last = turn + 1 == episode.actions.len();
            if !last {
                assert!(!step.done, "{} ended early at turn {turn}", episode.plugin);
                assert!(
                    !step.observations.is_empty(),
                    "{}: no follow-up observation",
                    episode.plugin
                );
            } else {
                assert_eq!(
                    step.done, episode.done_at_end,
                    "{}: done flag",
                    episode.plugin
                );
            }
        }
        assert!(env.metrics().unwrap().is_object());
        env.close().unwrap();
    }
}

#[test]
fn multi_turn_observations_follow_skyrl_gym() {
    let engine = common::engine(Default::default());
    let plugin = common::load(&engine, "gsm8k_multi_turn");
    let extras = json!({ "reward_spec": { "ground_truth": "5" }, "max_turns": 2 });
    let mut env = plugin.create_env(&json!({}), &extras).unwrap();
    env.init(&[Message::user("q")]).unwrap();
    let first = env.step("#### 4").unwrap();
    assert!(!first.done);
    assert_eq!(first.observations.len(), 1);
    assert_eq!(first.observations[0].role, "user");
    let last = env.step("#### 4").unwrap();
    assert!(last.done, "max_turns reached");
}

#[test]
fn tools_are_routed_by_name_across_plugins() {
    let engine = common::engine(Default::default());
    let calculator = common::load(&engine, "calculator");
    assert_eq!(calculator.metadata().worlds, vec![World::ToolPlugin]);
    let router = Arc::new(ToolRouter::new(vec![calculator]).unwrap());
    assert!(router.provides("calculator"));
    assert_eq!(
        router
            .call("calculator", r#"{"expression":"6*7"}"#)
            .unwrap(),
        "42"
    );
    assert!(router.call("nope", "{}").is_err());

    let user = common::load(&engine, "tool_user");
    assert_eq!(
        user.metadata().info.uses_tools,
        vec!["calculator".to_string()]
    );
    // Without the tool the env cannot be wired up.
    let empty = Arc::new(ToolRouter::new(vec![]).unwrap());
    assert!(user.clone().with_tools(empty).is_err());

    let user = user.with_tools(router).unwrap();
    let mut env = user.create_env(&json!({}), &json!({})).unwrap();
    env.init(&[Message::user("compute")]).unwrap();
    let step = env.step("(2+3)*4").unwrap();
    assert_eq!(step.observations[0].content, "20");
    assert_eq!(step.reward, 1.0);
}

#[test]
fn reward_plugins_score_responses() {
    let engine = common::engine(Default::default());
    let reward = common::load(&engine, "gsm8k_reward");
    assert_eq!(reward.metadata().worlds, vec![World::RewardPlugin]);
    let mut scorer = reward.create_reward().unwrap();
    let prompt = [Message::user("q")];
    assert_eq!(
        scorer
            .score(&prompt, "#### 12", &json!("12"), &json!({}))
            .unwrap(),
        1.0
    );
    assert_eq!(
        scorer
            .score(&prompt, "#### 13", &json!("12"), &json!({}))
            .unwrap(),
        0.0
    );
    // Using a plugin as the wrong world is a clear error.
    assert!(matches!(
        reward.create_env(&json!({}), &json!({})).err(),
        Some(skyrl_runtime::PluginError::WrongWorld { .. })
    ));
}

#[test]
fn compiled_components_are_cached_on_disk() {
    let cache = tempfile::tempdir().unwrap();
    let options = || skyrl_runtime::EngineOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Default::default()
    };
    let bytes = std::fs::read(common::plugin_path("gsm8k")).unwrap();
    let first_engine = skyrl_runtime::PluginEngine::new(options()).unwrap();
    let first = Plugin::from_bytes(&first_engine, &bytes, "gsm8k").unwrap();
    assert_eq!(first.cache_outcome(), CacheOutcome::Compiled);
    let again = Plugin::from_bytes(&first_engine, &bytes, "gsm8k").unwrap();
    assert_eq!(again.cache_outcome(), CacheOutcome::Memory);
    let second_engine = skyrl_runtime::PluginEngine::new(options()).unwrap();
    let second = Plugin::from_bytes(&second_engine, &bytes, "gsm8k").unwrap();
    assert_eq!(second.cache_outcome(), CacheOutcome::Disk);
    // The cached code behaves like the fresh compile.
    let mut env = second
        .create_env(
            &json!({}),
            &json!({ "reward_spec": { "ground_truth": "3" } }),
        )
        .unwrap();
    env.init(&[Message::user("q")]).unwrap();
    assert_eq!(env.step("#### 3").unwrap().reward, 1.0);
}

#[test]
fn instances_run_in_parallel_threads() {
    let engine = common::engine(Default::default());
    let plugin = common::load(&engine, "gsm8k");
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let plugin = plugin.clone();
            std::thread::spawn(move || {
                let extras = json!({ "reward_spec": { "ground_truth": i.to_string() } });
                let mut env = plugin.create_env(&json!({}), &extras).unwrap();
                env.init(&[Message::user("q")]).unwrap();
                env.step(&format!("#### {i}")).unwrap().reward
            })
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().unwrap(), 1.0);
    }
}
