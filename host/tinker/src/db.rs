//! One small SQL interface over the service's two databases: SQLite
//! (rusqlite, the default, a file in WAL mode) and Postgres (the `postgres`
//! crate, driven from a thread of its own so that its blocking client never
//! runs inside the HTTP server's async runtime). The store writes each
//! statement once, with SQLite's `?N` placeholders; Postgres gets them as
//! `$N`. Values cross as [`Value`]s and come back as [`Row`]s.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Mutex;

use crate::error::ApiError;

/// Where the service's state lives, from `--db`.
#[derive(Debug, Clone, PartialEq)]
pub enum DbUrl {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A Postgres connection URL (`postgres://user:pass@host:port/db`).
    Postgres(String),
}

impl DbUrl {
    /// Parses `--db`: `sqlite:///ABS`, `sqlite://REL`, a bare path, or
    /// `postgres://` / `postgresql://`; none means `DATA_DIR/tinker.sqlite`.
    pub fn parse(db: Option<&str>, data_dir: &Path) -> anyhow::Result<Self> {
        let Some(url) = db else {
            return Ok(Self::Sqlite(data_dir.join("tinker.sqlite")));
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url.to_string()));
        }
        if let Some(path) = url.strip_prefix("sqlite:///").filter(|p| !p.is_empty()) {
            return Ok(Self::Sqlite(PathBuf::from(format!("/{path}"))));
        }
        if let Some(path) = url.strip_prefix("sqlite://").filter(|p| !p.is_empty()) {
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if !url.contains("://") && !url.is_empty() {
            return Ok(Self::Sqlite(PathBuf::from(url)));
        }
        anyhow::bail!(
            "--db `{}`: expected sqlite:///PATH, a file path, or postgres://USER@HOST:PORT/DB",
            redact(url)
        )
    }

    /// The URL for logs and errors, without its password.
    pub fn display(&self) -> String {
        match self {
            Self::Sqlite(p) => format!("sqlite://{}", p.display()),
            Self::Postgres(u) => redact(u),
        }
    }
}

/// `scheme://user:password@host` with the password replaced by `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

/// A value bound to a statement or read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Blob(v.to_vec())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// One result row.
#[derive(Debug, Clone)]
pub struct Row(Vec<Value>);

impl Row {
    fn at(&self, i: usize) -> Result<&Value, ApiError> {
        self.0
            .get(i)
            .ok_or_else(|| ApiError::internal(format!("state store: no column {i}")))
    }

    fn mismatch(&self, i: usize, want: &str) -> ApiError {
        ApiError::internal(format!(
            "state store: column {i} is {:?}, expected {want}",
            self.0.get(i)
        ))
    }

    /// Column `i` as text, `None` when NULL.
    pub fn opt_text(&self, i: usize) -> Result<Option<String>, ApiError> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Text(s) => Ok(Some(s.clone())),
            _ => Err(self.mismatch(i, "text")),
        }
    }

    /// Column `i` as non-NULL text.
    pub fn text(&self, i: usize) -> Result<String, ApiError> {
        self.opt_text(i)?.ok_or_else(|| self.mismatch(i, "text"))
    }

    /// Column `i` as an integer.
    pub fn int(&self, i: usize) -> Result<i64, ApiError> {
        match self.at(i)? {
            Value::Int(v) => Ok(*v),
            _ => Err(self.mismatch(i, "an integer")),
        }
    }

    /// Column `i` as a float (integers widen), `None` when NULL.
    pub fn opt_real(&self, i: usize) -> Result<Option<f64>, ApiError> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Real(v) => Ok(Some(*v)),
            Value::Int(v) => Ok(Some(*v as f64)),
            _ => Err(self.mismatch(i, "a float")),
        }
    }

    /// Column `i` as a non-NULL float (integers widen).
    pub fn real(&self, i: usize) -> Result<f64, ApiError> {
        self.opt_real(i)?.ok_or_else(|| self.mismatch(i, "a float"))
    }

    /// Column `i` as bytes, `None` when NULL.
    pub fn opt_blob(&self, i: usize) -> Result<Option<Vec<u8>>, ApiError> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Blob(b) => Ok(Some(b.clone())),
            _ => Err(self.mismatch(i, "bytes")),
        }
    }
}

