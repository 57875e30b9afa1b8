//! The service's state in SQLite (WAL) or Postgres: sessions, models,
//! futures with their results, sampler and training checkpoints, sampling
//! sessions. A restarted
//! server keeps every finished future's result and every saved checkpoint;
//! futures still pending when it stopped are marked failed at start-up, so
//! no client waits on work that will never run.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::db::{Db, DbUrl, Row};
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
CREATE TABLE IF NOT EXISTS downloads (
    token TEXT PRIMARY KEY,
    model_id TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    expires REAL NOT NULL
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
    /// When it is deleted (seconds since the epoch), if ever.
    pub expires: Option<f64>,
    /// Published (`publish_checkpoint_from_tinker_path`).
    pub public: bool,
}

/// The database behind the routes and the worker.
pub struct Store {
    db: Db,
}

impl Store {
    /// Opens (creating) the database `url` names (SQLite in WAL mode, or
    /// Postgres) and fails every future a previous server left pending.
    pub fn open(url: &DbUrl) -> Result<Self, ApiError> {
        Self::init(Db::open(url, SCHEMA)?)
    }

    /// An in-memory SQLite database (tests).
    pub fn in_memory() -> Result<Self, ApiError> {
        Self::init(Db::sqlite_in_memory(SCHEMA)?)
    }

    fn init(db: Db) -> Result<Self, ApiError> {
        // Columns later servers added to a table older ones created.
        db.add_column("checkpoints", "expires", "REAL")?;
        db.add_column("checkpoints", "public", "INTEGER NOT NULL DEFAULT 0")?;
        let orphaned = db.execute(
            "UPDATE futures SET status = 'failed', category = 'server', finished = ?1,
                error = 'the server stopped before this request ran; send it again'
             WHERE status = 'pending'",
            &[now().into()],
        )?;
        db.execute(
            "UPDATE checkpoints SET status = 'failed' WHERE status = 'pending'",
            &[],
        )?;
        if orphaned > 0 {
            tracing::warn!(
                orphaned,
                "failed the futures a previous server left pending"
            );
        }
        Ok(Self { db })
    }

