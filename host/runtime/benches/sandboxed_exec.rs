//! Sandboxed code execution and SQL, side by side with the unsandboxed way:
//!
//! - per-call latency of the `python` tool (CPython component, a fresh
//!   instance per call, precompiled cache hit) vs spawning `python3 -c` per
//!   call (skyrl-gym's executor), for a trivial and a CPU-bound program;
//! - loading the 18 MB CPython component: cold compile vs cache hit;
//! - one text2sql step (SQLite inside the sandbox, read-only database) vs
//!   the same env code run natively.
//!
//! Run with `cargo bench -p skyrl-runtime --bench sandboxed_exec` after
//! `scripts/build-plugins`; `-- python` or `-- sql` runs one section. One
//! thread; prints medians and ratios. `--bench vs_skyrl_gym` holds the same
//! workloads against skyrl-gym's own Python code.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use skyrl_runtime::{
    EngineOptions, Message, Plugin, PluginEngine, ReadOnlyDir, SandboxLimits, SandboxPolicy,
    ToolRouter,
};
use skyrl_sdk::Environment;

use common::{first_sql_row, median, ms, plugin_path, repo};

fn engine(cache: &Path) -> PluginEngine {
    engine_with(cache, SandboxLimits::default())
}

/// `limits` decide metering: fuel limits compile fuel counting into plugins.
fn engine_with(cache: &Path, limits: SandboxLimits) -> PluginEngine {
    PluginEngine::new(EngineOptions {
        limits,
        pooling: true,
        pool_size: 64,
        cache_dir: Some(cache.to_path_buf()),
    })
    .expect("engine")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--test" || a == "--quick");
    let runs = if quick { 3 } else { 30 };
    // Section names given on the command line (`python`, `sql`) pick the
    // sections to run; none given runs all.
    let sections: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted = |name: &str| sections.is_empty() || sections.contains(&name);
    let cache = tempfile::tempdir().expect("cache dir");
    if wanted("python") {
        bench_python(cache.path(), runs);
    }
    if wanted("sql") {
        bench_sql(&engine(cache.path()), runs);
    }
}

fn bench_python(cache: &Path, runs: usize) {
    let python_wasm = plugin_path("python");
    let bytes = std::fs::read(&python_wasm).expect("python.wasm");

    println!(
        "== loading the CPython component ({:.1} MB)",
        bytes.len() as f64 / 1e6
    );
    let start = Instant::now();
    let cold_engine = engine(cache);
    Plugin::from_bytes(&cold_engine, &bytes, "python.wasm").expect("load");
    let cold = start.elapsed();
    let warm_engine = engine(cache);
    let start = Instant::now();
    let plugin = Plugin::from_bytes(&warm_engine, &bytes, "python.wasm").expect("load");
    let hit = start.elapsed();
    println!(
        "cold compile {:>8.1} ms | disk-cache hit {:>8.1} ms | {:.0}x faster ({:?})",
        ms(cold),
        ms(hit),
        cold.as_secs_f64() / hit.as_secs_f64(),
        plugin.cache_outcome()
    );

    let router = Arc::new(ToolRouter::new(vec![plugin]).expect("router"));
    // The same component with fuel metering (the default before deadlines
    // moved to epochs alone): what counting fuel costs guest code.
    let metered_engine = engine_with(cache, SandboxLimits::metered());
    let metered = Plugin::from_bytes(&metered_engine, &bytes, "python.wasm").expect("load");
    let metered = ToolRouter::new(vec![metered]).expect("router");
    let python = real_python();
    println!("\n== per call: sandboxed python tool (fresh instance each call) vs `python3 -c` spawn ({runs} calls)");
    println!(
        "{:<28} {:>13} {:>15} {:>10} {:>19} {:>10} {:>17} {:>11}",
        "program",
        "sandbox (ms)",
        "python -c (ms)",
        "ratio",
        "python -I -S -c (ms)",
        "ratio",
        "with fuel (ms)",
        "fuel cost"
    );
    for (label, code) in [
        ("print(1)", "print(1)"),
        ("sum(range(10**6))", "print(sum(range(10**6)))"),
        ("json + re + 1k-line output", "import json, re\nfor i in range(1000):\n    print(json.dumps({'i': i, 'm': bool(re.match('[0-9]+', str(i)))}))"),
    ] {
        let args = json!({ "code": code, "stdin": "" }).to_string();
        let call = |router: &ToolRouter| {
            median(runs, || {
                let out = router.call("python", &args).expect("tool call");
                assert!(out.contains("\"exit_code\": 0"), "{out}");
            })
        };
        let sandbox = call(&router);
        let with_fuel = call(&metered);
        let spawn_with = |flags: &[&str]| {
            median(runs, || {
                let out = Command::new(&python).args(flags).arg(code).output().expect("python3");
                assert!(out.status.success());
            })
        };
        let spawn = spawn_with(&["-c"]);
        let bare = spawn_with(&["-I", "-S", "-c"]);
        println!(
            "{label:<28} {:>13.2} {:>15.2} {:>9.2}x {:>19.2} {:>9.2}x {:>17.2} {:>10.2}x",
            ms(sandbox),
            ms(spawn),
            spawn.as_secs_f64() / sandbox.as_secs_f64(),
            ms(bare),
            bare.as_secs_f64() / sandbox.as_secs_f64(),
            ms(with_fuel),
            with_fuel.as_secs_f64() / sandbox.as_secs_f64()
        );
    }
    println!("(ratio > 1: the sandbox is faster; fuel cost: time with fuel metering / without)");
}

