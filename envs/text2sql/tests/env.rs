use std::time::{Duration, Instant};

use serde_json::{json, Value};
use skyrl_sdk::{Environment, Error, Extras, Message, StepOutput};
use text2sql::{sql, wrap_observation, Text2Sql, INVALID_ACTION};

const DB_ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/databases");
const COMPANY_DB: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/data/databases/sample/database/company/company.sqlite"
);

fn config() -> Value {
    json!({ "db_path": DB_ROOT })
}

/// skyrl-gym's error observation: the message and the database file.
fn sql_error(message: &str) -> String {
    format!("Error executing SQL: {message}, db file: {COMPANY_DB}")
}

fn extras(db_id: &str, gold: &str, max_turns: u32) -> Extras {
    Extras::from_json(
        &json!({
            "reward_spec": {"method": "rule", "ground_truth": gold},
            "db_id": db_id,
            "data": "sample",
            "max_turns": max_turns,
        })
        .to_string(),
    )
    .unwrap()
}

fn episode(gold: &str) -> Text2Sql {
    env_with(config(), "company", gold, 5)
}

fn env_with(config: Value, db_id: &str, gold: &str, max_turns: u32) -> Text2Sql {
    Text2Sql::create(&config, &extras(db_id, gold, max_turns)).unwrap()
}

/// The single observation text of a non-final step.
fn obs(out: &StepOutput) -> &str {
    assert!(!out.done, "{out:?}");
    assert_eq!(out.reward, 0.0);
    assert_eq!(out.observations.len(), 1, "{out:?}");
    assert_eq!(
        out.observations[0],
        Message::user(&out.observations[0].content)
    );
    &out.observations[0].content
}

/// The observation text inside the wrapper, checking the wrapper.
fn inner(out: &StepOutput, turns_left: u32) -> String {
    let text = obs(out);
    let suffix = format!(
        "\n<reminder>You have {turns_left} turns left to complete the task.</reminder></observation>\n\n"
    );
    let body = text
        .strip_prefix("\n\n<observation>")
        .and_then(|t| t.strip_suffix(&suffix))
        .unwrap_or_else(|| panic!("bad wrapper: {text:?}"));
    body.to_owned()
}

fn sql_action(query: &str) -> String {
    format!("<think>Let me look.</think>\n<sql>{query}</sql>")
}

const GOLD_CHICAGO: &str = "SELECT name FROM departments WHERE location = 'Chicago';";

#[test]
fn sql_action_shows_the_table_in_the_observation_wrapper() {
    let mut env = episode(GOLD_CHICAGO);
    let out = env
        .step(&sql_action(
            "SELECT name, budget FROM departments WHERE location = 'Chicago' ORDER BY dept_id",
        ))
        .unwrap();
    assert_eq!(
        obs(&out),
        "\n\n<observation>              0      1\n        Finance 380000\nHuman Resources 250000\n\
         <reminder>You have 4 turns left to complete the task.</reminder></observation>\n\n"
    );
    // The turns-left count goes down each step; a column of only NULLs is
    // an object column (None), as in pandas.
    let out = env
        .step(&sql_action(
            "SELECT first_name, manager_id FROM employees WHERE emp_id = 1",
        ))
        .unwrap();
    assert_eq!(inner(&out, 3), "    0    1\nAlice None");
    assert_eq!(
        out.metadata,
        json!({"tool_group": "SQLCodeExecutorToolGroup", "tool_name": "sql",
               "tool_input": ["company", "SELECT first_name, manager_id FROM employees WHERE emp_id = 1", 3]})
    );
    assert_eq!(
        env.metrics(),
        json!({"turns": 2, "sql_calls": 2, "sql_errors": 0, "sql_timeouts": 0,
               "invalid_actions": 0, "format_ok": false, "correct": false})
    );
    // The history holds every action and observation, in order.
    assert!(env
        .history()
        .starts_with("<think>Let me look.</think>\n<sql>"));
    assert!(env.history().ends_with(obs(&out)));
}

