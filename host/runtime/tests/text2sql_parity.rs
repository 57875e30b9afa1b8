//! The text2sql plugin against skyrl-gym 0.4.0's own `SQLEnv` (installed
//! with pip, run with `PYTHONHASHSEED=0`), on databases laid out as
//! SkyRL-SQL's data preparation writes them (`SynSQL-2.5M/databases`,
//! `spider/database`, `bird/train/train_databases`) under one `db_path`,
//! which the plugin is granted at the same path. Every step must agree on
//! observations, reward, done and metadata: pandas rendering of ints, floats,
//! NULLs, text, blobs and wide tables, frozenset order and deduplication,
//! truncation, Python's error texts (placeholders, undecodable text, several
//! statements) and the reward. The deliberate difference (writes refused)
//! is pinned too.

mod common;

use std::path::Path;

use serde_json::{json, Value};
use skyrl_runtime::{Message, Plugin, ReadOnlyDir, SandboxLimits, SandboxPolicy};

/// Builds the three SkyRL-SQL layouts under the `root` read from stdin.
const MAKE_DATABASES: &str = r#"
import json, os, sqlite3, sys
root = json.load(sys.stdin)["root"]
def db(layout, db_id, script):
    d = os.path.join(root, layout, db_id)
    os.makedirs(d, exist_ok=True)
    c = sqlite3.connect(os.path.join(d, db_id + ".sqlite"))
    c.executescript(script)
    c.commit()
    c.close()
db("SynSQL-2.5M/databases", "synth", """
CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, f REAL, s TEXT, b BLOB, n);
INSERT INTO t VALUES (1, 10, 0.1, 'plain', x'00ff', NULL);
INSERT INTO t VALUES (2, -3, 2.5, 'tab\tand\nnewline', x'41', NULL);
INSERT INTO t VALUES (3, NULL, -0.0, 'héllo wörld', NULL, NULL);
INSERT INTO t VALUES (4, 7, 15000000.0, '日本語', x'', NULL);
INSERT INTO t VALUES (5, 123456789012, 1.5e-7, NULL, x'27', NULL);
INSERT INTO t VALUES (6, 0, 123456789.123, 'emoji 😀', x'22', NULL);
INSERT INTO t VALUES (7, 10, NULL, 'plain', x'00ff', NULL);
CREATE TABLE bad (x TEXT);
INSERT INTO bad VALUES (CAST(x'41c328' AS TEXT));
""")
db("spider/database", "concert", """
CREATE TABLE singer (name TEXT, country TEXT, age INTEGER, rating REAL);
INSERT INTO singer VALUES ('Ann', 'France', 31, 4.5), ('Bo', 'Japan', 25, 3.0),
  ('Cy', 'France', 40, 4.25), ('Di', 'Peru', 25, NULL), ('Ann', 'France', 31, 4.5);
""")
db("bird/train/train_databases", "shop", """
CREATE TABLE items (name TEXT, price REAL, qty INTEGER);
INSERT INTO items VALUES ('pen', 1.25, 10), ('ink', 0.5, 3), ('pad', 2.0, 7);
""")
print("{}")
"#;

/// Runs each job's actions through skyrl-gym's `SQLEnv` (`text2sql`).
const SKYRL_GYM_DRIVER: &str = r#"
import json, sys
import skyrl_gym
from omegaconf import DictConfig
job = json.load(sys.stdin)
out = []
for ep in job["episodes"]:
    env = skyrl_gym.make("text2sql", env_config=DictConfig({"db_path": job["root"]}), extras=ep["extras"])
    env.init([{"role": "user", "content": "question"}])
    steps = []
    for action in ep["actions"]:
        o = env.step(action)
        md = o["metadata"]
        if "tool_input" in md:
            md = dict(md, tool_input=list(md["tool_input"]))
        steps.append({"observations": o["observations"], "reward": o["reward"], "done": o["done"], "metadata": md})
        if o["done"]:
            break
    out.append(steps)
print(json.dumps(out))
"#;

fn think_sql(query: &str) -> String {
    format!("<think>look</think>\n<sql>{query}</sql>")
}

fn solution(query: &str) -> String {
    format!("<think>answer</think>\n<solution>{query}</solution>")
}

/// One episode: exploratory queries, then a final action.
fn episode(data: &str, db_id: &str, gold: &str, queries: &[&str], last: String) -> Value {
    let mut actions: Vec<String> = queries.iter().map(|q| think_sql(q)).collect();
    actions.push(last);
    json!({
        "extras": {"reward_spec": {"method": "rule", "ground_truth": gold}, "db_id": db_id,
                   "data": data, "max_turns": actions.len()},
        "actions": actions,
    })
}

