//! The sandboxed plugins side by side with skyrl-gym 0.4.0 itself (the
//! project venv's pip install, run natively in CPython), in one run:
//!
//! - a gsm8k episode: `create_env` + init + step + close on a fresh
//!   instance vs skyrl-gym's `GSM8kEnv(...)` + init + step + close;
//! - a text2sql episode (SkyRL-SQL's spider layout, the sample company
//!   database, the row's gold SQL as a `<sql>` step): a fresh instance
//!   with SQLite inside vs skyrl-gym's `SQLEnv`;
//! - the python tool on a trivial, a CPU-bound and an I/O-heavy program vs
//!   skyrl-gym's `PythonCodeExecutorToolGroup().python(code)` (a `python -c`
//!   spawn with the venv's `python` first on PATH, as in a SkyRL venv).
//!
//! The episodes run twice: in a fresh sandbox each, and in sandboxes an
//! earlier episode closed (`episodes_per_instance`), which is how skyrl-gym
//! runs them (one Python process, no instantiation per episode).
//!
//! Both sides time single episodes or calls and report medians after a
//! warm-up. Run with `cargo bench -p skyrl-runtime --bench vs_skyrl_gym`
//! after `scripts/setup` and `scripts/build-plugins`; `--quick` for a few
//! runs. The 1..N-thread scaling table is `--bench runtime`'s.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use skyrl_runtime::{Message, Plugin, PluginEngine, ReadOnlyDir, SandboxPolicy, ToolRouter};

use common::{first_sql_row, median, plugin_path, repo};

/// Times skyrl-gym's side; reads the job as JSON on stdin, prints medians
/// in seconds as JSON.
const SKYRL_GYM_SIDE: &str = r#"
import json, sys, time
import skyrl_gym
from omegaconf import DictConfig
from skyrl_gym.tools.python import PythonCodeExecutorToolGroup

job = json.load(sys.stdin)

