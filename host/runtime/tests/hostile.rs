//! Hostile plugins are contained, each with its specific error, and the
//! host (and other instances) keep working afterwards.

mod common;

use serde_json::json;
use skyrl_runtime::{Message, PluginError, SandboxLimits};

fn attack(
    attack: &str,
    limits: SandboxLimits,
) -> (
    skyrl_runtime::Result<skyrl_runtime::StepOutput>,
    skyrl_runtime::EnvInstance,
) {
    let engine = common::engine(limits);
    let plugin = common::load(&engine, "hostile");
    let mut env = plugin
        .create_env(&json!({ "attack": attack }), &json!({}))
        .expect("create hostile env");
    env.init(&[Message::user("go")]).expect("init");
    (env.step("attack"), env)
}

#[test]
fn infinite_loop_runs_out_of_fuel() {
    let (result, mut env) = attack("loop", common::tight_limits());
    assert!(
        matches!(result, Err(PluginError::OutOfFuel { ref call, .. }) if call == "step"),
        "{result:?}"
    );
    // The trapped instance refuses further use with a clear error.
    assert!(matches!(
        env.step("again"),
        Err(PluginError::Poisoned { .. })
    ));
}

#[test]
fn infinite_loop_without_fuel_is_stopped_at_the_wall_clock_deadline() {
    let limits = SandboxLimits {
        fuel_per_call: None,
        call_timeout_ms: 300,
        ..common::tight_limits()
    };
    let engine = common::engine(limits);
    assert!(!engine.is_metered());
    let plugin = common::load(&engine, "hostile");
    let mut env = plugin
        .create_env(&json!({ "attack": "loop" }), &json!({}))
        .expect("create hostile env");
    env.init(&[Message::user("go")]).expect("init");
    let started = std::time::Instant::now();
    let result = env.step("attack");
    let took = started.elapsed();
    assert!(
        matches!(
            result,
            Err(PluginError::Timeout {
                timeout_ms: 300,
                ..
            })
        ),
        "{result:?}"
    );
    // Stopped at the deadline, within 2x of it (epoch ticks of 5 ms).
    assert!(
        took >= std::time::Duration::from_millis(295)
            && took < std::time::Duration::from_millis(600),
        "stopped after {took:?}"
    );
}

#[test]
fn fuel_limits_need_a_metering_engine() {
    let engine = common::engine(SandboxLimits {
        fuel_per_call: None,
        ..common::tight_limits()
    });
    let plugin = common::load(&engine, "hostile").with_limits(common::tight_limits());
    let Err(err) = plugin.create_env(&json!({ "attack": "loop" }), &json!({})) else {
        panic!("fuel on an engine without metering was accepted");
    };
    assert!(err.to_string().contains("fuel metering"), "{err}");
}

#[test]
fn memory_bomb_hits_the_memory_limit() {
    let (result, _env) = attack("membomb", common::tight_limits());
    assert!(
        matches!(result, Err(PluginError::MemoryLimit { limit_bytes, .. }) if limit_bytes == 64 << 20),
        "{result:?}"
    );
}

#[test]
fn deep_recursion_overflows_the_wasm_stack() {
    let (result, _env) = attack("recursion", common::tight_limits());
    assert!(
        matches!(result, Err(PluginError::StackOverflow { .. })),
        "{result:?}"
    );
}

#[test]
fn panic_is_a_trap() {
    let (result, _env) = attack("trap", common::tight_limits());
    match result {
        Err(PluginError::Trap { reason, .. }) => {
            assert!(reason.contains("unreachable"), "{reason}")
        }
        other => panic!("expected a trap, got {other:?}"),
    }
}

#[test]
fn filesystem_is_not_reachable() {
    let (result, _env) = attack("read_passwd", common::tight_limits());
    let step = result.expect("the plugin reports the failed read itself");
    let observation = &step.observations[0].content;
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    assert!(
        !observation.contains("root:"),
        "guest read the host file: {observation}"
    );
    assert!(passwd.is_empty() || !observation.contains(passwd.lines().next().unwrap_or("root")));
    assert_eq!(step.reward, 0.0);
}