fn episodes() -> Vec<Value> {
    vec![
        episode(
            "synsql",
            "synth",
            "SELECT s FROM t WHERE i > 5",
            &[
                "SELECT i FROM t",
                "SELECT f FROM t WHERE f IS NOT NULL",
                "SELECT s FROM t",
                "SELECT b FROM t WHERE b IS NOT NULL",
                "SELECT i, s FROM t WHERE i IS NOT NULL AND s IS NOT NULL",
                "SELECT id, f FROM t WHERE id < 3",
                "SELECT 1e999, -1e999, 0.0078125",
                "SELECT id, i, s, b, id + 1, id * 2, id, id, id, id, id, 'x' FROM t WHERE id = 1",
                "SELECT * FROM bad",
                "SELECT ?",
                "SELECT * FROM missing",
                "SELECT 1; SELECT 2",
                " -- only a comment ",
                "SELEC 1",
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 3000) \
                 SELECT x, x * 0.5, 'r' || x FROM c",
                "SELECT 1 UNION ALL SELECT 1 UNION ALL SELECT 1.0",
                "SELECT 'a', 1.5 UNION ALL SELECT 'b', 2",
                "SELECT s, 100.0 FROM t WHERE id = 1 UNION ALL SELECT 2, 'x'",
            ],
            solution("SELECT DISTINCT s FROM t WHERE i > 5 ORDER BY s DESC"),
        ),
        episode(
            "spider",
            "concert",
            "SELECT name FROM singer WHERE country = 'France'",
            &[
                "SELECT name, country FROM singer",
                "SELECT country, count(*), avg(age) FROM singer GROUP BY country",
                "SELECT rating FROM singer WHERE rating IS NOT NULL",
                "SELECT name FROM singer WHERE age > 100",
            ],
            solution("SELECT name FROM singer WHERE age >= 31"),
        ),
        // A wrong answer, and one in a bad format.
        episode(
            "bird",
            "shop",
            "SELECT name FROM items WHERE price > 1",
            &["SELECT * FROM items"],
            solution("SELECT name FROM items"),
        ),
        episode(
            "bird",
            "shop",
            "SELECT name FROM items",
            &[],
            "<solution>SELECT name FROM items</solution>".to_owned(),
        ),
        // Two empty results are equal; a failing solution scores 0.
        episode(
            "bird",
            "shop",
            "SELECT name FROM items WHERE 0",
            &[],
            solution("SELECT 1 WHERE 0"),
        ),
        episode(
            "spider",
            "concert",
            "SELECT name FROM singer",
            &[],
            solution("SELECT nope FROM singer"),
        ),
        // No <sql> block, then the turn limit.
        episode(
            "spider",
            "concert",
            "SELECT name FROM singer",
            &[],
            "<think>hmm</think> nothing to run".to_owned(),
        ),
    ]
}

/// `text` with its first line kept and the rest sorted: Python 3.11 (the
/// project venv's) hashes `None` by address, so its order of rows holding a
/// NULL changes from run to run (3.12 made the hash a constant, which the
/// plugin follows).
fn rows_sorted(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    if lines.len() > 2 {
        lines[1..].sort_unstable();
    }
    lines.join("\n")
}

fn plugin_granted(root: &Path) -> Plugin {
    let root_text = root.to_string_lossy().into_owned();
    common::load(common::shared_engine(), "text2sql")
        .with_limits(SandboxLimits {
            call_timeout_ms: 70_000,
            ..SandboxLimits::default()
        })
        .with_policy(SandboxPolicy {
            read_only_dirs: vec![ReadOnlyDir {
                host: root.to_path_buf(),
                guest: root_text,
            }],
            ..SandboxPolicy::default()
        })
        .unwrap()
}

