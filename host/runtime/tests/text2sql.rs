//! text2sql inside the sandbox: SQLite compiled into the component reads
//! databases the host granted read-only; nothing the plugin does can change
//! them, and without the grant it sees no database at all.

mod common;

use std::path::PathBuf;

use serde_json::{json, Value};
use skyrl_runtime::{GuestErrorKind, Message, Plugin, PluginError, ReadOnlyDir, SandboxPolicy};

fn databases() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../envs/text2sql/data/databases")
}

fn db_file(db_id: &str) -> PathBuf {
    databases().join(format!("sample/database/{db_id}/{db_id}.sqlite"))
}

fn granted() -> Plugin {
    common::load(common::shared_engine(), "text2sql")
        .with_policy(SandboxPolicy {
            read_only_dirs: vec![ReadOnlyDir {
                host: databases(),
                guest: "/data".into(),
            }],
            ..SandboxPolicy::default()
        })
        .unwrap()
}

fn extras(gold: &str) -> Value {
    json!({"db_id": "company", "data": "sample", "reward_spec": {"method": "rule", "ground_truth": gold}, "max_turns": 4})
}

const GOLD: &str = "SELECT COUNT(*) FROM employees";

#[test]
fn an_episode_queries_the_granted_database_and_scores_the_solution() {
    let mut env = granted().create_env(&json!({}), &extras(GOLD)).unwrap();
    env.init(&[Message::user("How many employees?")]).unwrap();
    let out = env
        .step("<think>count them</think><sql>SELECT COUNT(*) AS n FROM employees</sql>")
        .unwrap();
    assert!(!out.done);
    let obs = &out.observations[0].content;
    assert!(obs.starts_with("\n\n<observation>"), "{obs}");
    assert!(
        obs.contains(
            "<reminder>You have 3 turns left to complete the task.</reminder></observation>"
        ),
        "{obs}"
    );
    assert!(
        obs.contains("<observation> 0\n24\n"),
        "a table with pandas' column header: {obs}"
    );
    let out = env
        .step("<think>so the answer is</think><solution>SELECT COUNT(*) FROM employees</solution>")
        .unwrap();
    assert!(out.done);
    assert_eq!(out.reward, 1.0);
}

#[test]
fn the_plugin_cannot_change_the_database() {
    let file = db_file("company");
    let before = std::fs::read(&file).unwrap();
    let mut env = granted().create_env(&json!({}), &extras(GOLD)).unwrap();
    env.init(&[Message::user("q")]).unwrap();
    for attack in [
        "DELETE FROM employees",
        "DROP TABLE employees",
        "CREATE TABLE owned (x)",
        "UPDATE employees SET salary = 0",
        "VACUUM INTO '/data/copy.sqlite'",
        "ATTACH DATABASE '/data/new.sqlite' AS owned",
    ] {
        let out = env
            .step(&format!("<think>x</think><sql>{attack}</sql>"))
            .unwrap();
        let obs = &out
            .observations
            .first()
            .map(|m| m.content.clone())
            .unwrap_or_default();
        assert!(
            out.done || obs.contains("Error executing SQL"),
            "{attack}: {obs}"
        );
        if out.done {
            env = granted().create_env(&json!({}), &extras(GOLD)).unwrap();
            env.init(&[Message::user("q")]).unwrap();
        }
    }
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "database bytes unchanged"
    );
    assert!(!databases().join("copy.sqlite").exists());
    assert!(!databases().join("new.sqlite").exists());
}

#[test]
fn without_the_grant_the_database_does_not_exist() {
    let plugin = common::load(common::shared_engine(), "text2sql");
    let err = plugin
        .create_env(&json!({}), &extras(GOLD))
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            PluginError::Guest {
                kind: GuestErrorKind::InvalidConfig,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_slow_query_times_out_inside_the_sandbox() {
    let config = json!({"sql_timeout_s": 0.3});
    let mut env = granted().create_env(&config, &extras(GOLD)).unwrap();
    env.init(&[Message::user("q")]).unwrap();
    let slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT COUNT(*) FROM c";
    let started = std::time::Instant::now();
    let out = env
        .step(&format!("<think>x</think><sql>{slow}</sql>"))
        .unwrap();
    assert!(
        out.observations[0].content.contains("SQL Timeout:\n"),
        "{:?}",
        out.observations
    );
    assert!(started.elapsed().as_secs_f64() < 5.0);
}
