//! Real envs end to end through the binary: text2sql (SQLite in the
//! sandbox, databases granted read-only), lcb with the sandboxed python
//! tool, search with its tool granted the retrieval server over HTTP,
//! `skyrl plugin build` for a Python plugin, and skyrl-gym's own env source
//! files built unmodified.

mod common;

use std::path::Path;

use common::{assert_fails_with, plugin, skyrl, text};

/// Overrides: a tiny random-init model with the character tokenizer, one
/// step of 2 prompts x 2 samples, outputs under `dir`.
fn tiny(dir: &Path, max_prompt: usize) -> Vec<String> {
    vec![
        "trainer.policy.model.path=null".into(),
        format!(
            "trainer.policy.model.init={{vocab_size: 99, hidden_size: 32, intermediate_size: 64, \
             num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, \
             max_position_embeddings: {}, rope_theta: 10000.0, rms_norm_eps: 1.0e-6, \
             tie_word_embeddings: true, tokenizer: char}}",
            max_prompt + 256
        ),
        "trainer.bf16=false".into(),
        "trainer.gradient_checkpointing=false".into(),
        format!("trainer.max_prompt_length={max_prompt}"),
        format!("trainer.ckpt_path={}", dir.join("ckpts").display()),
        format!("trainer.export_path={}", dir.join("exports").display()),
        format!("trainer.log_path={}", dir.join("logs").display()),
        "trainer.resume_mode=none".into(),
        "trainer.train_batch_size=2".into(),
        "trainer.policy_mini_batch_size=2".into(),
        "trainer.micro_train_batch_size_per_gpu=4".into(),
        "trainer.micro_forward_batch_size_per_gpu=4".into(),
        "trainer.eval_before_train=false".into(),
        "trainer.eval_interval=-1".into(),
        "trainer.ckpt_interval=-1".into(),
        "generator.n_samples_per_prompt=2".into(),
        "generator.sampling_params.max_generate_length=24".into(),
    ]
}

/// `skyrl train --quiet --max-steps 1 ARGS...` with [`tiny`]'s overrides.
fn one_step(args: &[&str], dir: &Path, max_prompt: usize) -> Vec<String> {
    let mut args: Vec<String> = ["train", "--quiet", "--max-steps", "1"]
        .iter()
        .chain(args)
        .map(|s| s.to_string())
        .collect();
    args.extend(tiny(dir, max_prompt));
    args
}

fn first_metrics(dir: &Path) -> serde_json::Value {
    let metrics = std::fs::read_to_string(dir.join("logs/metrics.jsonl")).expect("metrics");
    serde_json::from_str(metrics.lines().next().expect("a step")).expect("json")
}

/// A SkyRL-SQL data folder as its preparation lays it out: the databases
/// under `sql_data/{SynSQL-2.5M/databases, spider/database}/<db_id>/` and a
/// parquet dataset whose rows name them by `data` and `db_id` (two of the
/// shipped sample rows, moved to those layouts). Returns (parquet, db root).
fn skyrl_sql_folder(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let root = dir.join("sql_data");
    let sample = common::repo().join("envs/text2sql/data/databases/sample/database");
    for (layout, db_id) in [
        ("spider/database", "company"),
        ("SynSQL-2.5M/databases", "school"),
    ] {
        let to = root.join(layout).join(db_id);
        std::fs::create_dir_all(&to).unwrap();
        let file = format!("{db_id}.sqlite");
        std::fs::copy(sample.join(db_id).join(&file), to.join(&file)).unwrap();
    }
    let parquet = dir.join("train.parquet");
    let script = r#"
import json, sys
import pandas as pd
rows = [json.loads(l) for l in open(sys.argv[1])]
picked = []
for db_id, data in (("company", "spider"), ("school", "synsql")):
    row = next(r for r in rows if r["db_id"] == db_id)
    picked.append(dict(row, data=data, data_source=data))
pd.DataFrame(picked).to_parquet(sys.argv[2])
"#;
    let out = std::process::Command::new(common::python())
        .args(["-c", script])
        .arg(common::repo().join("envs/text2sql/data/train.jsonl"))
        .arg(&parquet)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    (parquet, root)
}