#[test]
fn empty_results_and_reals_render_like_pandas() {
    let mut env = episode(GOLD_CHICAGO);
    let out = env
        .step(&sql_action("SELECT name FROM departments WHERE 0"))
        .unwrap();
    assert_eq!(inner(&out, 4), "Empty DataFrame\nColumns: []\nIndex: []");
    let out = env
        .step(&sql_action("SELECT 2.5 AS x, 1.0 AS y, 'a\nb' AS z"))
        .unwrap();
    assert_eq!(inner(&out, 3), "  0   1    2\n2.5 1.0 a\\nb");
    // An empty statement returns nothing, like Python's `cursor.execute("")`.
    let out = env.step(&sql_action(" -- nothing ")).unwrap();
    assert_eq!(inner(&out, 2), "Empty DataFrame\nColumns: []\nIndex: []");
}

#[test]
fn sql_errors_are_reported() {
    let mut env = episode(GOLD_CHICAGO);
    let out = env.step(&sql_action("SELECT * FROM nope")).unwrap();
    assert_eq!(inner(&out, 4), sql_error("no such table: nope"));
    let out = env
        .step(&sql_action("SELEC name FROM departments"))
        .unwrap();
    assert_eq!(inner(&out, 3), sql_error("near \"SELEC\": syntax error"));
    let out = env.step(&sql_action("SELECT 1; SELECT 2")).unwrap();
    assert_eq!(
        inner(&out, 2),
        sql_error("You can only execute one statement at a time.")
    );
    // Python binds no parameters, so any placeholder is an error.
    let out = env.step(&sql_action("SELECT ?, :name")).unwrap();
    assert_eq!(
        inner(&out, 1),
        sql_error(
            "Incorrect number of bindings supplied. The current statement uses 2, and there are 0 supplied."
        )
    );
    assert_eq!(env.metrics()["sql_errors"], 4);
}

#[test]
fn an_action_without_sql_is_invalid() {
    let mut env = episode(GOLD_CHICAGO);
    let out = env
        .step("<think>I should look at the tables.</think>")
        .unwrap();
    assert_eq!(obs(&out), wrap_observation(INVALID_ACTION, 4));
    assert_eq!(
        inner(&out, 4),
        "Your previous action is invalid. Follow the format of outputting thinking process and sql tool, and try again."
    );
    // Only the first <sql> block runs.
    let out = env
        .step("<sql>SELECT 1 AS a</sql> and <sql>SELECT 2 AS b</sql>")
        .unwrap();
    assert_eq!(inner(&out, 3), " 0\n 1");
    assert_eq!(env.metrics()["invalid_actions"], 1);
}

#[test]
fn long_results_are_truncated_to_50_rows() {
    let mut env = episode(GOLD_CHICAGO);
    let query = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 5000) \
                 SELECT x, 'row number ' || x AS label FROM c";
    let out = env.step(&sql_action(query)).unwrap();
    // The first 50 rows of the set, in frozenset order (from skyrl-gym).
    let text = inner(&out, 4);
    assert!(
        text.starts_with(
            "Truncated to 50 lines since returned response too long:    0               1\n\
             2008 row number 2008\n 406  row number 406\n1719 row number 1719\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("\n3527 row number 3527"), "{text}");
    assert_eq!(text.lines().count(), 51);

    // A short result is not truncated even with many rows' worth of SQL.
    let out = env
        .step(&sql_action(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 60) SELECT x FROM c",
        ))
        .unwrap();
    let text = inner(&out, 3);
    assert!(text.starts_with(" 0\n51\n57\n 2\n60\n 5\n"), "{text}");
    assert_eq!(text.lines().count(), 61);

    // An endless result stops being read at OBSERVATION_ROW_LIMIT rows.
    let start = Instant::now();
    let out = env
        .step(&sql_action(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c",
        ))
        .unwrap();
    let text = inner(&out, 2);
    assert!(
        text.starts_with("Truncated to 50 lines since returned response too long:     0\n"),
        "{text}"
    );
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[test]
fn slow_queries_time_out() {
    let mut env = env_with(
        json!({"db_path": DB_ROOT, "sql_timeout_s": 0.2}),
        "company",
        GOLD_CHICAGO,
        5,
    );
    let query =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) \
                 SELECT count(*) FROM c";
    let start = Instant::now();
    let out = env.step(&sql_action(query)).unwrap();
    let elapsed = start.elapsed();
    assert_eq!(inner(&out, 4), format!("SQL Timeout:\n{query}"));
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_eq!(env.metrics()["sql_timeouts"], 1);
    // The connection still works afterwards.
    let out = env
        .step(&sql_action("SELECT count(*) AS n FROM departments"))
        .unwrap();
    assert_eq!(inner(&out, 3), " 0\n 6");
}