#[test]
fn read_only_grant_allows_reading_but_not_writing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("passwd"), "granted-file-content").unwrap();
    let engine = common::engine(common::tight_limits());
    let plugin = common::load(&engine, "hostile")
        .with_policy(skyrl_runtime::SandboxPolicy {
            read_only_dirs: vec![skyrl_runtime::ReadOnlyDir {
                host: dir.path().to_path_buf(),
                guest: "/etc".into(),
            }],
            ..skyrl_runtime::SandboxPolicy::default()
        })
        .unwrap();
    let mut env = plugin
        .create_env(&json!({ "attack": "read_passwd" }), &json!({}))
        .unwrap();
    env.init(&[Message::user("go")]).unwrap();
    let step = env.step("attack").unwrap();
    assert_eq!(step.observations[0].content, "granted-file-content");
}

#[test]
fn one_trapping_instance_leaves_the_others_working() {
    let engine = common::engine(common::tight_limits());
    let plugin = common::load(&engine, "hostile");
    let mut good = plugin
        .create_env(&json!({ "attack": "none" }), &json!({}))
        .unwrap();
    let mut bad = plugin
        .create_env(&json!({ "attack": "trap" }), &json!({}))
        .unwrap();
    good.init(&[Message::user("go")]).unwrap();
    bad.init(&[Message::user("go")]).unwrap();
    assert!(bad.step("x").is_err());
    let step = good.step("x").expect("the healthy instance still works");
    assert_eq!(step.reward, 1.0);
    // And the plugin can still create fresh instances.
    let mut fresh = plugin
        .create_env(&json!({ "attack": "none" }), &json!({}))
        .unwrap();
    fresh.init(&[Message::user("go")]).unwrap();
    assert_eq!(fresh.step("x").unwrap().reward, 1.0);
}

#[test]
fn malformed_components_get_clear_errors() {
    let engine = common::engine(common::tight_limits());
    let garbage =
        skyrl_runtime::Plugin::from_bytes(&engine, b"definitely not wasm", "garbage.wasm");
    assert!(
        matches!(garbage, Err(PluginError::Malformed { .. })),
        "{:?}",
        garbage.err()
    );
    // A core module (not a component).
    let core = skyrl_runtime::Plugin::from_bytes(&engine, b"\0asm\x01\0\0\0", "core.wasm");
    match core {
        Err(PluginError::Malformed { reason, .. }) => {
            assert!(reason.contains("core WebAssembly module"), "{reason}")
        }
        other => panic!("expected Malformed, got {:?}", other.err()),
    }
    // A truncated component.
    let bytes = std::fs::read(common::plugin_path("gsm8k")).unwrap();
    let truncated =
        skyrl_runtime::Plugin::from_bytes(&engine, &bytes[..bytes.len() / 2], "truncated.wasm");
    assert!(
        matches!(truncated, Err(PluginError::Malformed { .. })),
        "{:?}",
        truncated.err()
    );
    // A missing file.
    let missing = skyrl_runtime::Plugin::load(&engine, std::path::Path::new("/nonexistent/x.wasm"));
    assert!(matches!(missing, Err(PluginError::Io { .. })));
}