#[test]
fn text2sql_trains_with_databases_granted_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let env = plugin("text2sql");
    // SkyRL-SQL's own layout and keys: db_path, granted at the same path.
    let (parquet, root) = skyrl_sql_folder(dir.path());
    let mut args = one_step(
        &["--plugin", &env, "--config", "configs/text2sql.yaml"],
        dir.path(),
        4096,
    );
    args.push("generator.max_turns=2".into());
    args.push(format!("data.train_data=[{}]", parquet.display()));
    args.push(format!(
        "environment.skyrl_gym.text2sql.db_path={}",
        root.display()
    ));
    args.push(format!(
        "environment.sandbox.text2sql.read_only_dirs=[{}]",
        root.display()
    ));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = skyrl(&refs);
    assert!(out.status.success(), "{}", text(&out));
    let m = first_metrics(dir.path());
    // A random model never writes a well-formed solution: -1.0 (format) for all.
    let reward = m["reward/mean"].as_f64().unwrap();
    assert!((-1.0..=1.0).contains(&reward), "{m}");
    assert!(
        m.as_object()
            .unwrap()
            .keys()
            .any(|k| k.contains("sql_calls")),
        "env metrics reported: {m}"
    );
    // Every trajectory found its database.
    assert!(
        m.get("stop_reason/env_error").is_none_or(|v| v == 0.0),
        "{m}"
    );

    // Fuel is opt-in: a plugin given a fuel budget runs on a metering
    // engine, and a budget too small even to create the env fails every
    // trajectory with the plugin's out-of-fuel error (the run goes on).
    let fuel_dir = tempfile::tempdir().unwrap();
    let mut fuel: Vec<String> = args.clone();
    fuel.extend(tiny(fuel_dir.path(), 4096));
    fuel.push("environment.sandbox.text2sql.fuel_per_call=1000".into());
    let fuel: Vec<&str> = fuel.iter().map(String::as_str).collect();
    let out = skyrl(&fuel);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("ran out of fuel (1000 units)"),
        "{}",
        text(&out)
    );
    let m = first_metrics(fuel_dir.path());
    assert_eq!(m["stop_reason/env_error"].as_f64(), Some(1.0), "{m}");

    // A typo in a sandbox key, and a grant of a missing directory, are refused.
    let mut typo = refs.clone();
    typo.push("environment.sandbox.text2sq={read_only_dirs: []}");
    assert_fails_with(&skyrl(&typo), "match no loaded plugin");
    let mut missing = refs.clone();
    missing.push("environment.sandbox.text2sql.read_only_dirs=[{host: no/such/dir, guest: /data}]");
    assert_fails_with(&skyrl(&missing), "no such directory");
}

#[test]
fn lcb_trains_with_the_sandboxed_python_tool() {
    let dir = tempfile::tempdir().unwrap();
    let env = format!("lcb={}", plugin("lcb"));
    let tool = plugin("python");
    let args = one_step(
        &[
            "--plugin",
            &env,
            "--tool",
            &tool,
            "--config",
            "configs/demo.yaml",
            "data.train_data=[envs/lcb/data/train.jsonl]",
            "data.val_data=[envs/lcb/data/val.jsonl]",
            "environment.env_class=lcb",
        ],
        dir.path(),
        512,
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = skyrl(&refs);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("trained steps 0..1"), "{}", text(&out));

    // Without --tool the run stops before training, naming the tool.
    let mut no_tool = refs.clone();
    no_tool.retain(|a| *a != "--tool" && *a != tool.as_str());
    assert_fails_with(&skyrl(&no_tool), "--tool");
}

