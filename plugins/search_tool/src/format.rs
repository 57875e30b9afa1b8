//! Text the way skyrl-gym's Python produces it: `Doc i: ...` passages and
//! `json.dumps({"result": ...})` (ASCII-only, `\uXXXX` escapes).

use serde_json::Value;

/// `_passages2string`: `Doc {i}: {contents.strip()}\n` per passage.
pub fn passages_to_string(retrieval: &Value) -> Result<String, String> {
    let items = retrieval
        .as_array()
        .ok_or_else(|| format!("expected a list of passages, got {retrieval}"))?;
    let mut out = String::new();
    for (idx, item) in items.iter().enumerate() {
        let contents = item
            .get("document")
            .and_then(|d| d.get("contents"))
            .and_then(Value::as_str)
            .ok_or_else(|| "'document'".to_string())?;
        out.push_str(&format!("Doc {}: {}\n", idx + 1, py_strip(contents)));
    }
    Ok(out)
}

/// Python's `str.strip()`: also strips the separators \x1c-\x1f.
pub fn py_strip(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// `json.dumps({"result": text})` with Python's defaults.
pub fn py_json_result(text: &str) -> String {
    format!("{{\"result\": {}}}", py_json_string(text))
}

/// A JSON string literal as Python's `json.dumps` writes it (ensure_ascii).
pub fn py_json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7f => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_strings_escape_like_python() {
        assert_eq!(py_json_string("a\"b\\c\nd\te"), r#""a\"b\\c\nd\te""#);
        assert_eq!(py_json_string("café"), r#""caf\u00e9""#);
        assert_eq!(py_json_string("😀"), r#""\ud83d\ude00""#);
        assert_eq!(py_json_string("\u{1}\u{7f}"), "\"\\u0001\u{7f}\"");
        assert_eq!(py_json_result("x"), r#"{"result": "x"}"#);
    }

    #[test]
    fn passages_render_as_numbered_docs() {
        let retrieval = json!([
            {"document": {"id": "1", "contents": "  \"Paris\"\nCapital. "}, "score": 2.0},
            {"document": {"id": "2", "contents": "Second"}, "score": 1.0}
        ]);
        assert_eq!(
            passages_to_string(&retrieval).unwrap(),
            "Doc 1: \"Paris\"\nCapital.\nDoc 2: Second\n"
        );
        assert!(passages_to_string(&json!([{"id": "1"}])).is_err());
    }
}
