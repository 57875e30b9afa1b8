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

/// Marks the start of a `{% generation %}` block in the raw render (a Unicode
/// noncharacter: never in text a tokenizer is meant to see).
const GENERATION_START: char = '\u{FDD0}';
/// Marks the end of a `{% generation %}` block in the raw render.
const GENERATION_END: char = '\u{FDD1}';

/// Rewrites HF's `{% generation %}` / `{% endgeneration %}` block tags (the
/// assistant-mask markers of `return_assistant_tokens_mask`) into blocks that
/// print a marker character, keeping each tag's whitespace control
/// (`{%-`, `-%}`, and `trim_blocks`/`lstrip_blocks`, which act on block tags).
fn mark_generation_tags(template: &str) -> String {
    static TAG: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let tag = TAG.get_or_init(|| {
        regex::Regex::new(r"\{%([-+]?)\s*(end)?generation\s*([-+]?)%\}").expect("static regex")
    });
    tag.replace_all(template, |c: &regex::Captures<'_>| {
        let marker = match c.get(2) {
            Some(_) => GENERATION_END,
            None => GENERATION_START,
        };
        format!(
            "{{%{} if true %}}{{{{ '{marker}' }}}}{{% endif {}%}}",
            &c[1], &c[3]
        )
    })
    .into_owned()
}

/// A render with the `{% generation %}` blocks' character ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkedRender {
    /// The rendered text (markers removed).
    pub text: String,
    /// `[start, end)` character (not byte) ranges of the generation blocks.
    pub generation_spans: Vec<(usize, usize)>,
}

/// Removes the generation markers from a raw render, recording their spans.
fn split_markers(raw: &str) -> Result<MarkedRender, ModelError> {
    let mut text = String::with_capacity(raw.len());
    let mut spans = Vec::new();
    let mut open: Option<usize> = None;
    let mut chars = 0usize;
    for ch in raw.chars() {
        match ch {
            GENERATION_START if open.is_none() => open = Some(chars),
            GENERATION_END if open.is_some() => {
                spans.push((open.take().unwrap_or(chars), chars));
            }
            GENERATION_START | GENERATION_END => {
                return Err(ModelError::Tokenizer(
                    "chat template: {% generation %} blocks must not nest or end unopened".into(),
                ))
            }
            _ => {
                text.push(ch);
                chars += 1;
            }
        }
    }
    if open.is_some() {
        return Err(ModelError::Tokenizer(
            "chat template: a {% generation %} block is never closed".into(),
        ));
    }
    Ok(MarkedRender {
        text,
        generation_spans: spans,
    })
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
        env.add_template_owned(TEMPLATE_NAME, mark_generation_tags(source))
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
        Ok(self
            .render_marked(messages, add_generation_prompt, extra)?
            .text)
    }

    /// [`ChatTemplate::render`] plus the character spans of the template's
    /// `{% generation %}` blocks (what transformers' `return_assistant_tokens_mask`
    /// is computed from; none when the template has no such blocks).
    pub fn render_marked<M: Serialize>(
        &self,
        messages: &[M],
        add_generation_prompt: bool,
        extra: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<MarkedRender, ModelError> {
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
        let raw = template
            .render(Value::from_serialize(&ctx))
            .map_err(|e| ModelError::Tokenizer(format!("rendering chat template: {e:#}")))?;
        split_markers(&raw)
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
    fn generation_blocks_give_char_spans_and_keep_whitespace_control() {
        // trim_blocks drops the newline after a block tag, generation tags included
        let t = ChatTemplate::new(
            "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}\n{{ m.content }}é{%- endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}",
            None,
            None,
            None,
            None,
        )
        .unwrap();
        let msgs = [
            ChatMessage::new("user", "hi"),
            ChatMessage::new("assistant", "ok"),
            ChatMessage::new("user", "x"),
            ChatMessage::new("assistant", "yes "),
        ];
        let out = t.render_marked(&msgs, false, None).unwrap();
        assert_eq!(out.text, "<user>hi<assistant>oké<user>x<assistant>yes é");
        let spans: Vec<String> = out
            .generation_spans
            .iter()
            .map(|&(a, b)| out.text.chars().skip(a).take(b - a).collect())
            .collect();
        assert_eq!(spans, ["oké", "yes é"]);
        let bad = ChatTemplate::new("{% generation %}x", None, None, None, None).unwrap();
        assert!(bad.render_marked(&msgs, false, None).is_err());
    }

    #[test]
    fn bad_templates_are_reported() {
        let err = ChatTemplate::new("{% for %}", None, None, None, None).unwrap_err();
        assert!(err.to_string().contains("does not compile"), "{err}");
    }
}