fn bench_sql(engine: &PluginEngine, runs: usize) {
    let data = repo().join("envs/text2sql/data/databases");
    let plugin = Plugin::load(engine, &plugin_path("text2sql"))
        .expect("text2sql.wasm")
        .with_policy(SandboxPolicy {
            read_only_dirs: vec![ReadOnlyDir {
                host: data.clone(),
                guest: "/data".into(),
            }],
            ..SandboxPolicy::default()
        })
        .expect("policy");
    let row = first_sql_row();
    let extras = json!({
        "db_id": row["db_id"],
        "data": row["data"],
        "reward_spec": row["reward_spec"],
    });
    let action = format!(
        "<think>look</think><sql>{}</sql>",
        row["reward_spec"]["ground_truth"]
            .as_str()
            .expect("gold sql")
    );
    let prompt = [Message::user("q")];
    let sandbox = median(runs, || {
        let mut env = plugin.create_env(&json!({}), &extras).expect("create");
        env.init(&prompt).expect("init");
        let out = env.step(&action).expect("step");
        assert!(out.observations[0].content.contains("<observation>"));
    });
    let native_config = json!({ "db_path": data.display().to_string() });
    let native_extras = skyrl_sdk::Extras::from_json(&extras.to_string()).expect("extras");
    let native = median(runs, || {
        let mut env = text2sql::Text2Sql::create(&native_config, &native_extras).expect("create");
        let out = env.step(&action).expect("step");
        assert!(out.observations[0].content.contains("<observation>"));
    });
    // One step inside a running episode (the per-turn cost during rollouts).
    let long = json!({"db_id": row["db_id"], "data": row["data"], "reward_spec": row["reward_spec"], "max_turns": 1_000_000});
    let mut env = plugin.create_env(&json!({}), &long).expect("create");
    env.init(&prompt).expect("init");
    let sandbox_step = median(runs, || {
        env.step(&action).expect("step");
    });
    let long_extras = skyrl_sdk::Extras::from_json(&long.to_string()).expect("extras");
    let mut native_env = text2sql::Text2Sql::create(&native_config, &long_extras).expect("create");
    let native_step = median(runs, || {
        native_env.step(&action).expect("step");
    });
    println!("\n== text2sql, {runs} runs (query: the first training row's gold SQL)");
    println!(
        "{:<40} {:>14} {:>12} {:>10}",
        "", "sandbox (ms)", "native (ms)", "overhead"
    );
    for (label, sandboxed, native) in [
        ("episode: create + init + one <sql> step", sandbox, native),
        (
            "one <sql> step in a running episode",
            sandbox_step,
            native_step,
        ),
    ] {
        println!(
            "{label:<40} {:>14.3} {:>12.3} {:>9.2}x",
            ms(sandboxed),
            ms(native),
            sandboxed.as_secs_f64() / native.as_secs_f64()
        );
    }
}

/// The interpreter itself (`sys.executable`), not a shim such as pyenv's,
/// whose own start-up would inflate the baseline.
fn real_python() -> PathBuf {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 on PATH");
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    println!("baseline interpreter: {}", path.display());
    path
}
