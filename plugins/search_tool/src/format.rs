//! Text the way skyrl-gym's Python produces it: `Doc i: ...` passages and
//! `json.dumps({"result": ...})` (ASCII-only, `\uXXXX` escapes).

use serde_json::Value;
use skyrl_sdk::pystr;

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
        out.push_str(&format!("Doc {}: {}\n", idx + 1, pystr::strip(contents)));
    }
    Ok(out)
}

/// `json.dumps({"result": text})` with Python's defaults.
pub fn py_json_result(text: &str) -> String {
    format!("{{\"result\": {}}}", pystr::json_string(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_strings_escape_like_python() {
        assert_eq!(pystr::json_string("a\"b\\c\nd\te"), r#""a\"b\\c\nd\te""#);
        assert_eq!(pystr::json_string("café"), r#""caf\u00e9""#);
        assert_eq!(pystr::json_string("😀"), r#""\ud83d\ude00""#);
        assert_eq!(pystr::json_string("\u{1}\u{7f}"), "\"\\u0001\u{7f}\"");
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
