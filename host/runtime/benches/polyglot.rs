//! The gsm8k example in every SDK language, side by side: component size,
//! load (cold compile vs precompiled cache hit), instantiate (a fresh
//! sandboxed env from the pooled allocator), one step, and a whole episode.
//!
//! Run with `cargo bench -p skyrl-runtime --bench polyglot` after
//! `scripts/build-plugins`. One thread; medians over the runs.

mod common;

use std::time::Instant;

use serde_json::json;
use skyrl_runtime::{EngineOptions, Message, Plugin, PluginEngine, SandboxLimits};

use common::{median, ms, plugin_path};

/// (language, component) of each gsm8k implementation.
const IMPLEMENTATIONS: &[(&str, &str)] = &[
    ("rust", "gsm8k"),
    ("python", "gsm8k_py"),
    ("javascript", "gsm8k_js"),
    ("go", "gsm8k_go"),
    ("c", "gsm8k_c"),
];

fn main() {
    let quick = std::env::args().any(|a| a == "--test" || a == "--quick");
    let runs = if quick { 3 } else { 200 };
    let cache = tempfile::tempdir().expect("cache dir");
    let engine = || {
        PluginEngine::new(EngineOptions {
            limits: SandboxLimits::default(),
            pooling: true,
            pool_size: 64,
            cache_dir: Some(cache.path().to_path_buf()),
        })
        .expect("engine")
    };
    let extras = json!({"reward_spec": {"method": "rule", "ground_truth": "72"}});
    let prompt = [Message::user(
        "Natalia sold 48 clips in April and half as many in May. How many in all?",
    )];
    let action = "48 + 24 = 72\n#### 72";
    println!(
        "{:<11} {:>9} {:>12} {:>10} {:>14} {:>10} {:>12} {:>22}",
        "language",
        "size (MB)",
        "compile (ms)",
        "load (ms)",
        "instantiate",
        "step (us)",
        "episode (ms)",
        "reused (ms)"
    );
    let mut rust_episode = None;
    for (language, name) in IMPLEMENTATIONS {
        let bytes = std::fs::read(plugin_path(name)).expect("component");
        let start = Instant::now();
        Plugin::from_bytes(&engine(), &bytes, name).expect("load");
        let compile = start.elapsed();
        let warm = engine();
        let start = Instant::now();
        let plugin = Plugin::from_bytes(&warm, &bytes, name).expect("load");
        let load = start.elapsed();
        let instantiate = median(runs, || {
            plugin.create_env(&json!({}), &extras).expect("create");
        });
        let mut env = plugin.create_env(&json!({}), &extras).expect("create");
        env.init(&prompt).expect("init");
        let step = median(runs, || {
            assert_eq!(env.step(action).expect("step").reward, 1.0);
        });
        let episode_on = |plugin: &Plugin| {
            median(runs, || {
                let mut env = plugin.create_env(&json!({}), &extras).expect("create");
                env.init(&prompt).expect("init");
                env.step(action).expect("step");
                env.close().expect("close");
            })
        };
        let episode = episode_on(&plugin);
        // The same episode with sandboxes reused (episodes_per_instance).
        let reused = episode_on(&plugin.clone().with_episodes_per_instance(u32::MAX));
        let vs_rust = *rust_episode.get_or_insert(episode);
        println!(
            "{language:<11} {:>9.2} {:>12.0} {:>10.1} {:>11.3} ms {:>10.1} {:>8.3} ({:.1}x rust) {:>8.3} ({:.1}x faster)",
            bytes.len() as f64 / 1e6,
            ms(compile),
            ms(load),
            ms(instantiate),
            step.as_secs_f64() * 1e6,
            ms(episode),
            episode.as_secs_f64() / vs_rust.as_secs_f64(),
            ms(reused),
            episode.as_secs_f64() / reused.as_secs_f64()
        );
    }
    println!(
        "compile: first load, nothing cached; load: precompiled disk-cache hit in a new engine;"
    );
    println!("instantiate: create_env (fresh sandbox, pooled memory); episode: create + init + step + close;");
    println!(
        "reused: the same episode in a sandbox an earlier episode closed (episodes_per_instance)."
    );
}
