//! Text-to-SQL (skyrl-gym `text2sql`, the SkyRL-SQL recipe): the model
//! explores a SQLite database with `<sql>...</sql>` queries and answers with
//! `<solution>...</solution>`.
//!
//! # Row and config
//!
//! A row names its database by `extras.data` and `extras.db_id`, in
//! SkyRL-SQL's layouts under the env config's `db_path` (SkyRL's key;
//! `db_file_path` is accepted too): `synsql` →
//! `SynSQL-2.5M/databases/{db_id}/{db_id}.sqlite`, `spider` →
//! `spider/database/...`, `bird` → `bird/train/train_databases/...`; any
//! other `data` → `{data}/database/...` (see [`Config::db_file`]). The file is
//! opened read-only ([`sql::open_read_only`]); a missing one fails `create`
//! with skyrl-gym's `Database file not found at: {path}`.
//! `extras.reward_spec.ground_truth` is the gold SQL; `max_turns` comes from
//! `extras.max_turns()` (default 5). Other env config keys (optional):
//! `sql_timeout_s` (5) and `final_sql_timeout_s` (30); see [`Config`].
//!
//! # Episode
//!
//! Every step appends the action to the history (all actions and
//! observations concatenated). The episode ends when `max_turns` is reached
//! or the action contains both `<solution>` and `</solution>`; the reward is
//! then [`reward::score`] of the history and there are no observations.
//! Otherwise the first `<sql>(.*?)</sql>` runs (at most `sql_timeout_s`) and
//! one user message is returned (and appended to the history):
//!
//! ```text
//! \n\n<observation>{obs}\n<reminder>You have {k} turns left to complete the task.</reminder></observation>\n\n
//! ```
//!
//! with `obs` from [`sql::observation`] (or [`INVALID_ACTION`] without an
//! `<sql>` block) and `k = max_turns - turns`. Intermediate rewards are 0; the
//! step metadata is skyrl-gym's `{tool_group, tool_name, tool_input:
//! [db_id, sql, turns_left]}`.
//!
//! Observations are skyrl-gym's exactly: the distinct rows in the order
//! Python's `frozenset` gives them ([`pyset`]; with text values, the order
//! skyrl-gym shows under `PYTHONHASHSEED=0`), rendered as pandas 3 renders
//! them ([`table`]), and Python's `sqlite3` error texts (placeholders, text
//! that is not UTF-8, several statements) followed by `, db file: {path}`.
//!
//! # Differences from skyrl-gym (on purpose)
//!
//! - Statements that would write are refused unexecuted (`Error executing
//!   SQL: attempt to write a readonly database, ...`; reward 0). skyrl-gym
//!   runs them inside a transaction it rolls back: the databases here are
//!   granted read-only, so nothing a model writes can leak into another
//!   episode even by accident.
//! - A query reads at most [`sql::OBSERVATION_ROW_LIMIT`] rows for an
//!   observation and [`sql::REWARD_ROW_LIMIT`] for the reward (a larger
//!   result scores 0): the sandbox's memory is bounded.
//! - No assertion that `</sql>` / `</solution>` end the action (skyrl-gym
//!   checks its stop strings that way and fails the step).
//! - The sandbox's per-call deadline (`environment.sandbox.<plugin>.call_timeout_ms`)
//!   must leave room for the last step's two queries of up to
//!   `final_sql_timeout_s` each, or the step fails instead of scoring 0.

pub mod config;
pub mod format;
pub mod pyset;
pub mod reward;
pub mod sql;
pub mod table;
pub mod vfs;

use std::path::PathBuf;

use rusqlite::Connection;
use serde_json::{json, Value};
use skyrl_sdk::{pystr, Environment, Error, Extras, Message, Result, StepOutput};

pub use config::Config;

/// `max_turns` when neither the generator nor the row sets one.
pub const DEFAULT_MAX_TURNS: u32 = 5;
/// The observation of an action with neither a `<sql>` block nor a solution.
pub const INVALID_ACTION: &str = "Your previous action is invalid. Follow the format of outputting thinking process and sql tool, and try again.";

/// skyrl-gym's name for the SQL tool group (step metadata `tool_group`).
pub const TOOL_GROUP: &str = "SQLCodeExecutorToolGroup";
/// skyrl-gym's name for the SQL tool (step metadata `tool_name`).
pub const TOOL_NAME: &str = "sql";