/// An open database.
pub enum Db {
    Sqlite(Mutex<rusqlite::Connection>),
    Postgres(Postgres),
}

impl Db {
    /// Opens (creating) the database `url` names and applies `schema`
    /// (written for SQLite; see [`postgres_schema`]).
    pub fn open(url: &DbUrl, schema: &str) -> Result<Self, ApiError> {
        match url {
            DbUrl::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).map_err(sqlite_error)?;
                Self::sqlite(conn, schema)
            }
            DbUrl::Postgres(u) => {
                let pg = Postgres::connect(u)?;
                pg.run(postgres_schema(schema), |c, sql| c.batch_execute(&sql))?;
                Ok(Db::Postgres(pg))
            }
        }
    }

    /// An in-memory SQLite database (tests).
    pub fn sqlite_in_memory(schema: &str) -> Result<Self, ApiError> {
        Self::sqlite(
            rusqlite::Connection::open_in_memory().map_err(sqlite_error)?,
            schema,
        )
    }

    fn sqlite(conn: rusqlite::Connection, schema: &str) -> Result<Self, ApiError> {
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sqlite_error)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sqlite_error)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(sqlite_error)?;
        conn.execute_batch(schema).map_err(sqlite_error)?;
        Ok(Db::Sqlite(Mutex::new(conn)))
    }

    /// Runs a statement: the number of rows it changed.
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, ApiError> {
        match self {
            Db::Sqlite(conn) => {
                let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                let n = conn
                    .execute(sql, rusqlite::params_from_iter(params.iter()))
                    .map_err(sqlite_error)?;
                Ok(n as u64)
            }
            Db::Postgres(pg) => {
                let params = params.to_vec();
                pg.run(dollar_placeholders(sql), move |c, sql| {
                    c.execute(sql.as_str(), &pg_params(&params))
                })
            }
        }
    }

    /// Runs a query: every row.
    pub fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>, ApiError> {
        match self {
            Db::Sqlite(conn) => {
                let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                let mut st = conn.prepare(sql).map_err(sqlite_error)?;
                let columns = st.column_count();
                let rows = st
                    .query_map(rusqlite::params_from_iter(params.iter()), |r| {
                        (0..columns)
                            .map(|i| Ok(sqlite_value(r.get_ref(i)?)))
                            .collect::<rusqlite::Result<Vec<_>>>()
                            .map(Row)
                    })
                    .map_err(sqlite_error)?
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(sqlite_error)?;
                Ok(rows)
            }
            Db::Postgres(pg) => {
                let params = params.to_vec();
                let rows = pg.run(dollar_placeholders(sql), move |c, sql| {
                    c.query(sql.as_str(), &pg_params(&params))
                })?;
                rows.iter().map(pg_row).collect()
            }
        }
    }

    /// Adds `column` (SQLite's type `decl`) to `table` unless a database
    /// written by an older server lacks it.
    pub fn add_column(&self, table: &str, column: &str, decl: &str) -> Result<(), ApiError> {
        match self {
            Db::Sqlite(_) => {
                let present = self
                    .query(&format!("PRAGMA table_info({table})"), &[])?
                    .iter()
                    .any(|r| r.opt_text(1).ok().flatten().as_deref() == Some(column));
                if !present {
                    self.execute(
                        &format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"),
                        &[],
                    )?;
                }
                Ok(())
            }
            Db::Postgres(_) => {
                let decl = postgres_schema(decl);
                self.execute(
                    &format!("ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {decl}"),
                    &[],
                )
                .map(|_| ())
            }
        }
    }

    /// The first row of a query, if any.
    pub fn query_opt(&self, sql: &str, params: &[Value]) -> Result<Option<Row>, ApiError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }
}

