//! Read-only SQLite execution with a time limit, and the observation text
//! of an exploratory query.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use skyrl_sdk::{Error, Result};

use crate::{pyset, table};

/// Observations longer than this many characters show only the first
/// [`TRUNCATED_ROWS`] rows.
pub const MAX_OBSERVATION_CHARS: usize = 9000;
/// Rows shown when an observation is truncated.
pub const TRUNCATED_ROWS: usize = 50;
/// Rows an exploratory query reads at most ([`Overflow::Truncate`]): past
/// it the observation shows a set of the first rows only (bounds the
/// sandbox's memory; skyrl-gym reads every row).
pub const OBSERVATION_ROW_LIMIT: usize = 100_000;
/// Rows a query run for the reward reads at most; a larger result counts as
/// a failed query (bounds the sandbox's memory).
pub const REWARD_ROW_LIMIT: usize = 100_000;
/// Longest error text Python's `sqlite3` builds for undecodable text (a
/// 200-byte buffer, one byte kept back, one for the terminating NUL).
const DECODE_ERROR_BYTES: usize = 198;
/// The error of a statement that would write (SQLite's `SQLITE_READONLY`
/// message).
pub const READ_ONLY_MESSAGE: &str = "attempt to write a readonly database";
/// Connection settings applied at open and again before every query:
/// temporary tables and sorter spills stay in memory (the sandbox has no
/// writable directory for SQLite's temp files), and no statement may write.
const SESSION_PRAGMAS: &str = "PRAGMA temp_store = MEMORY; PRAGMA query_only = ON";
/// SQLite virtual machine instructions between two timeout checks.
const PROGRESS_OPS: i32 = 1000;

/// A query's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    /// The result's column names.
    pub columns: Vec<String>,
    /// The rows in the order SQLite returned them.
    pub rows: Vec<Vec<Value>>,
}

/// Why a query produced no rows.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlError {
    /// It ran longer than its time limit.
    Timeout,
    /// It returned more rows than allowed.
    TooManyRows,
    /// SQLite rejected it; the message as Python's `str(e)` would read.
    Sqlite(String),
}

impl SqlError {
    /// The error as Python's `str(e)` would read.
    pub fn message(&self) -> String {
        match self {
            SqlError::Timeout => "interrupted".to_owned(),
            SqlError::TooManyRows => format!("more than {REWARD_ROW_LIMIT} rows"),
            SqlError::Sqlite(message) => message.clone(),
        }
    }
}

/// Opens `path` read-only: as an `immutable=1` URI (SQLite then takes no
/// locks, which WASI lacks, and never writes), with `SQLITE_OPEN_READ_ONLY`,
/// and with `PRAGMA query_only=ON` (and `temp_store=MEMORY`), through the
/// [`vfs`](crate::vfs) that takes absolute paths as they are. Fails with
/// [`Error::InvalidConfig`] naming the path when the file is missing
/// (skyrl-gym's text) or is not a database. The file is looked at only
/// when opening fails, which saves a WASI `stat` per episode.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    let vfs = crate::vfs::name()
        .map(|name| format!("&vfs={}", name.to_string_lossy()))
        .unwrap_or_default();
    let uri = format!(
        "file:{}?immutable=1{vfs}",
        uri_path(&path.to_string_lossy())
    );
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let opened = Connection::open_with_flags(uri, flags).and_then(|conn| {
        conn.execute_batch(SESSION_PRAGMAS)?;
        // Reading the schema fails right away when the file is not a database.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
        Ok(conn)
    });
    opened.map_err(|e| match path.is_file() {
        false => Error::config(format!("Database file not found at: {}", path.display())),
        true => Error::config(format!("cannot open database {}: {e}", path.display())),
    })
}

/// What [`run`] does with rows past its row limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// Keep the first `row_limit` rows and stop reading.
    Truncate,
    /// Fail with [`SqlError::TooManyRows`].
    Fail,
}

/// Runs one SQL statement, reading at most `row_limit` rows, and gives up
/// with [`SqlError::Timeout`] once it has run for `timeout` (checked by a
/// progress handler every few SQLite instructions, so it also works under
/// WASI, which has clocks but no threads). `PRAGMA query_only` and
/// `temp_store` are set again first, in case an earlier statement changed
/// them, and a statement that is not read-only (`sqlite3_stmt_readonly`) is
/// refused unexecuted with [`READ_ONLY_MESSAGE`]. A text of only whitespace
/// and comments returns no columns and no rows, as in Python.
pub fn run(
    conn: &Connection,
    sql: &str,
    timeout: Duration,
    row_limit: usize,
    overflow: Overflow,
) -> std::result::Result<Rows, SqlError> {
    let mut rows = Vec::new();
    let columns = for_each_row(conn, sql, timeout, row_limit, overflow, |row| {
        rows.push(row)
    })?;
    Ok(Rows { columns, rows })
}

/// [`run`] that hands each row to `on_row` instead of keeping it, and
/// returns the column names.
pub fn for_each_row(
    conn: &Connection,
    sql: &str,
    timeout: Duration,
    row_limit: usize,
    overflow: Overflow,
    on_row: impl FnMut(Vec<Value>),
) -> std::result::Result<Vec<String>, SqlError> {
    conn.execute_batch(SESSION_PRAGMAS).map_err(sqlite_error)?;
    let start = Instant::now();
    conn.progress_handler(PROGRESS_OPS, Some(move || start.elapsed() >= timeout));
    let result = read_rows(conn, sql, row_limit, overflow, on_row);
    conn.progress_handler(0, None::<fn() -> bool>);
    result
}