#[test]
fn writes_are_rejected_and_the_file_is_unchanged() {
    let before = std::fs::read(COMPANY_DB).unwrap();
    let vacuum_target = std::env::temp_dir().join("text2sql-vacuum-into-test.sqlite");
    let _ = std::fs::remove_file(&vacuum_target);
    let mut env = env_with(config(), "company", GOLD_CHICAGO, 100);
    let writes = [
        "UPDATE salaries SET amount = 0".to_owned(),
        "DELETE FROM employees".to_owned(),
        "INSERT INTO departments VALUES (99, 'X', 'Y', 1)".to_owned(),
        "DROP TABLE salaries".to_owned(),
        "CREATE TABLE t (x INTEGER)".to_owned(),
        "CREATE TEMP TABLE t (x INTEGER)".to_owned(),
        "CREATE INDEX i ON employees(last_name)".to_owned(),
        "ALTER TABLE employees ADD COLUMN y TEXT".to_owned(),
        "REINDEX".to_owned(),
        "PRAGMA journal_mode = WAL".to_owned(),
        "PRAGMA user_version = 7".to_owned(),
        format!("VACUUM INTO '{}'", vacuum_target.display()),
    ];
    for (i, write) in writes.iter().enumerate() {
        let out = env.step(&sql_action(write)).unwrap();
        assert_eq!(
            inner(&out, 100 - 1 - i as u32),
            sql_error("attempt to write a readonly database"),
            "{write}"
        );
    }
    // Turning query_only off does not help: the connection is read-only.
    env.step(&sql_action("PRAGMA query_only = OFF")).unwrap();
    let out = env
        .step(&sql_action("UPDATE salaries SET amount = 0"))
        .unwrap();
    assert!(
        obs(&out).starts_with("\n\n<observation>Error executing SQL: "),
        "{out:?}"
    );
    let out = env
        .step(&sql_action("SELECT count(*) AS n FROM salaries"))
        .unwrap();
    assert!(
        obs(&out).starts_with("\n\n<observation> 0\n71\n"),
        "{out:?}"
    );
    assert!(!vacuum_target.exists());
    drop(env);
    assert!(std::fs::read(COMPANY_DB).unwrap() == before);
}

const THINK_SQL_OBSERVE: &str =
    "<think>Which departments are in Chicago?</think>\n<sql>SELECT name, location FROM departments</sql>";

#[test]
fn a_correct_solution_after_exploring_scores_one() {
    let mut env = episode(GOLD_CHICAGO);
    let out = env.step(THINK_SQL_OBSERVE).unwrap();
    assert!(!out.done);
    let out = env
        .step(
            "<think>Finance and Human Resources are in Chicago.</think>\n\
             <solution>SELECT name FROM departments WHERE location = 'Chicago' ORDER BY name DESC</solution>",
        )
        .unwrap();
    assert_eq!(out, StepOutput::done(1.0));
    assert_eq!(
        env.metrics(),
        json!({"turns": 2, "sql_calls": 1, "sql_errors": 0, "sql_timeouts": 0,
               "invalid_actions": 0, "format_ok": true, "correct": true})
    );
    assert!(matches!(env.step("more"), Err(Error::Failed(_))));
}

#[test]
fn results_compare_as_sets_with_python_number_equality() {
    let mut env = episode("SELECT COUNT(*) FROM employees;");
    let out = env
        .step("<think>There are 24 employees.</think><solution>SELECT 24.0</solution>")
        .unwrap();
    assert_eq!(out.reward, 1.0);
    let mut env = episode("SELECT location FROM departments");
    let out = env
        .step("<think>t</think><solution>SELECT DISTINCT location FROM departments ORDER BY 1</solution>")
        .unwrap();
    assert_eq!(out.reward, 1.0);
}

