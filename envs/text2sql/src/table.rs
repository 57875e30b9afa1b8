//! Renders query results as text, after pandas'
//! `DataFrame.to_string(index=False)`, which skyrl-gym shows the model.
//!
//! The rendering, with `cells` the values' texts (see [`cell_text`]):
//!
//! - every column is as wide as its longest header or cell (in characters);
//! - the header line and every row line right-align each header or cell to
//!   its column's width and separate the columns by one space; the lines are
//!   joined by `\n`, with no trailing newline and no index column;
//! - a result without rows reads `Empty DataFrame\nColumns: [a, b]\nIndex: []`.
//!
//! Unlike pandas, every cell is formatted on its own (pandas gives a float
//! column one shared number of decimals), and the headers are the query's
//! column names (skyrl-gym builds its frame from bare tuples, so its headers
//! are `0 1 2 ...`).

use rusqlite::types::Value;

/// The text of one value:
///
/// - `NULL` → `None`;
/// - integers in decimal;
/// - reals as Python's `repr(float)` (`1.0`, `0.25`, `1e+16`, `1.5e-07`);
/// - text as it is, with tab, carriage return and newline written as `\t`,
///   `\r` and `\n` (as pandas does, so that a row stays on one line);
/// - blobs as Python's `repr(bytes)` (`b'\x00ab'`).
pub fn cell_text(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Integer(i) => i.to_string(),
        Value::Real(f) => python_float_repr(*f),
        Value::Text(s) => s
            .replace('\t', "\\t")
            .replace('\r', "\\r")
            .replace('\n', "\\n"),
        Value::Blob(b) => python_bytes_repr(b),
    }
}

/// Renders `rows` under the headers `columns` (see the module docs).
pub fn render(columns: &[String], rows: &[Vec<Value>]) -> String {
    if rows.is_empty() {
        return format!(
            "Empty DataFrame\nColumns: [{}]\nIndex: []",
            columns.join(", ")
        );
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(cell_text).collect())
        .collect();
    let mut widths: Vec<usize> = columns.iter().map(|c| c.chars().count()).collect();
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut lines = Vec::with_capacity(cells.len() + 1);
    lines.push(line(columns, &widths));
    lines.extend(cells.iter().map(|row| line(row, &widths)));
    lines.join("\n")
}

/// One line: every field right-aligned to its width, separated by a space.
fn line(fields: &[String], widths: &[usize]) -> String {
    fields
        .iter()
        .zip(widths)
        .map(|(field, &width)| format!("{field:>width$}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Python's `repr(float)`: the shortest text that reads back as `f`, in
/// positional notation when the decimal exponent is in `-4..16`, else in
/// scientific notation with a signed, at least two-digit exponent.
pub fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Rust's `{:e}` is the shortest round-trip form too: `-1.2345e3`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        if exp < 0 {
            let zeros = "0".repeat((-exp - 1) as usize);
            format!("{sign}0.{zeros}{digits}")
        } else {
            let point = exp as usize + 1;
            let (int, frac) = if digits.len() > point {
                (digits[..point].to_owned(), digits[point..].to_owned())
            } else {
                (
                    format!("{digits}{}", "0".repeat(point - digits.len())),
                    "0".to_owned(),
                )
            };
            format!("{sign}{int}.{frac}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() { "" } else { "." };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{first}{point}{rest}e{exp_sign}{:02}", exp.abs())
    }
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

    #[test]
    fn floats_read_like_python() {
        for (f, text) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (2.5, "2.5"),
            (-1234.5, "-1234.5"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.25e22, "1.25e+22"),
            (123456.789, "123456.789"),
            (1.0 / 3.0, "0.3333333333333333"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(python_float_repr(f), text, "{f:e}");
        }
    }

    #[test]
    fn bytes_read_like_python() {
        assert_eq!(python_bytes_repr(b"ab\x00\xff\n"), r"b'ab\x00\xff\n'");
        assert_eq!(python_bytes_repr(b"it's"), r#"b"it's""#);
        assert_eq!(python_bytes_repr(b"'\""), r#"b'\'"'"#);
        assert_eq!(python_bytes_repr(b""), "b''");
    }

    #[test]
    fn cells_escape_line_breaks_and_show_null_as_none() {
        assert_eq!(cell_text(&Value::Null), "None");
        assert_eq!(cell_text(&Value::Text("a\nb\tc".into())), r"a\nb\tc");
        assert_eq!(cell_text(&Value::Integer(-7)), "-7");
    }

    #[test]
    fn columns_are_right_aligned_to_their_widest_entry() {
        let columns = vec!["name".to_owned(), "n".to_owned()];
        let rows = vec![
            vec![Value::Text("Ann".into()), Value::Integer(120)],
            vec![Value::Text("Bartholomew".into()), Value::Null],
        ];
        assert_eq!(
            render(&columns, &rows),
            "       name    n\n        Ann  120\nBartholomew None"
        );
    }

    #[test]
    fn empty_results_read_like_an_empty_data_frame() {
        let columns = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(
            render(&columns, &[]),
            "Empty DataFrame\nColumns: [a, b]\nIndex: []"
        );
        assert_eq!(render(&[], &[]), "Empty DataFrame\nColumns: []\nIndex: []");
    }
}
