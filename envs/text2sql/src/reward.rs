//! The final reward: format checks, then execution match with the gold SQL.

use std::collections::HashSet;
use std::time::Duration;

use rusqlite::types::Value;
use rusqlite::Connection;

use crate::format;
use crate::sql::{self, Overflow};

/// Reward of a history that fails the format checks.
pub const FORMAT_PENALTY: f64 = -1.0;

/// One value as Python compares it: integers and reals that are numerically
/// equal are one key (`1 == 1.0` in Python, so `{(1,)} == {(1.0,)}`); other
/// reals by their bits (`-0.0` is the integer 0); text and blobs never equal
/// numbers or each other.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// `NULL` (Python `None`).
    Null,
    /// An integer, or a real with an integral value in `i64` range.
    Int(i64),
    /// Any other real, by its bits.
    Real(u64),
    /// Text.
    Text(String),
    /// A blob.
    Blob(Vec<u8>),
}

impl From<&Value> for Key {
    fn from(value: &Value) -> Self {
        match value {
            Value::Null => Key::Null,
            Value::Integer(i) => Key::Int(*i),
            // -2^63 <= f < 2^63 converts to i64 exactly when integral.
            Value::Real(f)
                if f.fract() == 0.0
                    && *f >= -9.223_372_036_854_776e18
                    && *f < 9.223_372_036_854_776e18 =>
            {
                Key::Int(*f as i64)
            }
            Value::Real(f) => Key::Real(f.to_bits()),
            Value::Text(s) => Key::Text(s.clone()),
            Value::Blob(b) => Key::Blob(b.clone()),
        }
    }
}

/// A result as skyrl-gym compares results: the set of its rows
/// (`frozenset(cursor.fetchall())`), so order and duplicates do not matter.
pub fn row_set(rows: &[Vec<Value>]) -> HashSet<Vec<Key>> {
    rows.iter()
        .map(|row| row.iter().map(Key::from).collect())
        .collect()
}

/// How a finished episode scored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    /// The reward: -1.0 bad format, 1.0 same result as the gold SQL, else 0.0.
    pub reward: f64,
    /// Whether the history passed [`format::solution_sql`].
    pub format_ok: bool,
}

/// Scores a finished episode's `history` (all actions and observations
/// concatenated): [`FORMAT_PENALTY`] unless it is well formatted; 1.0 when
/// the solution SQL and `gold_sql` both run within `timeout` and return the
/// same [`row_set`] (two empty results included, as in skyrl-gym); 0.0 otherwise (including when either fails,
/// times out, or returns more than [`sql::REWARD_ROW_LIMIT`] rows).
pub fn score(conn: &Connection, history: &str, gold_sql: &str, timeout: Duration) -> Score {
    let Some(predicted) = format::solution_sql(history) else {
        return Score {
            reward: FORMAT_PENALTY,
            format_ok: false,
        };
    };
    let run = |q: &str| {
        let mut set = HashSet::new();
        sql::for_each_row(
            conn,
            q,
            timeout,
            sql::REWARD_ROW_LIMIT,
            Overflow::Fail,
            |row| {
                set.insert(row.iter().map(Key::from).collect::<Vec<_>>());
            },
        )
        .ok()
        .map(|_| set)
    };
    // Both run (as in skyrl-gym); two empty results are equal.
    let predicted = run(predicted);
    let gold = run(gold_sql);
    let same = matches!((predicted, gold), (Some(p), Some(g)) if p == g);
    Score {
        reward: if same { 1.0 } else { 0.0 },
        format_ok: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(rows: Vec<Vec<Value>>) -> HashSet<Vec<Key>> {
        row_set(&rows)
    }

    #[test]
    fn numbers_compare_like_python() {
        assert_eq!(
            set(vec![vec![Value::Integer(1)]]),
            set(vec![vec![Value::Real(1.0)]])
        );
        assert_eq!(
            set(vec![vec![Value::Integer(0)]]),
            set(vec![vec![Value::Real(-0.0)]])
        );
        assert_ne!(
            set(vec![vec![Value::Integer(1)]]),
            set(vec![vec![Value::Real(1.5)]])
        );
        assert_ne!(
            set(vec![vec![Value::Integer(1)]]),
            set(vec![vec![Value::Text("1".into())]])
        );
        // 2^63 is not an i64; it stays a real and equals only itself.
        assert_eq!(
            Key::from(&Value::Real(9.223_372_036_854_776e18)),
            Key::Real(9.223_372_036_854_776e18_f64.to_bits())
        );
    }

    #[test]
    fn order_and_duplicates_do_not_matter() {
        let a = vec![vec![Value::Integer(1)], vec![Value::Integer(2)]];
        let b = vec![
            vec![Value::Integer(2)],
            vec![Value::Integer(1)],
            vec![Value::Integer(2)],
        ];
        assert_eq!(row_set(&a), row_set(&b));
    }
}