#[test]
fn a_wrong_but_valid_solution_scores_zero() {
    for solution in [
        "SELECT name FROM departments WHERE location = 'New York'",
        "SELECT name, location FROM departments WHERE location = 'Chicago'",
        "SELECT nme FROM departments",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    ] {
        let mut env = env_with(
            json!({"db_path": DB_ROOT, "final_sql_timeout_s": 0.2}),
            "company",
            GOLD_CHICAGO,
            5,
        );
        env.step(THINK_SQL_OBSERVE).unwrap();
        let out = env
            .step(&format!(
                "<think>Done.</think><solution>{solution}</solution>"
            ))
            .unwrap();
        assert_eq!(out, StepOutput::done(0.0), "{solution}");
        assert_eq!(env.metrics()["format_ok"], true);
        assert_eq!(env.metrics()["correct"], false);
    }
    // Results over REWARD_ROW_LIMIT rows never match.
    for (extra, reward) in [(0, 1.0), (1, 0.0)] {
        let big = format!(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {}) SELECT x FROM c",
            sql::REWARD_ROW_LIMIT + extra
        );
        let mut env = episode(&big);
        let out = env
            .step(&format!("<think>t</think><solution>{big}</solution>"))
            .unwrap();
        assert_eq!(out.reward, reward, "{big}");
    }
    // Two empty results are equal, as in skyrl-gym.
    let empty = "SELECT name FROM departments WHERE 0";
    let mut env = episode(empty);
    let out = env
        .step("<think>t</think><solution>SELECT 1 WHERE 0</solution>")
        .unwrap();
    assert_eq!(out.reward, 1.0);
}

#[test]
fn badly_formatted_histories_score_minus_one() {
    let solution = "<solution>SELECT name FROM departments WHERE location = 'Chicago'</solution>";
    // No <think> at all.
    let mut e = episode(GOLD_CHICAGO);
    assert_eq!(e.step(solution).unwrap(), StepOutput::done(-1.0));
    assert_eq!(e.metrics()["format_ok"], false);
    // Two solutions.
    let mut e = episode(GOLD_CHICAGO);
    let out = e
        .step(&format!("<think>t</think>{solution}\n{solution}"))
        .unwrap();
    assert_eq!(out, StepOutput::done(-1.0));
    // No <think> right after an observation.
    let mut e = episode(GOLD_CHICAGO);
    e.step(THINK_SQL_OBSERVE).unwrap();
    let out = e.step(&format!("So: {solution}")).unwrap();
    assert_eq!(out, StepOutput::done(-1.0));
    // A <sql> tag inside the solution.
    let mut e = episode(GOLD_CHICAGO);
    let out = e
        .step("<think>t</think><solution><sql>SELECT name FROM departments WHERE location = 'Chicago'</sql></solution>")
        .unwrap();
    assert_eq!(out, StepOutput::done(-1.0));
}

#[test]
fn the_episode_ends_at_max_turns() {
    let mut env = env_with(config(), "company", GOLD_CHICAGO, 2);
    let out = env.step(THINK_SQL_OBSERVE).unwrap();
    assert!(inner(&out, 1).contains("Human Resources"));
    // The last turn ends the episode even without a solution (-1.0) and does
    // not run its SQL.
    let out = env.step("<think>More.</think><sql>SELECT 1</sql>").unwrap();
    assert_eq!(out, StepOutput::done(-1.0));
    assert_eq!(env.metrics()["turns"], 2);
    assert_eq!(env.metrics()["sql_calls"], 1);

    // A solution on the last turn still scores.
    let mut env = env_with(config(), "company", GOLD_CHICAGO, 1);
    let out = env
        .step(&format!(
            "<think>t</think><solution>{GOLD_CHICAGO}</solution>"
        ))
        .unwrap();
    assert_eq!(out, StepOutput::done(1.0));

    // max_turns defaults to 5.
    let extras = Extras::from_json(
        &json!({"reward_spec": {"ground_truth": GOLD_CHICAGO}, "db_id": "company", "data": "sample"})
            .to_string(),
    )
    .unwrap();
    let mut env = Text2Sql::create(&config(), &extras).unwrap();
    for left in (1..5).rev() {
        assert_eq!(inner(&env.step("nothing").unwrap(), left), INVALID_ACTION);
    }
    assert!(env.step("nothing").unwrap().done);
}