#[test]
fn text2sql_episodes_agree_with_skyrl_gym() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("sql_data");
    common::skyrl_gym_reference(MAKE_DATABASES, &json!({"root": root}));
    let episodes = episodes();
    let reference = common::skyrl_gym_reference(
        SKYRL_GYM_DRIVER,
        &json!({"root": root, "episodes": episodes}),
    );
    let plugin = plugin_granted(&root);
    let config = json!({"db_path": root});
    let (mut exact, mut unordered) = (0, 0);
    for (episode, expected) in episodes.iter().zip(reference.as_array().unwrap()) {
        let mut env = plugin.create_env(&config, &episode["extras"]).unwrap();
        env.init(&[Message::user("question")]).unwrap();
        let actions = episode["actions"].as_array().unwrap();
        let expected = expected.as_array().unwrap();
        assert_eq!(actions.len(), expected.len());
        for (action, want) in actions.iter().zip(expected) {
            let action = action.as_str().unwrap();
            let got = env.step(action).unwrap();
            let context = format!("{}: {action}", episode["extras"]["db_id"]);
            // skyrl-gym's intermediate reward is the int 0.
            assert_eq!(Some(got.reward), want["reward"].as_f64(), "{context}");
            assert_eq!(json!(got.done), want["done"], "{context}");
            assert_eq!(got.metadata, want["metadata"], "{context}");
            let want_obs = want["observations"].as_array().unwrap();
            assert_eq!(got.observations.len(), want_obs.len(), "{context}");
            for (ours, theirs) in got.observations.iter().zip(want_obs) {
                assert_eq!(theirs["role"], "user");
                let theirs = theirs["content"].as_str().unwrap();
                if ours.content == theirs {
                    exact += 1;
                } else {
                    assert!(
                        theirs.contains("NaN") || theirs.contains("None"),
                        "{context}\nours:   {:?}\ntheirs: {theirs:?}",
                        ours.content
                    );
                    assert_eq!(rows_sorted(&ours.content), rows_sorted(theirs), "{context}");
                    unordered += 1;
                }
            }
        }
    }
    eprintln!(
        "{exact} observations equal, {unordered} equal up to the order of rows holding NULLs"
    );
    assert_eq!(exact + unordered, 23, "observations compared");
    // Two observations hold NULLs in several rows (`SELECT i`, `SELECT s`).
    assert!(
        exact >= 21,
        "{exact} exact, {unordered} up to NULL-row order"
    );
}

#[test]
fn writes_are_refused_where_skyrl_gym_rolls_them_back() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("sql_data");
    common::skyrl_gym_reference(MAKE_DATABASES, &json!({"root": root}));
    let write = "DELETE FROM items";
    let episodes = vec![episode(
        "bird",
        "shop",
        "SELECT 1",
        &[write],
        solution("SELECT 1"),
    )];
    let reference = common::skyrl_gym_reference(
        SKYRL_GYM_DRIVER,
        &json!({"root": root, "episodes": episodes}),
    );
    let theirs = reference[0][0]["observations"][0]["content"]
        .as_str()
        .unwrap();
    assert!(
        theirs.starts_with("\n\n<observation>Empty DataFrame"),
        "{theirs}"
    );
    let mut env = plugin_granted(&root)
        .create_env(&json!({"db_path": root}), &episodes[0]["extras"])
        .unwrap();
    env.init(&[Message::user("q")]).unwrap();
    let ours = env.step(&think_sql(write)).unwrap();
    let db_file = root.join("bird/train/train_databases/shop/shop.sqlite");
    assert!(
        ours.observations[0].content.starts_with(&format!(
            "\n\n<observation>Error executing SQL: attempt to write a readonly database, db file: {}",
            db_file.display()
        )),
        "{:?}",
        ours.observations
    );
}

#[test]
fn a_missing_database_is_the_same_error_as_skyrl_gym() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap().join("sql_data");
    common::skyrl_gym_reference(MAKE_DATABASES, &json!({"root": root}));
    let extras =
        json!({"reward_spec": {"ground_truth": "SELECT 1"}, "db_id": "nope", "data": "spider"});
    let err = plugin_granted(&root)
        .create_env(&json!({"db_path": root}), &extras)
        .err()
        .expect("refused");
    let expected = format!(
        "Database file not found at: {}",
        root.join("spider/database/nope/nope.sqlite").display()
    );
    assert!(err.to_string().contains(&expected), "{err}");
    let theirs = common::skyrl_gym_reference(
        r#"
import json, sys
import skyrl_gym
from omegaconf import DictConfig
job = json.load(sys.stdin)
try:
    skyrl_gym.make("text2sql", env_config=DictConfig({"db_path": job["root"]}), extras=job["extras"])
    print(json.dumps(None))
except FileNotFoundError as e:
    print(json.dumps(str(e)))
"#,
        &json!({"root": root, "extras": extras}),
    );
    assert_eq!(theirs, json!(expected));
}
