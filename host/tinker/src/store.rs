//! The service's state in SQLite (WAL): sessions, models, futures with their
//! results, sampler and training checkpoints, sampling sessions. A restarted
//! server keeps every finished future's result and every saved checkpoint;
//! futures still pending when it stopped are marked failed at start-up, so
//! no client waits on work that will never run.

use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::ApiError;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    sdk_version TEXT NOT NULL,
    tags TEXT NOT NULL,
    created REAL NOT NULL,
    last_heartbeat REAL NOT NULL,
    heartbeats INTEGER NOT NULL DEFAULT 0,
    finished TEXT,
    finish_detail TEXT
);
CREATE TABLE IF NOT EXISTS models (
    model_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    base_model TEXT NOT NULL,
    lora_rank INTEGER NOT NULL,
    lora_seed INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS futures (
    request_id INTEGER PRIMARY KEY AUTOINCREMENT,
    model_id TEXT,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    content_type TEXT,
    result BLOB,
    error TEXT,
    category TEXT,
    created REAL NOT NULL,
    finished REAL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    model_id TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (model_id, checkpoint_id, kind)
);
CREATE TABLE IF NOT EXISTS sampling_sessions (
    sampling_session_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    seq_id INTEGER NOT NULL,
    base_model TEXT,
    model_path TEXT
);
";

/// Seconds since the epoch.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// How a future ended, or that it has not.
#[derive(Debug, Clone, PartialEq)]
pub enum FutureState {
    Pending,
    /// The result's bytes and their content type (JSON or protobuf).
    Completed {
        content_type: String,
        body: Vec<u8>,
    },
    /// The error and its category (`user`: the request was wrong; `server`).
    Failed {
        error: String,
        category: String,
    },
}

/// A model's row.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRow {
    pub model_id: String,
    pub session_id: String,
    pub base_model: String,
    pub lora_rank: i64,
    pub lora_seed: u64,
    pub created: f64,
}

/// A saved checkpoint's row.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointRow {
    pub model_id: String,
    pub checkpoint_id: String,
    /// `training` or `sampler`.
    pub kind: String,
    /// `pending`, `completed` or `failed`.
    pub status: String,
    pub created: f64,
}

/// The database behind the routes and the worker.
pub struct Store {
    conn: Mutex<Connection>,
}

impl Store {
    /// Opens (creating) the database at `path`, in WAL mode, and fails every
    /// future a previous server left pending.
    pub fn open(path: &Path) -> Result<Self, ApiError> {
        let conn = Connection::open(path)?;
        Self::init(conn)
    }