#[test]
fn plugin_build_compiles_a_python_folder_and_checks_it() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("echo_py");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("skyrl-plugin.toml"), "kind = \"environment\"\n").unwrap();
    std::fs::write(
        src.join("plugin.py"),
        "import skyrl_sdk as sk\n\nclass Echo(sk.Environment):\n    def step(self, action):\n        \
         return sk.StepOutput.final(1.0 if action == 'hi' else 0.0)\n\n\
         sk.export_env(Echo, name='echo_py', version='0.2.0', description='echo')\n",
    )
    .unwrap();
    let out_wasm = dir.path().join("echo.wasm");
    let (src_arg, out_arg) = (src.to_str().unwrap(), out_wasm.to_str().unwrap());
    let build = || skyrl(&["plugin", "build", src_arg, "-o", out_arg]);
    let run_echo = || {
        skyrl(&[
            "env", "run", "--plugin", out_arg, "--prompt", "q", "--action", "hi",
        ])
    };
    let out = build();
    assert!(out.status.success(), "{}", text(&out));
    let out = run_echo();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("\"reward\":1.0"), "{}", text(&out));

    // The manifest's kind must match what the code exports.
    std::fs::write(src.join("skyrl-plugin.toml"), "kind = \"tool\"\n").unwrap();
    let out = build();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("skyrl-plugin.toml says"),
        "{}",
        text(&out)
    );
    // The failed build left the earlier component in place, still working.
    let out = run_echo();
    assert!(text(&out).contains("\"reward\":1.0"), "{}", text(&out));
    assert!(!dir.path().join("echo.wasm.unverified").exists());
    // Bad manifests and folders fail fast with a clear message.
    std::fs::write(src.join("skyrl-plugin.toml"), "kind = \"bogus\"\n").unwrap();
    assert_fails_with(
        &skyrl(&["plugin", "build", src.to_str().unwrap()]),
        "not one of environment",
    );
    std::fs::remove_file(src.join("skyrl-plugin.toml")).unwrap();
    assert_fails_with(
        &skyrl(&["plugin", "build", src.to_str().unwrap()]),
        "skyrl-plugin.toml",
    );
    assert_fails_with(&skyrl(&["plugin", "build", "no/such/folder"]), "not found");
}

#[test]
fn search_trains_with_its_tool_granted_the_retrieval_server() {
    let repo = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let index = skyrl_retrieval::Index::load(&repo.join("data/search/toy_corpus.jsonl")).unwrap();
    let server = skyrl_retrieval::BackgroundServer::start(
        "127.0.0.1:0".parse().unwrap(),
        std::sync::Arc::new(index),
        3,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = plugin("search");
    let tool = plugin("search_tool");
    let mut args = one_step(
        &[
            "--plugin",
            &env,
            "--tool",
            &tool,
            "--config",
            "configs/search.yaml",
        ],
        dir.path(),
        2048,
    );
    args.push(format!(
        "environment.skyrl_gym.search.search_url={}",
        server.retrieve_url()
    ));
    args.push(format!(
        "environment.sandbox.search_tool.allowed_hosts=[\"http://{}\"]",
        server.addr()
    ));
    args.push("generator.max_turns=2".into());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = skyrl(&refs);
    assert!(out.status.success(), "{}", text(&out));
    let reward = first_metrics(dir.path())["reward/mean"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&reward), "{reward}");

    // A grant that is not an origin is refused at load time, naming it.
    let mut bad = refs.clone();
    bad.push("environment.sandbox.search_tool.allowed_hosts=[127.0.0.1:8000]");
    assert_fails_with(&skyrl(&bad), "allowed_hosts entry \"127.0.0.1:8000\"");
}

