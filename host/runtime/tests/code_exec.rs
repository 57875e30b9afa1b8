//! The sandboxed `python` tool (plugins/python, CPython built with
//! componentize-py through the Python SDK): programs run, every call gets a
//! fresh instance, and hostile code (endless loops, memory bombs, file and
//! network access, subprocesses) is contained with a clear error. Also the
//! tool's users: the `code_reward` plugin and the `lcb` / `python_math` envs.

mod common;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skyrl_runtime::{Message, Plugin, PluginError, ToolRouter};

fn router() -> &'static Arc<ToolRouter> {
    static ROUTER: OnceLock<Arc<ToolRouter>> = OnceLock::new();
    ROUTER.get_or_init(|| {
        Arc::new(
            ToolRouter::new(vec![common::load(common::shared_engine(), "python")]).expect("router"),
        )
    })
}

fn run(code: &str, stdin: &str, timeout_ms: u64) -> skyrl_runtime::Result<Value> {
    let args = json!({"code": code, "stdin": stdin}).to_string();
    router()
        .call_with_timeout("python", &args, Some(Duration::from_millis(timeout_ms)))
        .map(|out| serde_json::from_str(&out).expect("tool output is JSON"))
}

fn ok(code: &str) -> Value {
    run(code, "", 10_000).expect("program runs")
}

#[test]
fn programs_run_with_stdin_and_exit_codes() {
    let out = run(
        "import sys\nn = int(input())\nprint(sum(range(n)))\nprint('warn', file=sys.stderr)",
        "10\n",
        10_000,
    )
    .unwrap();
    assert_eq!(out["stdout"], "45\n");
    assert_eq!(out["stderr"], "warn\n");
    assert_eq!(out["exit_code"], 0);
    assert_eq!(ok("raise SystemExit(3)")["exit_code"], 3);
    let failed = ok("def f():\n    return 1 / 0\nf()");
    assert_eq!(failed["exit_code"], 1);
    let stderr = failed["stderr"].as_str().unwrap();
    assert!(stderr.contains("ZeroDivisionError"), "{stderr}");
    assert!(ok("print(")["stderr"]
        .as_str()
        .unwrap()
        .contains("SyntaxError"));
}

#[test]
fn every_call_starts_from_a_fresh_interpreter() {
    ok("import builtins\nbuiltins.leak = 42\nimport sys\nsys.modules['json'] = None");
    let out = ok("import builtins, json\nprint(hasattr(builtins, 'leak'), json.dumps([1]))");
    assert_eq!(out["stdout"], "False [1]\n");
}

#[test]
fn huge_output_is_capped() {
    let out = ok("print('x' * 10_000_000)");
    assert_eq!(out["truncated"], true);
    assert_eq!(out["stdout"].as_str().unwrap().len(), 64 * 1024);
}