#[test]
fn every_shipped_gold_sql_returns_rows_and_solves_its_row() {
    let mut rows = 0;
    for (text, split) in [
        (include_str!("../data/train.jsonl"), "train"),
        (include_str!("../data/val.jsonl"), "val"),
    ] {
        for line in text.lines() {
            let row: Value = serde_json::from_str(line).unwrap();
            assert_eq!(row["env_class"], "text2sql");
            assert_eq!(row["data"], "sample");
            assert_eq!(row["extra_info"]["split"], split);
            assert_eq!(row["prompt"][0]["role"], "system");
            assert_eq!(row["prompt"][1]["role"], "user");
            let user = row["prompt"][1]["content"].as_str().unwrap();
            assert!(user.contains("CREATE TABLE"), "{user}");
            assert!(user.contains(row["extra_info"]["question"].as_str().unwrap()));
            let gold = row["reward_spec"]["ground_truth"].as_str().unwrap();

            let extras = Extras::from_json(line).unwrap();
            let mut env = Text2Sql::create(&config(), &extras).unwrap();
            let conn = sql::open_read_only(env.db_file()).unwrap();
            let result = sql::run(
                &conn,
                gold,
                Duration::from_secs(30),
                1000,
                sql::Overflow::Fail,
            )
            .unwrap();
            assert!(!result.rows.is_empty(), "{gold}");

            let out = env
                .step(&format!(
                    "<think>Answering.</think>\n<solution>\n{gold}\n</solution>"
                ))
                .unwrap();
            assert_eq!(out, StepOutput::done(1.0), "{gold}");
            rows += 1;
        }
    }
    assert_eq!(rows, 39);
}

fn create_err(config: Value, extras: Value) -> String {
    let extras = Extras::from_json(&extras.to_string()).unwrap();
    match Text2Sql::create(&config, &extras) {
        Err(Error::InvalidConfig(message)) => message,
        Err(other) => panic!("expected a config error, got {other}"),
        Ok(_) => panic!("expected a config error for {extras:?}"),
    }
}

#[test]
fn bad_rows_and_configs_are_config_errors() {
    let row = |db_id: Value, data: Value| json!({"reward_spec": {"ground_truth": "SELECT 1"}, "db_id": db_id, "data": data});
    for (db_id, data) in [
        (json!("../company"), json!("sample")),
        (json!("company/.."), json!("sample")),
        (json!("a/b"), json!("sample")),
        (json!(""), json!("sample")),
        (json!(3), json!("sample")),
        (json!("company"), json!("..")),
        (json!("company"), json!("sample/database")),
    ] {
        let message = create_err(config(), row(db_id.clone(), data.clone()));
        assert!(message.contains("extras."), "{db_id} {data}: {message}");
    }
    let message = create_err(config(), row(json!("nope"), json!("sample")));
    assert!(
        message.starts_with("Database file not found at: ")
            && message.ends_with("sample/database/nope/nope.sqlite"),
        "{message}"
    );
    let message = create_err(json!({}), row(json!("company"), json!("sample")));
    assert!(
        message.contains("/data/sample/database/company/company.sqlite"),
        "{message}"
    );
    let message = create_err(
        config(),
        json!({"reward_spec": {"ground_truth": "SELECT 1"}, "data": "sample"}),
    );
    assert!(message.contains("extras.db_id is required"), "{message}");
    let message = create_err(
        config(),
        json!({"reward_spec": {"ground_truth": "SELECT 1"}, "db_id": "company"}),
    );
    assert!(message.contains("extras.data is required"), "{message}");
    let message = create_err(config(), json!({"db_id": "company", "data": "sample"}));
    assert!(message.contains("ground_truth"), "{message}");
    for bad in [
        json!({"db_path": DB_ROOT, "sql_timeout_s": 0}),
        json!({"db_path": DB_ROOT, "final_sql_timeout_s": -1}),
        json!({"db_path": DB_ROOT, "timeout": 5}),
    ] {
        create_err(bad, row(json!("company"), json!("sample")));
    }
    // A file that is not a database.
    let message = create_err(
        json!({"db_file_path": concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")}),
        row(json!("not_a_db"), json!("sample")),
    );
    assert!(message.contains("cannot open database"), "{message}");
}