/// skyrl-gym's installed package folder (the project venv's, or `$SKYRL_PYTHON`'s).
fn skyrl_gym_dir() -> std::path::PathBuf {
    let python = common::python();
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            "import os, skyrl_gym; print(os.path.dirname(skyrl_gym.__file__))",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "skyrl-gym 0.4.0 is not installed in {} (run scripts/setup): {}",
        python.display(),
        text(&out)
    );
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `skyrl env run` of one episode; its JSON lines.
fn episode(plugin: &str, extras: &str, actions: &[&str]) -> String {
    let mut args = vec![
        "env", "run", "--plugin", plugin, "--prompt", "q", "--extras", extras,
    ];
    for action in actions {
        args.extend(["--action", action]);
    }
    let out = skyrl(&args);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn skyrl_gym_env_files_build_unmodified_and_match_the_native_plugins() {
    let wheel = skyrl_gym_dir().join("envs/gsm8k");
    let dir = tempfile::tempdir().unwrap();
    // gsm8k: the wheel's env.py and utils.py in a folder named after their
    // package, no manifest: the BaseTextEnv subclass is found.
    let single = dir.path().join("gsm8k");
    std::fs::create_dir(&single).unwrap();
    for file in ["env.py", "utils.py"] {
        std::fs::copy(wheel.join(file), single.join(file)).unwrap();
    }
    // gsm8k_multi_turn: its module imports skyrl_gym.envs.gsm8k.utils, so the
    // manifest names that package.
    let multi = dir.path().join("gsm8k_multi_turn");
    std::fs::create_dir(&multi).unwrap();
    for file in ["multi_turn_env.py", "utils.py"] {
        std::fs::copy(wheel.join(file), multi.join(file)).unwrap();
    }
    std::fs::write(
        multi.join("skyrl-plugin.toml"),
        "kind = \"environment\"\nlanguage = \"python\"\nentry = \"multi_turn_env.py\"\n\
         skyrl_gym_package = \"skyrl_gym.envs.gsm8k\"\n",
    )
    .unwrap();
    let mut built = Vec::new();
    for src in [&single, &multi] {
        let out_wasm = dir.path().join(format!(
            "{}.wasm",
            src.file_name().unwrap().to_string_lossy()
        ));
        let out = skyrl(&[
            "plugin",
            "build",
            src.to_str().unwrap(),
            "-o",
            out_wasm.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out));
        built.push(out_wasm.to_str().unwrap().to_string());
    }
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "gsm8k",
            r#"{"reward_spec":{"ground_truth":"72"}}"#,
            &["She sold 48 + 24 = 72.\n#### 72"],
        ),
        (
            "gsm8k",
            r#"{"reward_spec":{"ground_truth":"72"}}"#,
            &["#### 1,000 then #### 72"],
        ),
        (
            "gsm8k",
            r#"{"reward_spec":{"ground_truth":"1000"}}"#,
            &["#### $1,000"],
        ),
        (
            "gsm8k_multi_turn",
            r#"{"reward_spec":{"ground_truth":"1000"},"max_turns":3}"#,
            &["#### 7", "no answer", "#### 1,000"],
        ),
        (
            "gsm8k_multi_turn",
            r#"{"reward_spec":{"ground_truth":"5"},"extra_info":{"max_turns":2}}"#,
            &["#### 4", "#### 5"],
        ),
    ];
    for (native, extras, actions) in cases {
        let gym = if native == "gsm8k" {
            &built[0]
        } else {
            &built[1]
        };
        assert_eq!(
            episode(gym, extras, actions),
            episode(&plugin(native), extras, actions),
            "{native} {extras} {actions:?}"
        );
    }
    // A missing ground truth is the env's own assertion, as a config error.
    let out = skyrl(&[
        "env", "run", "--plugin", &built[0], "--prompt", "q", "--action", "x",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("reward_spec field is required"),
        "{}",
        text(&out)
    );

    // A ToolGroup with @tool methods builds into a tool plugin another
    // plugin calls through the host (tool_user calls `calculator`).
    let tools = dir.path().join("adder");
    std::fs::create_dir(&tools).unwrap();
    std::fs::write(
        tools.join("adder.py"),
        "from skyrl_gym.tools.core import tool, ToolGroup\n\n\
         class Adder(ToolGroup):\n    def __init__(self):\n        super().__init__(name=\"Adder\")\n\n    \
         @tool\n    def calculator(self, expression: str, scale: int = 1) -> str:\n        \
         \"\"\"Adds the numbers of `a + b + ...`.\"\"\"\n        \
         return str(scale * sum(int(x) for x in expression.split(\"+\")))\n",
    )
    .unwrap();
    let tools_wasm = dir.path().join("adder.wasm");
    let tools_wasm = tools_wasm.to_str().unwrap();
    let out = skyrl(&["plugin", "build", tools.to_str().unwrap(), "-o", tools_wasm]);
    assert!(out.status.success(), "{}", text(&out));
    let user = plugin("tool_user");
    let run = |action: &str| {
        skyrl(&[
            "env", "run", "--plugin", &user, "--tool", tools_wasm, "--prompt", "q", "--action",
            action,
        ])
    };
    let out = run("1 + 2 + 39");
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("\"content\":\"42\""), "{}", text(&out));
    assert!(text(&out).contains("\"reward\":1.0"), "{}", text(&out));
    let out = run("1 + x");
    assert!(text(&out).contains("\"reward\":0.0"), "{}", text(&out));
}