#[test]
fn bad_config_is_a_guest_error_not_a_trap() {
    let engine = common::engine(common::tight_limits());
    let plugin = common::load(&engine, "gsm8k");
    let err = plugin
        .create_env(&json!({}), &json!({}))
        .err()
        .expect("missing ground truth");
    assert!(
        matches!(
            err,
            PluginError::Guest {
                kind: skyrl_runtime::GuestErrorKind::InvalidConfig,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn reused_sandboxes_serve_their_episodes_and_a_hostile_one_is_discarded() {
    let engine = common::engine(common::tight_limits());
    let plugin = common::load(&engine, "hostile").with_episodes_per_instance(3);
    assert_eq!(plugin.episodes_per_instance(), 3);
    let episode = |attack: &str| {
        let mut env = plugin
            .create_env(&json!({ "attack": attack }), &json!({}))
            .expect("create");
        env.init(&[Message::user("go")]).expect("init");
        let out = env.step("x");
        if out.is_ok() {
            env.close().expect("close");
        }
        out
    };
    // The guest counts the episodes its instance created (a module global).
    let count = |out: skyrl_runtime::Result<skyrl_runtime::StepOutput>| {
        out.expect("harmless step").metadata["instance_episodes"]
            .as_u64()
            .expect("instance_episodes")
    };
    let seen: Vec<u64> = (0..4).map(|_| count(episode("none"))).collect();
    assert_eq!(
        seen,
        [1, 2, 3, 1],
        "three episodes per sandbox, then a fresh one"
    );
    assert_eq!(plugin.idle_env_instances(), 1);

    // A trap, a memory bomb or running out of fuel discards the (reused)
    // sandbox it hit; the next episode gets a fresh one.
    for attack in ["trap", "membomb", "loop"] {
        assert_eq!(plugin.idle_env_instances(), 1, "{attack}");
        assert!(episode(attack).is_err(), "{attack}");
        assert_eq!(plugin.idle_env_instances(), 0, "{attack}");
        assert_eq!(count(episode("none")), 1, "after {attack}: a fresh sandbox");
    }
    // An episode dropped without close does not hand its sandbox back.
    drop(plugin.create_env(&json!({}), &json!({})).expect("create"));
    assert_eq!(plugin.idle_env_instances(), 0);

    // New limits start an empty pool: no sandbox built under the old ones
    // serves an episode under the new ones.
    assert_eq!(count(episode("none")), 1);
    assert_eq!(plugin.idle_env_instances(), 1);
    let relimited = plugin.clone().with_limits(common::tight_limits());
    assert_eq!(relimited.idle_env_instances(), 0);
    assert_eq!(relimited.episodes_per_instance(), 3);

    // The default: a fresh sandbox per episode.
    let fresh = common::load(&engine, "hostile");
    assert_eq!(fresh.episodes_per_instance(), 1);
    for _ in 0..2 {
        let mut env = fresh.create_env(&json!({}), &json!({})).unwrap();
        env.init(&[Message::user("go")]).unwrap();
        assert_eq!(count(env.step("x")), 1);
        env.close().unwrap();
    }
    assert_eq!(fresh.idle_env_instances(), 0);
}

#[test]
fn more_live_sandboxes_than_the_pool_holds_is_a_clear_error() {
    let engine = skyrl_runtime::PluginEngine::new(skyrl_runtime::EngineOptions {
        pool_size: 4,
        cache_dir: None,
        ..skyrl_runtime::EngineOptions::default()
    })
    .expect("engine");
    let plugin = common::load(&engine, "hostile");
    let live: Vec<_> = (0..4)
        .map(|_| {
            plugin
                .create_env(&json!({}), &json!({}))
                .expect("a free slot")
        })
        .collect();
    let err = plugin
        .create_env(&json!({}), &json!({}))
        .err()
        .expect("the pool is full");
    assert!(matches!(err, PluginError::PoolExhausted { .. }), "{err:?}");
    assert!(err.to_string().contains("pool_size"), "{err}");
    drop(live);
    plugin
        .create_env(&json!({}), &json!({}))
        .expect("closed sandboxes free their slots");

    // Sized for a run: every live episode plus a third for idle ones.
    let sized = skyrl_runtime::EngineOptions::for_live_instances(3000, false);
    assert_eq!(sized.pool_size, 4000);
    assert_eq!(
        skyrl_runtime::EngineOptions::for_live_instances(10, true).pool_size,
        skyrl_runtime::DEFAULT_POOL_SIZE
    );
}