def median(runs, f):
    f()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        f()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return samples[runs // 2]

prompt = [{"role": "user", "content": job["prompt"]}]

def gsm8k():
    env = skyrl_gym.make("gsm8k", env_config=DictConfig({}), extras=job["gsm8k"]["extras"])
    env.init(prompt)
    out = env.step(job["gsm8k"]["action"])
    assert out["reward"] == 1.0, out
    env.close()

sql_config = DictConfig({"db_path": job["text2sql"]["root"]})
def text2sql():
    env = skyrl_gym.make("text2sql", env_config=sql_config, extras=job["text2sql"]["extras"])
    env.init(prompt)
    out = env.step(job["text2sql"]["action"])
    assert "<observation>" in out["observations"][0]["content"], out
    env.close()

tool = PythonCodeExecutorToolGroup()
def program(code):
    def run():
        out = tool.python(code)
        assert not out.startswith("Error"), out
    return run

print(json.dumps({
    "gsm8k": median(job["episodes"], gsm8k),
    "text2sql": median(job["episodes"], text2sql),
    "programs": [median(job["calls"], program(code)) for code in job["programs"]],
}))
"#;

const PROGRAMS: [(&str, &str); 3] = [
    ("print(1)", "print(1)"),
    ("sum(range(10**6))", "print(sum(range(10**6)))"),
    (
        "json + re + 1k-line output",
        "import json, re\nfor i in range(1000):\n    print(json.dumps({'i': i, 'm': bool(re.match('[0-9]+', str(i)))}))",
    ),
];

const GSM8K_ACTION: &str = "In May she sold 48 / 2 = 24 clips, so 48 + 24 = 72 in total.\n#### 72";

fn main() {
    let quick = std::env::args().any(|a| a == "--test" || a == "--quick");
    let (episodes, calls) = if quick { (5, 3) } else { (300, 30) };
    let repo = repo();
    let python = repo.join(".deps/venv/bin/python");
    if !python.exists() {
        eprintln!(
            "error: {} is missing: run scripts/setup (it installs skyrl-gym)",
            python.display()
        );
        std::process::exit(1);
    }
    let engine = PluginEngine::shared().expect("engine");

    // SkyRL-SQL's spider layout over the sample database, for both sides.
    let root = tempfile::tempdir().expect("temp dir");
    let row = first_sql_row();
    let db_id = row["db_id"].as_str().expect("db_id");
    let db_dir = root.path().join("spider/database").join(db_id);
    std::fs::create_dir_all(&db_dir).expect("layout");
    let sample = repo.join(format!(
        "envs/text2sql/data/databases/sample/database/{db_id}/{db_id}.sqlite"
    ));
    std::fs::copy(&sample, db_dir.join(format!("{db_id}.sqlite"))).expect("copy database");
    let sql_extras = json!({"db_id": db_id, "data": "spider", "reward_spec": row["reward_spec"]});
    let sql_action = format!(
        "<think>look</think><sql>{}</sql>",
        row["reward_spec"]["ground_truth"]
            .as_str()
            .expect("gold sql")
    );
    let gsm8k_extras = json!({"reward_spec": {"method": "rule", "ground_truth": "72"}});
    let prompt_text = "How many clips did Natalia sell altogether in April and May?";

    let gym = skyrl_gym_side(
        &python,
        &json!({
            "episodes": episodes,
            "calls": calls,
            "prompt": prompt_text,
            "gsm8k": {"extras": gsm8k_extras, "action": GSM8K_ACTION},
            "text2sql": {"root": root.path(), "extras": sql_extras, "action": sql_action},
            "programs": PROGRAMS.iter().map(|(_, code)| code).collect::<Vec<_>>(),
        }),
    );

    let prompt = [Message::user(prompt_text)];
    let gsm8k = Plugin::load(&engine, &plugin_path("gsm8k")).expect("gsm8k.wasm");
    let gsm8k_episode = |plugin: &Plugin| {
        median(episodes, || {
            let mut env = plugin
                .create_env(&json!({}), &gsm8k_extras)
                .expect("create");
            env.init(&prompt).expect("init");
            assert_eq!(env.step(GSM8K_ACTION).expect("step").reward, 1.0);
            env.close().expect("close");
        })
    };
    let gsm8k_time = gsm8k_episode(&gsm8k);
    let gsm8k_reused = gsm8k_episode(&gsm8k.clone().with_episodes_per_instance(u32::MAX));

    let text2sql = Plugin::load(&engine, &plugin_path("text2sql"))
        .expect("text2sql.wasm")
        .with_policy(SandboxPolicy {
            // A plain-path grant: the plugin sees the folder where skyrl-gym does.
            read_only_dirs: vec![ReadOnlyDir {
                host: root.path().to_path_buf(),
                guest: root.path().display().to_string(),
            }],
            ..SandboxPolicy::default()
        })
        .expect("policy");
    let sql_config = json!({"db_path": root.path()});
    let sql_episode = |plugin: &Plugin| {
        median(episodes, || {
            let mut env = plugin.create_env(&sql_config, &sql_extras).expect("create");
            env.init(&prompt).expect("init");
            let out = env.step(&sql_action).expect("step");
            assert!(out.observations[0].content.contains("<observation>"));
            env.close().expect("close");
        })
    };
    let sql_time = sql_episode(&text2sql);
    let sql_reused = sql_episode(&text2sql.clone().with_episodes_per_instance(u32::MAX));

    let python_tool = Plugin::load(&engine, &plugin_path("python")).expect("python.wasm");
    let router = ToolRouter::new(vec![python_tool]).expect("router");
    let program_times: Vec<Duration> = PROGRAMS
        .iter()
        .map(|(_, code)| {
            let args = json!({"code": code, "stdin": ""}).to_string();
            median(calls, || {
                let out = router.call("python", &args).expect("tool call");
                assert!(out.contains("\"exit_code\": 0"), "{out}");
            })
        })
        .collect();

    println!("== sandboxed plugins vs skyrl-gym 0.4.0 in CPython ({episodes} episodes, {calls} tool calls; medians)");
    println!(
        "{:<40} {:>14} {:>14} {:>10}",
        "", "sandboxed", "skyrl-gym", "speed-up"
    );
    let mut rows = vec![
        (
            "gsm8k episode (create+init+step+close)",
            gsm8k_time,
            gym.gsm8k,
        ),
        ("  the same, sandbox reused", gsm8k_reused, gym.gsm8k),
        ("text2sql episode (one <sql> step)", sql_time, gym.text2sql),
        ("  the same, sandbox reused", sql_reused, gym.text2sql),
    ];
    for ((label, _), (ours, theirs)) in PROGRAMS.iter().zip(program_times.iter().zip(&gym.programs))
    {
        rows.push((label, *ours, *theirs));
    }
    for (label, ours, theirs) in rows {
        println!(
            "{:<40} {:>14} {:>14} {:>9.2}x",
            label,
            fmt(ours),
            fmt(theirs),
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
    }
    println!("(speed-up > 1: the sandboxed plugin is faster than skyrl-gym's own code)");
}

struct GymTimes {
    gsm8k: Duration,
    text2sql: Duration,
    programs: Vec<Duration>,
}

fn skyrl_gym_side(python: &Path, job: &Value) -> GymTimes {
    let bin = python.parent().expect("venv bin");
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("PATH");
    let mut child = Command::new(python)
        .args(["-c", SKYRL_GYM_SIDE])
        .env("PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the venv's python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(job.to_string().as_bytes())
        .expect("job");
    let out = child.wait_with_output().expect("skyrl-gym side");
    assert!(
        out.status.success(),
        "skyrl-gym side failed (is skyrl-gym==0.4.0 in the venv?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let times: Value = serde_json::from_slice(&out.stdout).expect("skyrl-gym timings");
    let seconds = |v: &Value| Duration::from_secs_f64(v.as_f64().expect("seconds"));
    GymTimes {
        gsm8k: seconds(&times["gsm8k"]),
        text2sql: seconds(&times["text2sql"]),
        programs: times["programs"]
            .as_array()
            .expect("programs")
            .iter()
            .map(seconds)
            .collect(),
    }
}

/// µs below a millisecond, ms above.
fn fmt(d: Duration) -> String {
    match d.as_secs_f64() {
        s if s < 1e-3 => format!("{:.1} µs", s * 1e6),
        s => format!("{:.2} ms", s * 1e3),
    }
}
