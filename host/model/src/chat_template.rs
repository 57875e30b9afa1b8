//! Hugging Face chat templates rendered with minijinja, following the
//! conventions of `transformers.apply_chat_template`: `trim_blocks`,
//! `lstrip_blocks`, loop controls, Python string/dict methods, `raise_exception`,
//! `strftime_now`, and a `tojson` that behaves like Python's `json.dumps`.

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind};
use serde::Serialize;

use crate::error::ModelError;

/// One OpenAI-style chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Message text.
    pub content: String,
}

impl ChatMessage {
    /// Builds a message.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }
}

/// A compiled chat template plus the special tokens it may reference.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: Option<String>,
    eos_token: Option<String>,
    pad_token: Option<String>,
    unk_token: Option<String>,
}

const TEMPLATE_NAME: &str = "chat";

/// Python `json.dumps` separators: `", "` and `": "` (or `","` with an indent).
struct PyFormatter {
    indent: Option<Vec<u8>>,
    level: usize,
    has_value: bool,
}

impl PyFormatter {
    fn newline<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        if let Some(indent) = &self.indent {
            w.write_all(b"\n")?;
            for _ in 0..self.level {
                w.write_all(indent)?;
            }
        }
        Ok(())
    }
    fn separator(&self) -> &'static [u8] {
        if self.indent.is_some() {
            b","
        } else {
            b", "
        }
    }
}

impl serde_json::ser::Formatter for PyFormatter {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.newline(w)?;
        }
        w.write_all(b"]")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if !first {
            w.write_all(self.separator())?;
        }
        self.newline(w)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.newline(w)?;
        }
        w.write_all(b"}")
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if !first {
            w.write_all(self.separator())?;
        }
        self.newline(w)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// `json.dumps(value, ensure_ascii=False, indent=indent)`.
fn py_json(value: &Value, indent: Option<usize>) -> Result<String, Error> {
    let mut out = Vec::new();
    let formatter = PyFormatter {
        indent: indent.map(|n| vec![b' '; n]),
        level: 0,
        has_value: false,
    };
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    value
        .serialize(&mut ser)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    String::from_utf8(out).map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))
}

fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    // Accepted for compatibility; keys keep insertion order either way.
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<bool> = kwargs.get("sort_keys")?;
    let _: Option<Value> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    Ok(Value::from_safe_string(py_json(&value, indent)?))
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

fn strftime_now(format: String) -> Result<Value, Error> {
    // Dates are not reproducible; templates only use this for "Today is ..." lines.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    Ok(Value::from(format.replace("%s", &now.to_string())))
}

/// Removes the `{% generation %}` / `{% endgeneration %}` markers HF uses for
/// assistant masks (they only wrap text).
fn strip_generation_tags(template: &str) -> String {
    let mut out = template.to_string();
    for tag in ["generation", "endgeneration"] {
        for open in ["{%", "{%-"] {
            for close in ["%}", "-%}"] {
                for space in [" ", ""] {
                    out = out.replace(&format!("{open}{space}{tag}{space}{close}"), "");
                }
            }
        }
    }
    out
}

impl ChatTemplate {
    /// Compiles `source` (a Jinja chat template).
    pub fn new(
        source: &str,
        bos_token: Option<String>,
        eos_token: Option<String>,
        pad_token: Option<String>,
        unk_token: Option<String>,
    ) -> Result<Self, ModelError> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(TEMPLATE_NAME, strip_generation_tags(source))
            .map_err(|e| ModelError::Tokenizer(format!("chat template does not compile: {e}")))?;
        Ok(ChatTemplate {
            env,
            bos_token,
            eos_token,
            pad_token,
            unk_token,
        })
    }

    /// Renders `messages` (any serialisable list of `{role, content, ...}`), like
    /// `tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=...)`.
    /// `extra` adds template variables (e.g. `tools`, `enable_thinking`).
    pub fn render<M: Serialize>(
        &self,
        messages: &[M],
        add_generation_prompt: bool,
        extra: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<String, ModelError> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        // minijinja values keep struct field order (Python dict order); maps that
        // come in as serde_json::Value keep serde_json's (sorted) key order.
        let mut ctx: std::collections::BTreeMap<String, Value> = extra
            .map(|e| {
                e.iter()
                    .map(|(k, v)| (k.clone(), Value::from_serialize(v)))
                    .collect()
            })
            .unwrap_or_default();
        let token = |v: &Option<String>| Value::from(v.clone());
        ctx.insert("messages".into(), Value::from_serialize(messages));
        ctx.insert(
            "add_generation_prompt".into(),
            Value::from(add_generation_prompt),
        );
        ctx.insert("bos_token".into(), token(&self.bos_token));
        ctx.insert("eos_token".into(), token(&self.eos_token));
        ctx.insert("pad_token".into(), token(&self.pad_token));
        ctx.insert("unk_token".into(), token(&self.unk_token));
        template
            .render(Value::from_serialize(&ctx))
            .map_err(|e| ModelError::Tokenizer(format!("rendering chat template: {e:#}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        Value::from_serialize(serde_json::json!({
            "args": {"e": {}, "l": [], "n": [1, 2.5, null, true], "q": "SELECT \"x\" <b> é"},
            "name": "sql"
        }))
    }

    #[test]
    fn tojson_matches_python_json_dumps() {
        // Expected strings produced by Python's json.dumps(v, ensure_ascii=False[, indent=2]).
        assert_eq!(
            py_json(&sample(), None).unwrap(),
            r#"{"args": {"e": {}, "l": [], "n": [1, 2.5, null, true], "q": "SELECT \"x\" <b> é"}, "name": "sql"}"#
        );
        assert_eq!(
            py_json(&sample(), Some(2)).unwrap(),
            "{\n  \"args\": {\n    \"e\": {},\n    \"l\": [],\n    \"n\": [\n      1,\n      2.5,\n      null,\n      true\n    ],\n    \"q\": \"SELECT \\\"x\\\" <b> é\"\n  },\n  \"name\": \"sql\"\n}"
        );
    }

    #[test]
    fn struct_field_order_is_kept_and_generation_tags_dropped() {
        let t = ChatTemplate::new(
            "{% for m in messages %}{% generation %}{{ m | tojson }}{% endgeneration %}{% endfor %}{{ eos_token }}",
            None,
            Some("<eos>".into()),
            None,
            None,
        )
        .unwrap();
        let out = t
            .render(&[ChatMessage::new("user", "hi")], false, None)
            .unwrap();
        assert_eq!(out, r#"{"role": "user", "content": "hi"}<eos>"#);
    }

    #[test]
    fn bad_templates_are_reported() {
        let err = ChatTemplate::new("{% for %}", None, None, None, None).unwrap_err();
        assert!(err.to_string().contains("does not compile"), "{err}");
    }
}