    /// An in-memory database (tests).
    pub fn in_memory() -> Result<Self, ApiError> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<Self, ApiError> {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.execute_batch(SCHEMA)?;
        let orphaned = conn.execute(
            "UPDATE futures SET status = 'failed', category = 'server', finished = ?1,
                error = 'the server stopped before this request ran; send it again'
             WHERE status = 'pending'",
            params![now()],
        )?;
        conn.execute(
            "UPDATE checkpoints SET status = 'failed' WHERE status = 'pending'",
            [],
        )?;
        if orphaned > 0 {
            tracing::warn!(
                orphaned,
                "failed the futures a previous server left pending"
            );
        }
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a new session.
    pub fn create_session(
        &self,
        id: &str,
        sdk_version: &str,
        tags: &[String],
    ) -> Result<(), ApiError> {
        let tags = serde_json::to_string(tags).unwrap_or_default();
        self.conn().execute(
            "INSERT INTO sessions (session_id, sdk_version, tags, created, last_heartbeat)
             VALUES (?1, ?2, ?3, ?4, ?4)",
            params![id, sdk_version, tags, now()],
        )?;
        Ok(())
    }

    /// Notes a heartbeat; false when the session does not exist.
    pub fn heartbeat(&self, id: &str) -> Result<bool, ApiError> {
        let n = self.conn().execute(
            "UPDATE sessions SET last_heartbeat = ?2, heartbeats = heartbeats + 1 WHERE session_id = ?1",
            params![id, now()],
        )?;
        Ok(n == 1)
    }

    /// Marks session `id` finished with `reason` (first wins); false when
    /// there is no such session.
    pub fn finish_session(
        &self,
        id: &str,
        reason: &str,
        detail: Option<&str>,
    ) -> Result<bool, ApiError> {
        if !self.session_exists(id)? {
            return Ok(false);
        }
        self.conn().execute(
            "UPDATE sessions SET finished = ?2, finish_detail = ?3
             WHERE session_id = ?1 AND finished IS NULL",
            params![id, reason, detail],
        )?;
        Ok(true)
    }

    /// How session `id` finished, if it did (a 404 when it does not exist).
    pub fn session_finished(&self, id: &str) -> Result<Option<String>, ApiError> {
        self.conn()
            .query_row(
                "SELECT finished FROM sessions WHERE session_id = ?1",
                [id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?
            .ok_or_else(|| ApiError::not_found(format!("session_id `{id}`: no such session")))
    }

    /// The ids of session `id`'s models.
    pub fn session_models(&self, id: &str) -> Result<Vec<String>, ApiError> {
        let conn = self.conn();
        let mut st = conn.prepare("SELECT model_id FROM models WHERE session_id = ?1")?;
        let ids = st
            .query_map([id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(ids)
    }

    /// Whether session `id` exists.
    pub fn session_exists(&self, id: &str) -> Result<bool, ApiError> {
        Ok(self
            .conn()
            .query_row("SELECT 1 FROM sessions WHERE session_id = ?1", [id], |_| {
                Ok(())
            })
            .optional()?
            .is_some())
    }

    /// Records a new model (created now; `m.created` is ignored).
    pub fn create_model(&self, m: &ModelRow) -> Result<(), ApiError> {
        self.conn().execute(
            "INSERT INTO models (model_id, session_id, base_model, lora_rank, lora_seed, created)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                m.model_id,
                m.session_id,
                m.base_model,
                m.lora_rank,
                m.lora_seed as i64,
                now()
            ],
        )?;
        Ok(())
    }

    /// Model `id`, or a 404 naming it.
    pub fn model(&self, id: &str) -> Result<ModelRow, ApiError> {
        self.conn()
            .query_row(
                &format!("SELECT {MODEL_COLUMNS} FROM models WHERE model_id = ?1"),
                [id],
                model_row,
            )
            .optional()?
            .ok_or_else(|| ApiError::not_found(format!("model_id `{id}`: no such model")))
    }

    /// Every model, oldest first.
    pub fn models(&self) -> Result<Vec<ModelRow>, ApiError> {
        let conn = self.conn();
        let mut st = conn.prepare(&format!(
            "SELECT {MODEL_COLUMNS} FROM models ORDER BY created, model_id"
        ))?;
        let rows = st.query_map([], model_row)?.collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// A new pending future of `kind` for `model_id`: its request id.
    pub fn create_future(&self, kind: &str, model_id: Option<&str>) -> Result<i64, ApiError> {
        let conn = self.conn();
        conn.execute(
            "INSERT INTO futures (model_id, kind, status, created) VALUES (?1, ?2, 'pending', ?3)",
            params![model_id, kind, now()],
        )?;
        Ok(conn.last_insert_rowid())
    }

    /// Stores how future `id` ended.
    pub fn finish_future(&self, id: i64, state: &FutureState) -> Result<(), ApiError> {
        let conn = self.conn();
        match state {
            FutureState::Pending => {}
            FutureState::Completed { content_type, body } => {
                conn.execute(
                    "UPDATE futures SET status = 'completed', content_type = ?2, result = ?3,
                        finished = ?4 WHERE request_id = ?1",
                    params![id, content_type, body, now()],
                )?;
            }
            FutureState::Failed { error, category } => {
                conn.execute(
                    "UPDATE futures SET status = 'failed', error = ?2, category = ?3, finished = ?4
                     WHERE request_id = ?1",
                    params![id, error, category, now()],
                )?;
            }
        }
        Ok(())
    }

    /// Future `id`'s state, or `None` when there is no such future.
    pub fn future(&self, id: i64) -> Result<Option<FutureState>, ApiError> {
        let row = self
            .conn()
            .query_row(
                "SELECT status, content_type, result, error, category FROM futures WHERE request_id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<Vec<u8>>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                        r.get::<_, Option<String>>(4)?,
                    ))
                },
            )
            .optional()?;
        Ok(row.map(
            |(status, ct, body, error, category)| match status.as_str() {
                "completed" => FutureState::Completed {
                    content_type: ct.unwrap_or_else(|| "application/json".into()),
                    body: body.unwrap_or_default(),
                },
                "failed" => FutureState::Failed {
                    error: error.unwrap_or_else(|| "unknown error".into()),
                    category: category.unwrap_or_else(|| "unknown".into()),
                },
                _ => FutureState::Pending,
            },
        ))
    }

    /// Records a pending checkpoint; a 409 when it already exists.
    pub fn create_checkpoint(
        &self,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
    ) -> Result<(), ApiError> {
        let done = self.conn().execute(
            "INSERT OR IGNORE INTO checkpoints (model_id, checkpoint_id, kind, status, created)
             VALUES (?1, ?2, ?3, 'pending', ?4)",
            params![model_id, checkpoint_id, kind, now()],
        )?;
        if done == 0 {
            return Err(ApiError::conflict(format!(
                "path `{checkpoint_id}`: a {kind} checkpoint of that name already exists for model `{model_id}`"
            )));
        }
        Ok(())
    }

    /// Sets a checkpoint's status (`completed` or `failed`).
    pub fn set_checkpoint_status(
        &self,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
        status: &str,
    ) -> Result<(), ApiError> {
        self.conn().execute(
            "UPDATE checkpoints SET status = ?4 WHERE model_id = ?1 AND checkpoint_id = ?2 AND kind = ?3",
            params![model_id, checkpoint_id, kind, status],
        )?;
        Ok(())
    }

    /// A checkpoint's row, if any.
    pub fn checkpoint(
        &self,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
    ) -> Result<Option<CheckpointRow>, ApiError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT model_id, checkpoint_id, kind, status, created FROM checkpoints
                 WHERE model_id = ?1 AND checkpoint_id = ?2 AND kind = ?3",
                params![model_id, checkpoint_id, kind],
                checkpoint_row,
            )
            .optional()?)
    }

    /// Every checkpoint of `model_id`, oldest first.
    pub fn checkpoints(&self, model_id: &str) -> Result<Vec<CheckpointRow>, ApiError> {
        let conn = self.conn();
        let mut st = conn.prepare(
            "SELECT model_id, checkpoint_id, kind, status, created FROM checkpoints
             WHERE model_id = ?1 ORDER BY created, checkpoint_id",
        )?;
        let rows = st
            .query_map([model_id], checkpoint_row)?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Records a sampling session.
    pub fn create_sampling_session(
        &self,
        id: &str,
        session_id: &str,
        seq_id: i64,
        base_model: Option<&str>,
        model_path: Option<&str>,
    ) -> Result<(), ApiError> {
        self.conn().execute(
            "INSERT INTO sampling_sessions (sampling_session_id, session_id, seq_id, base_model, model_path)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, session_id, seq_id, base_model, model_path],
        )?;
        Ok(())
    }

    /// A sampling session's `(base_model, model_path)`, or a 404.
    pub fn sampling_session(&self, id: &str) -> Result<(Option<String>, Option<String>), ApiError> {
        self.conn()
            .query_row(
                "SELECT base_model, model_path FROM sampling_sessions WHERE sampling_session_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?
            .ok_or_else(|| {
                ApiError::not_found(format!("sampling_session_id `{id}`: no such sampling session"))
            })
    }
}

/// The columns [`model_row`] reads, in its order.
const MODEL_COLUMNS: &str = "model_id, session_id, base_model, lora_rank, lora_seed, created";

fn model_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ModelRow> {
    Ok(ModelRow {
        model_id: r.get(0)?,
        session_id: r.get(1)?,
        base_model: r.get(2)?,
        lora_rank: r.get(3)?,
        lora_seed: r.get::<_, i64>(4)? as u64,
        created: r.get(5)?,
    })
}

fn checkpoint_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<CheckpointRow> {
    Ok(CheckpointRow {
        model_id: r.get(0)?,
        checkpoint_id: r.get(1)?,
        kind: r.get(2)?,
        status: r.get(3)?,
        created: r.get(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_futures_survive_a_restart_and_pending_ones_fail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.sqlite");
        let (done, pending) = {
            let s = Store::open(&path).unwrap();
            let done = s.create_future("optim_step", Some("m")).unwrap();
            let pending = s.create_future("forward_backward", Some("m")).unwrap();
            let ok = FutureState::Completed {
                content_type: "application/json".into(),
                body: b"{}".to_vec(),
            };
            s.finish_future(done, &ok).unwrap();
            s.create_checkpoint("m", "c1", "sampler").unwrap();
            s.set_checkpoint_status("m", "c1", "sampler", "completed")
                .unwrap();
            (done, pending)
        };
        let s = Store::open(&path).unwrap();
        assert!(matches!(
            s.future(done).unwrap(),
            Some(FutureState::Completed { .. })
        ));
        match s.future(pending).unwrap() {
            Some(FutureState::Failed { error, category }) => {
                assert!(error.contains("stopped"), "{error}");
                assert_eq!(category, "server");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            s.checkpoint("m", "c1", "sampler").unwrap().unwrap().status,
            "completed"
        );
        assert!(s.future(9999).unwrap().is_none());
        assert_eq!(
            s.create_checkpoint("m", "c1", "sampler")
                .unwrap_err()
                .status,
            axum::http::StatusCode::CONFLICT
        );
    }

    #[test]
    fn a_finished_session_keeps_its_first_reason() {
        let s = Store::in_memory().unwrap();
        s.create_session("s1", "0.38.0", &[]).unwrap();
        assert_eq!(s.session_finished("s1").unwrap(), None);
        assert!(s.finish_session("s1", "success", Some("done")).unwrap());
        assert!(s.finish_session("s1", "errored", None).unwrap());
        assert_eq!(
            s.session_finished("s1").unwrap().as_deref(),
            Some("success")
        );
        assert!(!s.finish_session("nope", "success", None).unwrap());
        assert_eq!(
            s.session_finished("nope").unwrap_err().status,
            axum::http::StatusCode::NOT_FOUND
        );
    }
}