/// One text-to-SQL episode.
pub struct Text2Sql {
    conn: Connection,
    db_file: PathBuf,
    db_id: String,
    gold_sql: String,
    config: Config,
    max_turns: u32,
    turns: u32,
    history: String,
    sql_calls: u32,
    sql_errors: u32,
    sql_timeouts: u32,
    invalid_actions: u32,
    score: Option<reward::Score>,
}

impl Text2Sql {
    /// The database file this episode reads.
    pub fn db_file(&self) -> &std::path::Path {
        &self.db_file
    }

    /// All actions and observations so far, concatenated.
    pub fn history(&self) -> &str {
        &self.history
    }

    /// The observation text (without the wrapper) for a non-final action.
    fn explore(&mut self, action: &str) -> String {
        let Some(query) = sql_block(action) else {
            self.invalid_actions += 1;
            return INVALID_ACTION.to_owned();
        };
        self.sql_calls += 1;
        let result = sql::run(
            &self.conn,
            query,
            self.config.sql_timeout(),
            sql::OBSERVATION_ROW_LIMIT,
            sql::Overflow::Truncate,
        );
        match result {
            Err(sql::SqlError::Timeout) => self.sql_timeouts += 1,
            Err(_) => self.sql_errors += 1,
            Ok(_) => {}
        }
        sql::observation(&result, query, &self.db_file)
    }
}

/// The first `<sql>...</sql>` block's text (not trimmed), if any: what
/// skyrl-gym's `re.search(r"<sql>(.*?)</sql>", action, re.DOTALL)` captures.
pub fn sql_block(action: &str) -> Option<&str> {
    pystr::first_block(action, "<sql>", "</sql>")
}

/// The user message shown after a non-final step.
pub fn wrap_observation(obs: &str, turns_left: u32) -> String {
    format!(
        "\n\n<observation>{obs}\n<reminder>You have {turns_left} turns left to complete the task.</reminder></observation>\n\n"
    )
}

impl Environment for Text2Sql {
    fn create(config: &Value, extras: &Extras) -> Result<Self> {
        let config = Config::from_json(config)?;
        let gold_sql = extras.ground_truth_str()?;
        let max_turns = extras.max_turns()?.unwrap_or(DEFAULT_MAX_TURNS);
        let db_file = config.db_file(extras)?;
        let conn = sql::open_read_only(&db_file)?;
        let db_id = config::path_component(extras, "db_id")?.to_owned();
        Ok(Self {
            conn,
            db_file,
            db_id,
            gold_sql,
            config,
            max_turns,
            turns: 0,
            history: String::new(),
            sql_calls: 0,
            sql_errors: 0,
            sql_timeouts: 0,
            invalid_actions: 0,
            score: None,
        })
    }

    fn step(&mut self, action: &str) -> Result<StepOutput> {
        if self.score.is_some() {
            return Err(Error::failed("step called after the episode ended"));
        }
        self.turns += 1;
        self.history.push_str(action);
        let done = self.turns >= self.max_turns
            || (action.contains(format::SOLUTION_START) && action.contains(format::SOLUTION_END));
        if done {
            let score = reward::score(
                &self.conn,
                &self.history,
                &self.gold_sql,
                self.config.final_sql_timeout(),
            );
            self.score = Some(score);
            return Ok(StepOutput::done(score.reward));
        }
        let turns_left = self.max_turns - self.turns;
        let obs = wrap_observation(&self.explore(action), turns_left);
        self.history.push_str(&obs);
        let metadata = json!({
            "tool_group": TOOL_GROUP,
            "tool_name": TOOL_NAME,
            "tool_input": [self.db_id, sql_block(action), turns_left],
        });
        Ok(StepOutput::next(vec![Message::user(obs)], 0.0).with_metadata(metadata))
    }

    fn metrics(&self) -> Value {
        json!({
            "turns": self.turns,
            "sql_calls": self.sql_calls,
            "sql_errors": self.sql_errors,
            "sql_timeouts": self.sql_timeouts,
            "invalid_actions": self.invalid_actions,
            "format_ok": self.score.is_some_and(|s| s.format_ok),
            "correct": self.score.is_some_and(|s| s.reward == 1.0),
        })
    }
}

skyrl_sdk::export_env!(
    Text2Sql,
    name = "text2sql",
    version = "0.1.0",
    description = "Text-to-SQL over read-only SQLite databases (skyrl-gym text2sql)"
);