fn sqlite_error(e: rusqlite::Error) -> ApiError {
    ApiError::internal(format!("state store (sqlite): {e}"))
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(v) => ValueRef::Integer(*v),
            Value::Real(v) => ValueRef::Real(*v),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

fn sqlite_value(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// The SQLite schema in Postgres's types: 64-bit integers, double floats,
/// `bytea`, and a `bigserial` for the autoincrement key.
pub fn postgres_schema(sqlite: &str) -> String {
    sqlite
        .replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
        .replace("INTEGER", "BIGINT")
        .replace("REAL", "DOUBLE PRECISION")
        .replace("BLOB", "BYTEA")
}

/// `?N` placeholders as Postgres's `$N`.
fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|n| n.is_ascii_digit()) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

type PgJob = Box<dyn FnOnce(&mut Option<postgres::Client>) + Send>;

/// A Postgres connection owned by a thread of its own; statements are sent
/// to it and their results awaited. A dropped connection (a restarted
/// database) is opened again before the next statement.
pub struct Postgres {
    jobs: Mutex<mpsc::Sender<PgJob>>,
    url: String,
}

impl Postgres {
    fn connect(url: &str) -> Result<Self, ApiError> {
        let first = open_pg(url)?;
        let (tx, rx) = mpsc::channel::<PgJob>();
        std::thread::Builder::new()
            .name("tinker-postgres".into())
            .spawn(move || {
                let mut client = Some(first);
                for job in rx {
                    job(&mut client);
                }
            })
            .map_err(|e| ApiError::internal(format!("cannot start the postgres thread: {e}")))?;
        Ok(Self {
            jobs: Mutex::new(tx),
            url: url.to_string(),
        })
    }

    /// Runs `f(client, sql)` on the connection's thread.
    fn run<T: Send + 'static>(
        &self,
        sql: String,
        f: impl FnOnce(&mut postgres::Client, String) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, ApiError> {
        let (tx, rx) = mpsc::channel();
        let url = self.url.clone();
        let job: PgJob = Box::new(move |client: &mut Option<postgres::Client>| {
            if client.as_ref().is_none_or(|c| c.is_closed()) {
                *client = None;
                match open_pg(&url) {
                    Ok(c) => *client = Some(c),
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
            let c = client.as_mut().expect("connected above");
            let _ = tx.send(f(c, sql).map_err(|e| pg_error(&e)));
        });
        self.jobs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(job)
            .map_err(|_| ApiError::internal("state store: the postgres thread has stopped"))?;
        rx.recv()
            .map_err(|_| ApiError::internal("state store: the postgres thread has stopped"))?
    }
}

fn open_pg(url: &str) -> Result<postgres::Client, ApiError> {
    postgres::Client::connect(url, postgres::NoTls).map_err(|e| {
        ApiError::internal(format!(
            "state store: cannot connect to {}: {}",
            redact(url),
            pg_error(&e).detail
        ))
    })
}

fn pg_error(e: &postgres::Error) -> ApiError {
    // The database's own message (e.g. a constraint or a missing role)
    // is more useful than the client's summary.
    let detail = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    };
    ApiError::internal(format!("state store (postgres): {detail}"))
}

fn pg_params(params: &[Value]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    params
        .iter()
        .map(|p| p as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

impl postgres::types::ToSql for Value {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::{IsNull, Type};
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) if *ty == Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
            Value::Int(v) if *ty == Type::FLOAT8 => (*v as f64).to_sql(ty, out),
            Value::Int(v) => v.to_sql(ty, out),
            Value::Real(v) => v.to_sql(ty, out),
            Value::Text(s) => s.to_sql(ty, out),
            Value::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

fn pg_row(row: &postgres::Row) -> Result<Row, ApiError> {
    use postgres::types::Type;
    let get = |i: usize| -> Result<Value, postgres::Error> {
        let ty = row.columns()[i].type_();
        Ok(if *ty == Type::INT8 {
            row.try_get::<_, Option<i64>>(i)?.into()
        } else if *ty == Type::INT4 {
            row.try_get::<_, Option<i32>>(i)?.map(i64::from).into()
        } else if *ty == Type::FLOAT8 {
            row.try_get::<_, Option<f64>>(i)?.into()
        } else if *ty == Type::BYTEA {
            row.try_get::<_, Option<Vec<u8>>>(i)?
                .map_or(Value::Null, Value::Blob)
        } else {
            row.try_get::<_, Option<String>>(i)?.into()
        })
    };
    (0..row.len())
        .map(|i| get(i).map_err(|e| pg_error(&e)))
        .collect::<Result<Vec<_>, _>>()
        .map(Row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_urls_name_sqlite_files_or_postgres_and_refuse_others() {
        let data = Path::new("/data");
        let sqlite = |s: &str| DbUrl::Sqlite(PathBuf::from(s));
        assert_eq!(
            DbUrl::parse(None, data).unwrap(),
            DbUrl::Sqlite(data.join("tinker.sqlite"))
        );
        assert_eq!(
            DbUrl::parse(Some("sqlite:///var/t.db"), data).unwrap(),
            sqlite("/var/t.db")
        );
        assert_eq!(
            DbUrl::parse(Some("sqlite://rel.db"), data).unwrap(),
            sqlite("rel.db")
        );
        assert_eq!(
            DbUrl::parse(Some("plain.db"), data).unwrap(),
            sqlite("plain.db")
        );
        let pg = DbUrl::parse(Some("postgresql://u:secret@h:5432/db"), data).unwrap();
        assert_eq!(
            pg,
            DbUrl::Postgres("postgresql://u:secret@h:5432/db".into())
        );
        assert_eq!(pg.display(), "postgresql://u:***@h:5432/db");
        let e = DbUrl::parse(Some("mysql://u:secret@h/db"), data)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--db") && e.contains("mysql://u:***@h/db"),
            "{e}"
        );
        assert!(!e.contains("secret"), "{e}");
    }

    #[test]
    fn placeholders_and_schema_translate_to_postgres() {
        assert_eq!(
            dollar_placeholders("UPDATE t SET a = ?2 WHERE b = ?1 AND c = ?10"),
            "UPDATE t SET a = $2 WHERE b = $1 AND c = $10"
        );
        assert_eq!(
            postgres_schema("id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER, x REAL, b BLOB"),
            "id BIGSERIAL PRIMARY KEY, n BIGINT, x DOUBLE PRECISION, b BYTEA"
        );
    }

    #[test]
    fn sqlite_round_trips_every_value_kind() {
        let db =
            Db::sqlite_in_memory("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB);").unwrap();
        let n = db
            .execute(
                "INSERT INTO t VALUES (?1, ?2, ?3, ?4)",
                &[
                    7i64.into(),
                    0.5f64.into(),
                    "x".into(),
                    Value::Blob(vec![0, 255]),
                ],
            )
            .unwrap();
        assert_eq!(n, 1);
        db.execute(
            "INSERT INTO t VALUES (?1, ?2, ?3, ?4)",
            &[
                Value::Null,
                Value::Null,
                Option::<String>::None.into(),
                Value::Null,
            ],
        )
        .unwrap();
        let rows = db
            .query("SELECT i, r, s, b FROM t ORDER BY i", &[])
            .unwrap();
        assert_eq!(rows.len(), 2);
        let full = &rows[1];
        assert_eq!(full.int(0).unwrap(), 7);
        assert_eq!(full.real(1).unwrap(), 0.5);
        assert_eq!(full.text(2).unwrap(), "x");
        assert_eq!(full.opt_blob(3).unwrap(), Some(vec![0, 255]));
        assert_eq!(rows[0].opt_text(2).unwrap(), None);
        assert!(rows[0].text(2).is_err());
    }
}