#[test]
fn endless_loop_hits_the_per_call_deadline() {
    let started = Instant::now();
    let err = run("while True:\n    pass", "", 500).unwrap_err();
    assert!(
        matches!(
            err,
            PluginError::Timeout {
                timeout_ms: 500,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(err.to_string().contains("deadline"), "{err}");
    // The router is still usable.
    assert_eq!(ok("print(1)")["stdout"], "1\n");
}

#[test]
fn memory_bombs_are_stopped() {
    for bomb in [
        "x = bytearray(3 << 29)",
        "s = 'a' * (10 ** 9)",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(1 << 24))",
    ] {
        match run(bomb, "", 10_000) {
            Ok(out) => {
                assert_eq!(out["exit_code"], 1, "{bomb}: {out}");
                assert!(
                    out["stderr"].as_str().unwrap().contains("MemoryError"),
                    "{bomb}: {out}"
                );
            }
            Err(err) => assert!(
                matches!(err, PluginError::MemoryLimit { .. }),
                "{bomb}: {err}"
            ),
        }
    }
    assert_eq!(ok("print(2)")["stdout"], "2\n");
}

#[test]
fn files_network_and_processes_are_out_of_reach() {
    for (attack, needle) in [
        ("print(open('/etc/passwd').read())", "Error"),
        ("import os\nprint(os.listdir('/'))", ""),
        ("import os\nos.fork()", "Error"),
        ("import subprocess\nsubprocess.run(['ls'])", "Error"),
        (
            "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)",
            "Error",
        ),
        ("open('/tmp/owned', 'w').write('x')", "Error"),
    ] {
        let out = ok(attack);
        let stdout = out["stdout"].as_str().unwrap();
        assert!(!stdout.contains("root:"), "{attack}: {out}");
        if needle.is_empty() {
            // Listing the root shows nothing of the host: no preopened dirs.
            assert!(
                out["exit_code"] != 0 || stdout.trim() == "[]",
                "{attack}: {out}"
            );
        } else {
            assert_eq!(out["exit_code"], 1, "{attack}: {out}");
            assert!(
                out["stderr"].as_str().unwrap().contains(needle),
                "{attack}: {out}"
            );
        }
    }
    assert!(!std::path::Path::new("/tmp/owned").exists());
}

#[test]
fn bad_arguments_are_invalid_input() {
    let err = router().call("python", r#"{"code": 5}"#).unwrap_err();
    assert!(err.to_string().contains("`code` must be a string"), "{err}");
    assert!(router().call("python", "not json").is_err());
}

fn with_tools(name: &str) -> Plugin {
    common::load(common::shared_engine(), name)
        .with_tools(router().clone())
        .expect("tools wired")
}

const SUM_TESTS: &str =
    r#"[{"input": "1 2\n", "output": "3\n"}, {"input": "40 2\n", "output": "42\n"}]"#;

#[test]
fn code_reward_runs_the_last_block_against_every_test() {
    let mut reward = with_tools("code_reward").create_reward().expect("reward");
    let truth = Value::String(SUM_TESTS.into());
    let mut score = |response: &str| {
        reward
            .score(&[Message::user("sum")], response, &truth, &json!({}))
            .unwrap()
    };
    let right = "First try:\n```python\nprint(0)\n```\nFixed:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```";
    assert_eq!(score(right), 1.0);
    assert_eq!(
        score("```python\nprint(3)\n```"),
        0.0,
        "passes one test of two"
    );
    assert_eq!(score("no code"), 0.0);
    assert_eq!(score("```python\nimport sys; sys.exit(1)\n```"), 0.0);
}

#[test]
fn code_reward_applies_per_test_deadlines_and_functional_tests() {
    let mut reward = with_tools("code_reward").create_reward().expect("reward");
    let slow = json!({"tests": [{"input": "", "output": "1\n"}], "timeout_s": 0.3});
    let started = Instant::now();
    let score = reward
        .score(&[], "```python\nwhile True: pass\n```", &slow, &json!({}))
        .unwrap();
    assert_eq!(score, 0.0);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let functional = json!({
        "tests": [
            {"input": "[1, 2, 3]\n2", "output": "[3, 4, 5]", "testtype": "functional"},
            {"input": "[]\n7", "output": "[]", "testtype": "functional"}
        ],
        "fn_name": "add_all"
    });
    let code = "```python\nclass Solution:\n    def add_all(self, xs, k):\n        return [x + k for x in xs]\n```";
    assert_eq!(
        reward.score(&[], code, &functional, &json!({})).unwrap(),
        1.0
    );
}

#[test]
fn lcb_env_scores_code_with_the_shared_tool() {
    let plugin = with_tools("lcb");
    let extras = json!({"reward_spec": {"method": "rule", "ground_truth": SUM_TESTS}});
    let mut env = plugin.create_env(&json!({}), &extras).unwrap();
    env.init(&[Message::user("add two numbers")]).unwrap();
    let out = env
        .step("```python\nprint(sum(map(int, input().split())))\n```")
        .unwrap();
    assert!(out.done);
    assert_eq!(out.reward, 1.0);
    assert_eq!(out.metadata["passed"], 2);
    assert_eq!(env.metrics().unwrap()["tests_passed_fraction"], 1.0);
}

#[test]
fn python_math_env_shows_program_output_then_scores_the_answer() {
    let plugin = with_tools("python_math");
    let extras = json!({"reward_spec": {"method": "rule", "ground_truth": "5050"}});
    let mut env = plugin
        .create_env(&json!({"code_timeout_s": 0.5}), &extras)
        .unwrap();
    env.init(&[Message::user("sum 1..100")]).unwrap();
    let out = env
        .step("<python>print(sum(range(1, 101)))</python>")
        .unwrap();
    assert!(!out.done);
    assert_eq!(out.observations[0].content, "<output>\n5050\n</output>");
    let out = env.step("<python>while True: pass</python>").unwrap();
    // Stopped by the 0.5 s deadline, or by the fuel budget if that runs out first.
    let shown = &out.observations[0].content;
    assert!(
        shown.contains("deadline") || shown.contains("out of fuel"),
        "{shown}"
    );
    let out = env.step("#### 5050").unwrap();
    assert!(out.done);
    assert_eq!(out.reward, 1.0);
    assert_eq!(env.metrics().unwrap()["code_runs"], 2);
}

#[test]
fn an_env_needing_a_missing_tool_is_refused() {
    let lonely = Arc::new(ToolRouter::new(vec![]).unwrap());
    let err = common::load(common::shared_engine(), "lcb")
        .with_tools(lonely)
        .err()
        .expect("refused");
    assert!(
        matches!(err, PluginError::UnknownTool(ref t) if t == "python"),
        "{err}"
    );
}

#[test]
fn shipped_lcb_rows_are_solved_by_their_reference_solutions_in_the_sandbox() {
    let plugin = with_tools("lcb");
    let mut checked = 0;
    for split in ["train", "val"] {
        let path = format!(
            "{}/../../envs/lcb/data/{split}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        );
        for line in std::fs::read_to_string(path).unwrap().lines() {
            let row: Value = serde_json::from_str(line).unwrap();
            let extras = json!({"reward_spec": row["reward_spec"]});
            let mut env = plugin.create_env(&json!({}), &extras).unwrap();
            let solution = row["extra_info"]["solution"].as_str().unwrap();
            let out = env.step(&format!("```python\n{solution}\n```")).unwrap();
            assert_eq!(
                out.reward, 1.0,
                "{}: {}",
                row["extra_info"]["name"], out.metadata
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 12);
}
