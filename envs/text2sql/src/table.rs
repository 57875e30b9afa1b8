//! Renders query results as skyrl-gym shows them to the model:
//! `pd.DataFrame(frozenset(rows)).to_string(index=False)` under pandas 3
//! (the rows' order and deduplication come from [`crate::pyset`]).
//!
//! pandas builds the frame from bare tuples, so the headers are the column
//! positions `0 1 2 ...` (left-aligned to the widest label), and it gives each
//! column a dtype from all of its values ([`column_kinds`]):
//!
//! - `int64` (only integers): `1`, `-5`;
//! - `float64` (numbers with a real or a NULL among them): every value with
//!   six decimals, trailing zeros trimmed equally down to one decimal, NULL
//!   as `NaN`; scientific (`1.500000e-07`) when a value is below 10⁻⁶, or
//!   when one is above 10⁶ and the widest text is over 12 characters;
//! - `str` (only text and NULLs): the text, NULL as `NaN`;
//! - `object` (anything else): NULL as `None`, integers in decimal, reals as
//!   ` 1.5` (six decimals trimmed, a space for the sign), blobs as Python's
//!   `repr(bytes)`.
//!
//! Text has tab, carriage return and newline written as `\t`, `\r`, `\n`.
//! Numeric columns' headers get a leading space. Every header and cell is
//! right-aligned to its column's width (in characters) and columns are
//! separated by one space. A result without rows reads
//! `Empty DataFrame\nColumns: []\nIndex: []`.

use rusqlite::types::Value;

/// Decimals pandas shows (`display.precision`).
const PRECISION: usize = 6;

/// A column's pandas dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `int64`: integers only.
    Int,
    /// `float64`: numbers, with a real or a NULL among them.
    Float,
    /// `str`: text, with or without NULLs.
    Str,
    /// `object`: everything else (blobs, text mixed with numbers, all NULL).
    Object,
}

/// The dtype pandas infers for each column of `rows` (all the same width).
pub fn column_kinds(rows: &[&[Value]]) -> Vec<Kind> {
    let width = rows.first().map_or(0, |row| row.len());
    (0..width)
        .map(|c| {
            let (mut ints, mut reals, mut nulls, mut texts, mut blobs) = (0, 0, 0, 0, 0);
            for row in rows {
                match &row[c] {
                    Value::Null => nulls += 1,
                    Value::Integer(_) => ints += 1,
                    Value::Real(_) => reals += 1,
                    Value::Text(_) => texts += 1,
                    Value::Blob(_) => blobs += 1,
                }
            }
            let numbers = ints + reals;
            if texts + blobs == 0 && numbers > 0 {
                if reals + nulls == 0 {
                    Kind::Int
                } else {
                    Kind::Float
                }
            } else if texts > 0 && numbers + blobs == 0 {
                Kind::Str
            } else {
                Kind::Object
            }
        })
        .collect()
}

/// Renders `rows` with the dtypes [`column_kinds`] gives them.
pub fn render(rows: &[&[Value]]) -> String {
    render_as(rows, &column_kinds(rows))
}

