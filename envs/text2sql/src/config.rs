//! The env config and the database file each episode reads.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use skyrl_sdk::{Error, Extras, Result};

/// Default `db_path`: the guest path where the project's configs grant the
/// database directory read-only.
pub const DEFAULT_DB_PATH: &str = "/data";
/// Where SkyRL-SQL's data preparation puts each dataset's databases under
/// `db_path`, by the rows' `data` field (skyrl-gym's `SQLEnv`).
pub const SKYRL_SQL_LAYOUTS: [(&str, &str); 3] = [
    ("synsql", "SynSQL-2.5M/databases"),
    ("spider", "spider/database"),
    ("bird", "bird/train/train_databases"),
];
/// Default `sql_timeout_s`: limit for each exploratory `<sql>` query.
pub const DEFAULT_SQL_TIMEOUT_S: f64 = 5.0;
/// Default `final_sql_timeout_s`: limit for each query run for the reward.
pub const DEFAULT_FINAL_SQL_TIMEOUT_S: f64 = 30.0;

/// The env config (the JSON object passed to `create`; every key optional).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Root of the databases (SkyRL's `environment.skyrl_gym.text2sql.db_path`;
    /// `db_file_path` is accepted too); see [`Config::db_file`].
    #[serde(alias = "db_file_path")]
    pub db_path: String,
    /// Seconds an exploratory `<sql>` query may run.
    pub sql_timeout_s: f64,
    /// Seconds the predicted and the gold query may each run at the end.
    pub final_sql_timeout_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            db_path: DEFAULT_DB_PATH.to_owned(),
            sql_timeout_s: DEFAULT_SQL_TIMEOUT_S,
            final_sql_timeout_s: DEFAULT_FINAL_SQL_TIMEOUT_S,
        }
    }
}

impl Config {
    /// Parses and checks the env config.
    pub fn from_json(config: &serde_json::Value) -> Result<Self> {
        let config: Self = skyrl_sdk::parse_config(config)?;
        timeout("sql_timeout_s", config.sql_timeout_s)?;
        timeout("final_sql_timeout_s", config.final_sql_timeout_s)?;
        Ok(config)
    }

    /// [`Config::sql_timeout_s`] as a duration.
    pub fn sql_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.sql_timeout_s)
    }

    /// [`Config::final_sql_timeout_s`] as a duration.
    pub fn final_sql_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.final_sql_timeout_s)
    }

    /// The database file of a row, `{dir}/{db_id}/{db_id}.sqlite`, where
    /// `dir` is SkyRL-SQL's layout for `extras.data` ([`SKYRL_SQL_LAYOUTS`]:
    /// `synsql`, `spider`, `bird`) under `db_path`, or, for any other
    /// dataset name (which skyrl-gym refuses), `{db_path}/{data}/database`.
    /// Neither field may contain `/`, `\` or `..`, so a row cannot reach
    /// outside `db_path`.
    pub fn db_file(&self, extras: &Extras) -> Result<PathBuf> {
        let data = path_component(extras, "data")?;
        let db_id = path_component(extras, "db_id")?;
        let root = PathBuf::from(&self.db_path);
        let dir = match SKYRL_SQL_LAYOUTS.iter().find(|(name, _)| *name == data) {
            Some((_, layout)) => root.join(layout),
            None => root.join(data).join("database"),
        };
        Ok(dir.join(db_id).join(format!("{db_id}.sqlite")))
    }
}

/// A timeout must be a positive number of seconds that fits a `Duration`.
fn timeout(key: &str, seconds: f64) -> Result<()> {
    if seconds.is_finite() && seconds > 0.0 && Duration::try_from_secs_f64(seconds).is_ok() {
        Ok(())
    } else {
        Err(Error::config(format!(
            "env config: {key} must be a positive number of seconds, got {seconds}"
        )))
    }
}

/// A required string field of the extras that is safe as one path
/// component (`data`, `db_id`).
pub fn path_component<'a>(extras: &'a Extras, key: &str) -> Result<&'a str> {
    let value = extras
        .get(key)
        .ok_or_else(|| Error::config(format!("extras.{key} is required")))?;
    let text = value
        .as_str()
        .ok_or_else(|| Error::config(format!("extras.{key} must be a string, got {value}")))?;
    if text.is_empty()
        || text.contains(['/', '\\', '\0'])
        || text.contains("..")
        || text.trim() != text
    {
        return Err(Error::config(format!(
            "extras.{key} must be a plain name (no '/', '\\' or '..'), got {text:?}"
        )));
    }
    Ok(text)
}