/// Prepares `sql` and reads its rows (see [`run`]).
fn read_rows(
    conn: &Connection,
    sql: &str,
    row_limit: usize,
    overflow: Overflow,
    mut on_row: impl FnMut(Vec<Value>),
) -> std::result::Result<Vec<String>, SqlError> {
    let mut stmt = conn.prepare(sql).map_err(sqlite_error)?;
    // Only whitespace and comments: SQLite has no statement to run (only a
    // real statement has an SQL text), and Python returns no rows.
    if stmt.expanded_sql().is_none() {
        return Ok(Vec::new());
    }
    // Python's `cursor.execute(sql)` binds an empty parameter tuple.
    let placeholders = stmt.parameter_count();
    if placeholders > 0 {
        return Err(SqlError::Sqlite(format!(
            "Incorrect number of bindings supplied. The current statement uses {placeholders}, and there are 0 supplied."
        )));
    }
    // Refuse writes before they start: some (`VACUUM INTO`) would create a
    // file before the read-only connection stops them.
    if !stmt.readonly() {
        return Err(SqlError::Sqlite(READ_ONLY_MESSAGE.to_owned()));
    }
    let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let width = columns.len();
    let mut count = 0;
    let mut cursor = stmt.query([]).map_err(sqlite_error)?;
    while let Some(row) = cursor.next().map_err(sqlite_error)? {
        if count == row_limit {
            return match overflow {
                Overflow::Truncate => break,
                Overflow::Fail => Err(SqlError::TooManyRows),
            };
        }
        let values = (0..width)
            .map(|i| python_value(row.get_ref(i).map_err(sqlite_error)?, &columns[i]))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        on_row(values);
        count += 1;
    }
    Ok(columns)
}

/// A column value as Python's `sqlite3` returns it; text that is not UTF-8
/// fails the query with Python's message (its text decoded as ASCII with
/// U+FFFD for every other byte, cut at a NUL and at 198 bytes).
fn python_value(value: ValueRef<'_>, column: &str) -> std::result::Result<Value, SqlError> {
    match value {
        ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => Ok(Value::Text(text.to_owned())),
            Err(_) => {
                let text = bytes.split(|b| *b == 0).next().unwrap_or_default();
                let mut message =
                    format!("Could not decode to UTF-8 column '{column}' with text '").into_bytes();
                message.extend_from_slice(text);
                message.push(b'\'');
                message.truncate(DECODE_ERROR_BYTES);
                Err(SqlError::Sqlite(
                    message
                        .iter()
                        .map(|&b| if b.is_ascii() { b as char } else { '\u{fffd}' })
                        .collect(),
                ))
            }
        },
        other => Ok(other.into()),
    }
}

/// The observation of an exploratory query (skyrl-gym's wording):
///
/// - the rows as `pd.DataFrame(frozenset(rows)).to_string(index=False)`
///   ([`pyset::frozenset_order`], [`table::render`]); when that is longer
///   than [`MAX_OBSERVATION_CHARS`], `Truncated to 50 lines since returned
///   response too long: ` and the same for the first [`TRUNCATED_ROWS`]
///   rows of the set (with the whole set's column dtypes);
/// - `SQL Timeout:\n{sql}` when it timed out;
/// - `Error executing SQL: {error}, db file: {db_file}` when SQLite rejected it.
pub fn observation(
    result: &std::result::Result<Rows, SqlError>,
    sql: &str,
    db_file: &Path,
) -> String {
    match result {
        Ok(rows) => {
            let distinct: Vec<&[Value]> = pyset::frozenset_order(&rows.rows)
                .into_iter()
                .map(|i| rows.rows[i].as_slice())
                .collect();
            let kinds = table::column_kinds(&distinct);
            let text = table::render_as(&distinct, &kinds);
            if text.chars().count() > MAX_OBSERVATION_CHARS {
                let head = &distinct[..distinct.len().min(TRUNCATED_ROWS)];
                format!(
                    "Truncated to 50 lines since returned response too long: {}",
                    table::render_as(head, &kinds)
                )
            } else {
                text
            }
        }
        Err(SqlError::Timeout) => format!("SQL Timeout:\n{sql}"),
        Err(error) => format!(
            "Error executing SQL: {}, db file: {}",
            error.message(),
            db_file.display()
        ),
    }
}

/// A rusqlite error as a [`SqlError`]: an interruption (by the progress
/// handler) is a timeout; anything else keeps SQLite's own message, as
/// Python's `sqlite3` words it (without rusqlite's "in {sql} at offset {n}").
fn sqlite_error(e: rusqlite::Error) -> SqlError {
    if e.sqlite_error_code() == Some(ErrorCode::OperationInterrupted) {
        return SqlError::Timeout;
    }
    SqlError::Sqlite(match e {
        rusqlite::Error::SqliteFailure(err, message) => message.unwrap_or_else(|| err.to_string()),
        rusqlite::Error::SqlInputError { msg, .. } => msg,
        rusqlite::Error::MultipleStatement => {
            "You can only execute one statement at a time.".to_owned()
        }
        other => other.to_string(),
    })
}

/// Escapes the characters that end or escape the path part of a SQLite
/// `file:` URI.
fn uri_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '%' => out.push_str("%25"),
            '?' => out.push_str("%3f"),
            '#' => out.push_str("%23"),
            _ => out.push(c),
        }
    }
    out
}