/// Renders `rows` with the given dtypes (`df.head(n)` keeps the whole
/// frame's dtypes but formats only its own rows).
pub fn render_as(rows: &[&[Value]], kinds: &[Kind]) -> String {
    if rows.is_empty() {
        return "Empty DataFrame\nColumns: []\nIndex: []".to_owned();
    }
    let label_width = kinds.len().saturating_sub(1).to_string().len();
    let columns: Vec<Vec<String>> = kinds
        .iter()
        .enumerate()
        .map(|(c, kind)| {
            let label = format!("{c:<label_width$}");
            let header = match kind {
                Kind::Int | Kind::Float => format!(" {label}"),
                Kind::Str | Kind::Object => label,
            };
            let values: Vec<&Value> = rows.iter().map(|row| &row[c]).collect();
            let mut column = vec![header];
            column.extend(format_column(*kind, &values));
            let width = column.iter().map(|s| s.chars().count()).max().unwrap_or(0);
            column.into_iter().map(|s| format!("{s:>width$}")).collect()
        })
        .collect();
    (0..=rows.len())
        .map(|line| {
            columns
                .iter()
                .map(|column| column[line].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The cells of one column, before alignment.
fn format_column(kind: Kind, values: &[&Value]) -> Vec<String> {
    match kind {
        Kind::Float => format_floats(values),
        _ => values.iter().map(|v| object_cell(kind, v)).collect(),
    }
}

/// A cell of an `int64`, `str` or `object` column.
fn object_cell(kind: Kind, value: &Value) -> String {
    match value {
        Value::Null if kind == Kind::Str => "NaN".to_owned(),
        Value::Null => "None".to_owned(),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => trim_single_float(&format!(
            "{}{}",
            if f.is_sign_negative() { "" } else { " " },
            fixed(*f)
        )),
        Value::Text(s) => escape(s),
        Value::Blob(b) => python_bytes_repr(b),
    }
}

/// Text with tab, carriage return and newline escaped, as pandas prints it.
fn escape(s: &str) -> String {
    s.replace('\t', "\\t")
        .replace('\r', "\\r")
        .replace('\n', "\\n")
}

/// pandas' `FloatArrayFormatter` for a `float64` column (see the module docs).
fn format_floats(values: &[&Value]) -> Vec<String> {
    let numbers: Vec<Option<f64>> = values
        .iter()
        .map(|v| match v {
            Value::Integer(i) => Some(*i as f64),
            Value::Real(f) => Some(*f),
            _ => None,
        })
        .collect();
    let fixed_cells = trim_floats(
        numbers
            .iter()
            .map(|n| n.map_or_else(|| "NaN".to_owned(), fixed))
            .collect(),
    );
    let too_long = fixed_cells.iter().map(|s| s.chars().count()).max() > Some(PRECISION + 6);
    let magnitudes = numbers.iter().flatten().map(|f| f.abs());
    let has_large = magnitudes.clone().any(|a| a > 1e6);
    let has_small = magnitudes
        .into_iter()
        .any(|a| a > 0.0 && a < 10f64.powi(-(PRECISION as i32)));
    if has_small || (too_long && has_large) {
        numbers
            .iter()
            .map(|n| n.map_or_else(|| "NaN".to_owned(), scientific))
            .collect()
    } else {
        fixed_cells
    }
}

/// Python's `f"{f:.6f}"`.
fn fixed(f: f64) -> String {
    format!("{f:.PRECISION$}")
}

/// Python's `f"{f:.6e}"`: a signed exponent of at least two digits.
fn scientific(f: f64) -> String {
    if !f.is_finite() {
        return fixed(f);
    }
    let text = format!("{f:.PRECISION$e}");
    let (mantissa, exponent) = text.split_once('e').expect("`{:e}` has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` exponent is an integer");
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// Whether `s` is a plain decimal number (`^\s*[+-]?[0-9]+\.[0-9]*$`).
fn is_decimal(s: &str) -> bool {
    let s = s.trim_start();
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let Some((int, frac)) = s.split_once('.') else {
        return false;
    };
    !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit())
}

/// pandas' `_trim_zeros_float`: drops trailing zeros from every decimal
/// number for as long as all of them end in one, then gives any that end
/// in `.` a zero back.
fn trim_floats(mut cells: Vec<String>) -> Vec<String> {
    loop {
        let mut numbers = cells.iter().filter(|s| is_decimal(s)).peekable();
        if numbers.peek().is_none() || !numbers.all(|s| s.ends_with('0')) {
            break;
        }
        for cell in cells.iter_mut().filter(|s| is_decimal(s)) {
            cell.pop();
        }
    }
    for cell in cells.iter_mut() {
        if is_decimal(cell) && cell.ends_with('.') {
            cell.push('0');
        }
    }
    cells
}

/// pandas' `_trim_zeros_single_float`.
fn trim_single_float(s: &str) -> String {
    let mut out = s.trim_end_matches('0').to_owned();
    if out.ends_with('.') {
        out.push('0');
    }
    out
}

/// Python's `repr(bytes)`: `b'...'` (or `b"..."` when the bytes hold `'`
/// but no `"`), printable ASCII as is, `\t \n \r \\` escaped, the rest `\xhh`.
pub fn python_bytes_repr(bytes: &[u8]) -> String {
    let quote = if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut out = String::with_capacity(bytes.len() + 3);
    out.push('b');
    out.push(quote as char);
    for &b in bytes {
        match b {
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\\' => out.push_str("\\\\"),
            _ if b == quote => {
                out.push('\\');
                out.push(b as char);
            }
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out.push(quote as char);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: Vec<Vec<Value>>) -> String {
        let refs: Vec<&[Value]> = rows.iter().map(Vec::as_slice).collect();
        render(&refs)
    }

    fn real(f: f64) -> Value {
        Value::Real(f)
    }

    // Expected texts printed by pandas 3.1.1 for the same tuples.
    #[test]
    fn integer_columns_get_a_spaced_header() {
        let rows = vec![
            vec![Value::Integer(1), Value::Integer(2)],
            vec![Value::Integer(30), Value::Integer(4)],
        ];
        assert_eq!(table(rows), " 0  1\n 1  2\n30  4");
    }

    #[test]
    fn float_columns_share_their_decimals() {
        assert_eq!(
            table(vec![vec![real(-0.0)], vec![real(1.5)], vec![real(2.25)]]),
            "    0\n-0.00\n 1.50\n 2.25"
        );
        assert_eq!(
            table(vec![vec![Value::Integer(1)], vec![Value::Null]]),
            "  0\n1.0\nNaN"
        );
        assert_eq!(
            table(vec![vec![real(2.0)], vec![real(1.5e7)]]),
            "         0\n       2.0\n15000000.0"
        );
        assert_eq!(
            table(vec![vec![real(1.5e-7)], vec![real(2.0)]]),
            "           0\n1.500000e-07\n2.000000e+00"
        );
        assert_eq!(
            table(vec![vec![real(1.0)], vec![real(123456789.123)]]),
            "           0\n1.000000e+00\n1.234568e+08"
        );
        assert_eq!(
            table(vec![vec![real(0.0078125)], vec![real(2.5e-6)]]),
            "       0\n0.007812\n0.000003"
        );
        assert_eq!(
            table(vec![vec![real(1.0)], vec![real(f64::INFINITY)]]),
            "  0\n1.0\ninf"
        );
    }

    #[test]
    fn text_columns_show_null_as_nan_and_escape_line_breaks() {
        assert_eq!(
            table(vec![vec![Value::Null], vec![Value::Text("a".into())]]),
            "  0\nNaN\n  a"
        );
        assert_eq!(
            table(vec![
                vec![Value::Text("x".into())],
                vec![Value::Text("a\tb\nc".into())]
            ]),
            "      0\n      x\na\\tb\\nc"
        );
    }

    #[test]
    fn object_columns_format_each_value() {
        assert_eq!(
            table(vec![vec![Value::Text("a".into())], vec![real(1.5)]]),
            "   0\n   a\n 1.5"
        );
        assert_eq!(
            table(vec![vec![Value::Text("a".into())], vec![real(-2.0)]]),
            "   0\n   a\n-2.0"
        );
        assert_eq!(
            table(vec![
                vec![Value::Null],
                vec![real(1.5)],
                vec![Value::Blob(vec![])]
            ]),
            "   0\nNone\n 1.5\n b''"
        );
        assert_eq!(
            table(vec![
                vec![Value::Integer(1)],
                vec![Value::Blob(b"x".to_vec())]
            ]),
            "   0\n   1\nb'x'"
        );
        assert_eq!(table(vec![vec![Value::Null]]), "   0\nNone");
    }

    #[test]
    fn labels_are_left_aligned_to_the_widest() {
        let row: Vec<Value> = (0..12).map(|_| Value::Integer(1)).collect();
        assert_eq!(
            table(vec![row]),
            " 0   1   2   3   4   5   6   7   8   9   10  11\n  1   1   1   1   1   1   1   1   1   1   1   1"
        );
    }

    #[test]
    fn empty_results_read_like_an_empty_data_frame() {
        assert_eq!(table(vec![]), "Empty DataFrame\nColumns: []\nIndex: []");
    }

    #[test]
    fn bytes_read_like_python() {
        assert_eq!(python_bytes_repr(b"ab\x00\xff\n"), r"b'ab\x00\xff\n'");
        assert_eq!(python_bytes_repr(b"it's"), r#"b"it's""#);
        assert_eq!(python_bytes_repr(b"'\""), r#"b'\'"'"#);
        assert_eq!(python_bytes_repr(b""), "b''");
    }
}