    /// Records a new session.
    pub fn create_session(
        &self,
        id: &str,
        sdk_version: &str,
        tags: &[String],
    ) -> Result<(), ApiError> {
        let tags = serde_json::to_string(tags).unwrap_or_default();
        let t = now();
        self.db.execute(
            "INSERT INTO sessions (session_id, sdk_version, tags, created, last_heartbeat)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                id.into(),
                sdk_version.into(),
                tags.into(),
                t.into(),
                t.into(),
            ],
        )?;
        Ok(())
    }

    /// Notes a heartbeat; false when the session does not exist.
    pub fn heartbeat(&self, id: &str) -> Result<bool, ApiError> {
        let n = self.db.execute(
            "UPDATE sessions SET last_heartbeat = ?2, heartbeats = heartbeats + 1 WHERE session_id = ?1",
            &[id.into(), now().into()],
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
        self.db.execute(
            "UPDATE sessions SET finished = ?2, finish_detail = ?3
             WHERE session_id = ?1 AND finished IS NULL",
            &[id.into(), reason.into(), detail.into()],
        )?;
        Ok(true)
    }

    /// How session `id` finished, if it did (a 404 when it does not exist).
    pub fn session_finished(&self, id: &str) -> Result<Option<String>, ApiError> {
        self.db
            .query_opt(
                "SELECT finished FROM sessions WHERE session_id = ?1",
                &[id.into()],
            )?
            .ok_or_else(|| ApiError::not_found(format!("session_id `{id}`: no such session")))?
            .opt_text(0)
    }

    /// The ids of session `id`'s models.
    pub fn session_models(&self, id: &str) -> Result<Vec<String>, ApiError> {
        self.db
            .query(
                "SELECT model_id FROM models WHERE session_id = ?1 ORDER BY model_id",
                &[id.into()],
            )?
            .iter()
            .map(|r| r.text(0))
            .collect()
    }

    /// Whether session `id` exists.
    pub fn session_exists(&self, id: &str) -> Result<bool, ApiError> {
        Ok(self
            .db
            .query_opt("SELECT 1 FROM sessions WHERE session_id = ?1", &[id.into()])?
            .is_some())
    }

    /// Records a new model (created now; `m.created` is ignored).
    pub fn create_model(&self, m: &ModelRow) -> Result<(), ApiError> {
        self.db.execute(
            "INSERT INTO models (model_id, session_id, base_model, lora_rank, lora_seed, created)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            &[
                (&m.model_id).into(),
                (&m.session_id).into(),
                (&m.base_model).into(),
                m.lora_rank.into(),
                (m.lora_seed as i64).into(),
                now().into(),
            ],
        )?;
        Ok(())
    }

    /// Model `id`, or a 404 naming it.
    pub fn model(&self, id: &str) -> Result<ModelRow, ApiError> {
        let row = self
            .db
            .query_opt(
                &format!("SELECT {MODEL_COLUMNS} FROM models WHERE model_id = ?1"),
                &[id.into()],
            )?
            .ok_or_else(|| ApiError::not_found(format!("model_id `{id}`: no such model")))?;
        model_row(&row)
    }

    /// Every model, oldest first.
    pub fn models(&self) -> Result<Vec<ModelRow>, ApiError> {
        self.db
            .query(
                &format!("SELECT {MODEL_COLUMNS} FROM models ORDER BY created, model_id"),
                &[],
            )?
            .iter()
            .map(model_row)
            .collect()
    }

    /// A new pending future of `kind` for `model_id`: its request id.
    pub fn create_future(&self, kind: &str, model_id: Option<&str>) -> Result<i64, ApiError> {
        self.db
            .query_opt(
                "INSERT INTO futures (model_id, kind, status, created) VALUES (?1, ?2, 'pending', ?3)
                 RETURNING request_id",
                &[model_id.into(), kind.into(), now().into()],
            )?
            .ok_or_else(|| ApiError::internal("state store: no request id returned"))?
            .int(0)
    }

    /// Stores how future `id` ended.
    pub fn finish_future(&self, id: i64, state: &FutureState) -> Result<(), ApiError> {
        match state {
            FutureState::Pending => {}
            FutureState::Completed { content_type, body } => {
                self.db.execute(
                    "UPDATE futures SET status = 'completed', content_type = ?2, result = ?3,
                        finished = ?4 WHERE request_id = ?1",
                    &[
                        id.into(),
                        content_type.into(),
                        body.as_slice().into(),
                        now().into(),
                    ],
                )?;
            }
            FutureState::Failed { error, category } => {
                self.db.execute(
                    "UPDATE futures SET status = 'failed', error = ?2, category = ?3, finished = ?4
                     WHERE request_id = ?1",
                    &[id.into(), error.into(), category.into(), now().into()],
                )?;
            }
        }
        Ok(())
    }

    /// Future `id`'s state, or `None` when there is no such future.
    pub fn future(&self, id: i64) -> Result<Option<FutureState>, ApiError> {
        let Some(row) = self.db.query_opt(
            "SELECT status, content_type, result, error, category FROM futures WHERE request_id = ?1",
            &[id.into()],
        )?
        else {
            return Ok(None);
        };
        Ok(Some(match row.text(0)?.as_str() {
            "completed" => FutureState::Completed {
                content_type: row
                    .opt_text(1)?
                    .unwrap_or_else(|| "application/json".into()),
                body: row.opt_blob(2)?.unwrap_or_default(),
            },
            "failed" => FutureState::Failed {
                error: row.opt_text(3)?.unwrap_or_else(|| "unknown error".into()),
                category: row.opt_text(4)?.unwrap_or_else(|| "unknown".into()),
            },
            _ => FutureState::Pending,
        }))
    }

    /// Records a pending checkpoint; a 400 when it already exists (the client retries 409s).
    pub fn create_checkpoint(
        &self,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
        ttl_seconds: Option<f64>,
    ) -> Result<(), ApiError> {
        let t = now();
        let done = self.db.execute(
            "INSERT INTO checkpoints (model_id, checkpoint_id, kind, status, created, expires)
             VALUES (?1, ?2, ?3, 'pending', ?4, ?5) ON CONFLICT DO NOTHING",
            &[
                model_id.into(),
                checkpoint_id.into(),
                kind.into(),
                t.into(),
                ttl_seconds.map(|ttl| t + ttl).into(),
            ],
        )?;
        if done == 0 {
            return Err(ApiError::bad_request(format!(
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
        self.db.execute(
            "UPDATE checkpoints SET status = ?4 WHERE model_id = ?1 AND checkpoint_id = ?2 AND kind = ?3",
            &[model_id.into(), checkpoint_id.into(), kind.into(), status.into()],
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
        self.db
            .query_opt(
                &format!(
                    "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints
                     WHERE model_id = ?1 AND checkpoint_id = ?2 AND kind = ?3"
                ),
                &[model_id.into(), checkpoint_id.into(), kind.into()],
            )?
            .as_ref()
            .map(checkpoint_row)
            .transpose()
    }

    /// Every checkpoint of `model_id`, oldest first.
    pub fn checkpoints(&self, model_id: &str) -> Result<Vec<CheckpointRow>, ApiError> {
        self.db
            .query(
                &format!(
                    "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints
                     WHERE model_id = ?1 ORDER BY created, checkpoint_id"
                ),
                &[model_id.into()],
            )?
            .iter()
            .map(checkpoint_row)
            .collect()
    }

    /// Sets when a checkpoint expires (`None`: never); false when there is
    /// no such checkpoint.
    pub fn set_checkpoint_ttl(
        &self,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
        ttl_seconds: Option<f64>,
    ) -> Result<bool, ApiError> {
        let n = self.db.execute(
            "UPDATE checkpoints SET expires = ?4 WHERE model_id = ?1 AND checkpoint_id = ?2 AND kind = ?3",
            &[
                model_id.into(),
                checkpoint_id.into(),
                kind.into(),
                ttl_seconds.map(|ttl| now() + ttl).into(),
            ],
        )?;
        Ok(n == 1)
    }

    /// Publishes or unpublishes a checkpoint; false when there is none.
    pub fn set_checkpoint_public(
        &self,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
        public: bool,
    ) -> Result<bool, ApiError> {
        let n = self.db.execute(
            "UPDATE checkpoints SET public = ?4 WHERE model_id = ?1 AND checkpoint_id = ?2 AND kind = ?3",
            &[
                model_id.into(),
                checkpoint_id.into(),
                kind.into(),
                i64::from(public).into(),
            ],
        )?;
        Ok(n == 1)
    }

    /// Forgets a checkpoint and its download links; false when there was none.
    pub fn delete_checkpoint(
        &self,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
    ) -> Result<bool, ApiError> {
        let key = [model_id.into(), checkpoint_id.into(), kind.into()];
        self.db.execute(
            "DELETE FROM downloads WHERE model_id = ?1 AND checkpoint_id = ?2 AND kind = ?3",
            &key,
        )?;
        let n = self.db.execute(
            "DELETE FROM checkpoints WHERE model_id = ?1 AND checkpoint_id = ?2 AND kind = ?3",
            &key,
        )?;
        Ok(n == 1)
    }

    /// Every checkpoint (all models), oldest first, and their count.
    pub fn all_checkpoints(
        &self,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<CheckpointRow>, usize), ApiError> {
        let total = self
            .db
            .query_opt(
                "SELECT COUNT(*) FROM checkpoints WHERE status = 'completed'",
                &[],
            )?
            .map_or(Ok(0), |r| r.int(0))?;
        let rows = self
            .db
            .query(
                &format!(
                    "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints WHERE status = 'completed'
                     ORDER BY created, model_id, checkpoint_id LIMIT ?1 OFFSET ?2"
                ),
                &[(limit as i64).into(), (offset as i64).into()],
            )?
            .iter()
            .map(checkpoint_row)
            .collect::<Result<_, _>>()?;
        Ok((rows, total as usize))
    }

    /// Checkpoints whose time is up (`expires` before now).
    pub fn expired_checkpoints(&self) -> Result<Vec<CheckpointRow>, ApiError> {
        self.db
            .query(
                &format!(
                    "SELECT {CHECKPOINT_COLUMNS} FROM checkpoints
                     WHERE expires IS NOT NULL AND expires < ?1 AND status <> 'pending'"
                ),
                &[now().into()],
            )?
            .iter()
            .map(checkpoint_row)
            .collect()
    }

    /// Records a download link `token` to a checkpoint, valid for `seconds`;
    /// returns when it expires.
    pub fn create_download(
        &self,
        token: &str,
        model_id: &str,
        checkpoint_id: &str,
        kind: &str,
        seconds: f64,
    ) -> Result<f64, ApiError> {
        let t = now();
        self.db
            .execute("DELETE FROM downloads WHERE expires < ?1", &[t.into()])?;
        self.db.execute(
            "INSERT INTO downloads (token, model_id, checkpoint_id, kind, expires)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                token.into(),
                model_id.into(),
                checkpoint_id.into(),
                kind.into(),
                (t + seconds).into(),
            ],
        )?;
        Ok(t + seconds)
    }

    /// The checkpoint `(model_id, checkpoint_id, kind)` a download link
    /// opens, if it exists and has not expired.
    pub fn download(&self, token: &str) -> Result<Option<(String, String, String)>, ApiError> {
        self.db
            .query_opt(
                "SELECT model_id, checkpoint_id, kind FROM downloads WHERE token = ?1 AND expires >= ?2",
                &[token.into(), now().into()],
            )?
            .map(|r| Ok((r.text(0)?, r.text(1)?, r.text(2)?)))
            .transpose()
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
        self.db.execute(
            "INSERT INTO sampling_sessions (sampling_session_id, session_id, seq_id, base_model, model_path)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                id.into(),
                session_id.into(),
                seq_id.into(),
                base_model.into(),
                model_path.into(),
            ],
        )?;
        Ok(())
    }

    /// A sampling session's `(base_model, model_path)`, or a 404.
    pub fn sampling_session(&self, id: &str) -> Result<(Option<String>, Option<String>), ApiError> {
        let row = self
            .db
            .query_opt(
                "SELECT base_model, model_path FROM sampling_sessions WHERE sampling_session_id = ?1",
                &[id.into()],
            )?
            .ok_or_else(|| {
                ApiError::not_found(format!("sampling_session_id `{id}`: no such sampling session"))
            })?;
        Ok((row.opt_text(0)?, row.opt_text(1)?))
    }
}

/// The columns [`model_row`] reads, in its order.
const MODEL_COLUMNS: &str = "model_id, session_id, base_model, lora_rank, lora_seed, created";

fn model_row(r: &Row) -> Result<ModelRow, ApiError> {
    Ok(ModelRow {
        model_id: r.text(0)?,
        session_id: r.text(1)?,
        base_model: r.text(2)?,
        lora_rank: r.int(3)?,
        lora_seed: r.int(4)? as u64,
        created: r.real(5)?,
    })
}

/// The columns [`checkpoint_row`] reads, in its order.
const CHECKPOINT_COLUMNS: &str = "model_id, checkpoint_id, kind, status, created, expires, public";

fn checkpoint_row(r: &Row) -> Result<CheckpointRow, ApiError> {
    Ok(CheckpointRow {
        model_id: r.text(0)?,
        checkpoint_id: r.text(1)?,
        kind: r.text(2)?,
        status: r.text(3)?,
        created: r.real(4)?,
        expires: r.opt_real(5)?,
        public: r.int(6)? != 0,
    })
}
