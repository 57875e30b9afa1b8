//! One data row to training tokens, as skyrl 0.3.0's `tokenize_chat_example`
//! (and `tokenize_sft_example` for Alpaca rows) does it with the model's chat
//! template: which tokens get loss depends on `train_on_what`.
//!
//! - `last_assistant_message`: the tokens of the whole conversation after
//!   those of the conversation without its last message plus the generation
//!   prompt (both truncated to `max_length`).
//! - `all_assistant_messages`: the messages before the first assistant one
//!   are templated together; every later message is templated alone after a
//!   fixed two-message base conversation (the "fixed base approach"). In an
//!   assistant message the generation prompt and what follows its last EOS
//!   get no loss; user and tool messages get none.
//!
//! Rows whose last message (after dropping trailing tool messages) is not an
//! assistant's, or with no loss token left after truncation, are skipped.

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use skyrl_model::Tokenizer;

use super::config::TrainOnWhat;

/// A tokenised conversation (skyrl 0.3.0's tokenised example).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SftExample {
    pub input_ids: Vec<i64>,
    /// The last `num_actions` tokens are the action window `loss_mask` covers.
    pub num_actions: usize,
    /// 1 where a token of the action window gets loss.
    pub loss_mask: Vec<u8>,
}

impl SftExample {
    /// Tokens that get loss.
    pub fn loss_tokens(&self) -> usize {
        self.loss_mask.iter().map(|&m| m as usize).sum()
    }
}

/// How rows are tokenised (the SFT config's keys).
#[derive(Debug, Clone, Copy)]
pub struct TokenizeOptions<'a> {
    pub max_length: Option<usize>,
    pub messages_key: &'a str,
    pub train_on_what: TrainOnWhat,
    pub tools_key: Option<&'a str>,
    pub system_key: Option<&'a str>,
}

/// Tokenises one row: a chat row (`messages_key`) or an Alpaca row
/// (`instruction` + `output`, trained on its output). `None`: skipped.
pub fn tokenize_row(
    row: &Map<String, Value>,
    tokenizer: &Tokenizer,
    o: &TokenizeOptions,
) -> Result<Option<SftExample>> {
    if row.contains_key(o.messages_key) {
        return tokenize_chat_example(row, tokenizer, o);
    }
    if row.contains_key("instruction") && row.contains_key("output") {
        return tokenize_alpaca(row, tokenizer, o.max_length);
    }
    let columns: Vec<&String> = row.keys().collect();
    bail!(
        "unrecognised row: expected a `{}` column (chat) or `instruction` + `output` \
         (Alpaca); columns: {columns:?}",
        o.messages_key
    )
}

/// 0.3.0's `tokenize_sft_example`: `instruction` (+ `\n\n` + `input`) as the
/// user message, `output` as the assistant's, trained on the last message.
fn tokenize_alpaca(
    row: &Map<String, Value>,
    tokenizer: &Tokenizer,
    max_length: Option<usize>,
) -> Result<Option<SftExample>> {
    let text = |k: &str| match row.get(k) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let (instruction, input) = (text("instruction"), text("input"));
    let user = match input.is_empty() {
        true => instruction,
        false => format!("{instruction}\n\n{input}"),
    };
    let mut example = Map::new();
    example.insert(
        "messages".into(),
        json!([
            {"role": "user", "content": user.trim()},
            {"role": "assistant", "content": text("output")},
        ]),
    );
    let o = TokenizeOptions {
        max_length,
        messages_key: "messages",
        train_on_what: TrainOnWhat::LastAssistantMessage,
        tools_key: None,
        system_key: None,
    };
    tokenize_chat_example(&example, tokenizer, &o)
}

/// 0.3.0's `tokenize_chat_example`.
pub fn tokenize_chat_example(
    example: &Map<String, Value>,
    tokenizer: &Tokenizer,
    o: &TokenizeOptions,
) -> Result<Option<SftExample>> {
    let raw = example
        .get(o.messages_key)
        .and_then(Value::as_array)
        .with_context(|| format!("`{}` must be a list of messages", o.messages_key))?;
    let mut messages: Vec<&Value> = raw.iter().collect();
    while messages.last().is_some_and(|m| role(m) == Some("tool")) {
        messages.pop();
    }
    if messages.last().is_none_or(|m| role(m) != Some("assistant")) {
        return Ok(None);
    }
    let mut messages = messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| normalize_message(m).with_context(|| format!("message {i}")))
        .collect::<Result<Vec<Value>>>()?;
    let system = o
        .system_key
        .and_then(|k| example.get(k))
        .filter(|v| truthy(v));
    if let Some(system) = system {
        if role(&messages[0]) != Some("system") {
            messages.insert(0, json!({"role": "system", "content": system}));
        }
    }
    let mut extra = Map::new();
    if let Some(tools) = o.tools_key.and_then(|k| example.get(k)) {
        if let Some(tools) = coerce_tools(tools).context("bad tool schemas")? {
            extra.insert("tools".into(), tools);
        }
    }
    if messages.iter().any(has_image) {
        bail!("image content is not supported (text models only)");
    }
    let chat = Chat {
        tokenizer,
        extra: (!extra.is_empty()).then_some(&extra),
    };
    match o.train_on_what {
        TrainOnWhat::LastAssistantMessage => chat.last_assistant(&messages, o.max_length),
        TrainOnWhat::AllAssistantMessages => chat.all_assistants(&messages, o.max_length),
    }
}

/// The chat template with one row's extra variables (`tools`).
struct Chat<'a> {
    tokenizer: &'a Tokenizer,
    extra: Option<&'a Map<String, Value>>,
}

impl Chat<'_> {
    /// `apply_chat_template(messages, tokenize=True)`: no special tokens added.
    fn encode(&self, messages: &[Value], add_generation_prompt: bool) -> Result<Vec<i64>> {
        Ok(self
            .tokenizer
            .encode_chat_with(messages, add_generation_prompt, self.extra)?)
    }

    /// 0.3.0's `_tokenize_chat_last_assistant` (truncation on the right).
    fn last_assistant(
        &self,
        messages: &[Value],
        max_length: Option<usize>,
    ) -> Result<Option<SftExample>> {
        let truncate = |mut ids: Vec<i64>| {
            if let Some(n) = max_length {
                ids.truncate(n);
            }
            ids
        };
        let prompt = truncate(self.encode(&messages[..messages.len() - 1], true)?);
        let full = truncate(self.encode(messages, false)?);
        if full.len() <= prompt.len() {
            return Ok(None);
        }
        let num_actions = full.len() - prompt.len();
        Ok(Some(SftExample {
            input_ids: full,
            num_actions,
            loss_mask: vec![1; num_actions],
        }))
    }

    /// 0.3.0's `_tokenize_chat_all_assistants`.
    fn all_assistants(
        &self,
        messages: &[Value],
        max_length: Option<usize>,
    ) -> Result<Option<SftExample>> {
        let first = messages
            .iter()
            .position(|m| role(m) == Some("assistant"))
            .ok_or_else(|| anyhow!("no assistant message"))?;
        if first == 0 {
            // 0.3.0 fails on these too (the chat template of no message).
            bail!(
                "the conversation starts with an assistant message: nothing comes before it to \
                 template, which all_assistant_messages needs"
            );
        }
        let mut input_ids = self.encode(&messages[..first], false)?;
        let initial = input_ids.len();
        let (later, mut loss_mask) = self.response_ids_and_loss_mask(&messages[first..])?;
        input_ids.extend(later);
        if let Some(n) = max_length {
            input_ids.truncate(n);
            loss_mask.truncate(n.saturating_sub(initial));
        }
        if !loss_mask.contains(&1) {
            return Ok(None);
        }
        Ok(Some(SftExample {
            input_ids,
            num_actions: loss_mask.len(),
            loss_mask,
        }))
    }

    /// 0.3.0's `get_response_ids_and_loss_mask_from_messages` (no logprobs).
    fn response_ids_and_loss_mask(&self, messages: &[Value]) -> Result<(Vec<i64>, Vec<u8>)> {
        let generation_prompt = self.generation_prompt_ids()?;
        let eos = self.tokenizer.eos_token_id();
        let (mut ids, mut mask) = (Vec::new(), Vec::new());
        for (i, m) in messages.iter().enumerate() {
            let cur = self.encode_subset(m)?;
            match role(m) {
                Some("user") | Some("tool") => mask.extend(std::iter::repeat_n(0u8, cur.len())),
                Some("assistant") => {
                    let header = prompt_boundary(&cur, &generation_prompt)
                        .with_context(|| format!("assistant message {i}"))?;
                    let end = match eos.and_then(|e| cur.iter().rposition(|&t| t == e)) {
                        Some(last_eos) => (last_eos + 1).max(header),
                        None => cur.len(),
                    };
                    mask.extend(std::iter::repeat_n(0u8, header));
                    mask.extend(std::iter::repeat_n(1u8, end - header));
                    mask.extend(std::iter::repeat_n(0u8, cur.len() - end));
                }
                other => bail!(
                    "message {i}: expected role user, assistant or tool after the first \
                     assistant message, got {other:?}"
                ),
            }
            ids.extend(cur);
        }
        Ok((ids, mask))
    }

    /// 0.3.0's `get_generation_prompt_ids`: what `add_generation_prompt` adds
    /// after an empty user message.
    fn generation_prompt_ids(&self) -> Result<Vec<i64>> {
        let user = [json!({"role": "user", "content": ""})];
        let plain = self.encode(&user, false)?;
        let with = self.encode(&user, true)?;
        Ok(with.get(plain.len()..).unwrap_or_default().to_vec())
    }

    /// 0.3.0's `encode_messages_subset` for one message: its tokens after a
    /// fixed system + user base conversation.
    fn encode_subset(&self, message: &Value) -> Result<Vec<i64>> {
        let base = [
            json!({"role": "system", "content": "You are a helpful assistant."}),
            json!({"role": "user", "content": "I am a user."}),
        ];
        let base_ids = self.encode(&base, false)?;
        let mut full = base.to_vec();
        full.push(message.clone());
        let full_ids = self.encode(&full, false)?;
        Ok(full_ids.get(base_ids.len()..).unwrap_or_default().to_vec())
    }
}

/// 0.3.0's `_find_generation_prompt_boundary`: where the assistant's own
/// tokens start; also when the header's last token merged with the content.
fn prompt_boundary(cur: &[i64], generation_prompt: &[i64]) -> Result<usize> {
    let n = generation_prompt.len();
    if cur.starts_with(generation_prompt) {
        return Ok(n);
    }
    if n >= 1 && cur.len() >= n && cur[..n - 1] == generation_prompt[..n - 1] {
        return Ok(n - 1);
    }
    bail!(
        "the tokens of an assistant message should start with the generation prompt \
         {generation_prompt:?}, got {:?}",
        &cur[..n.min(cur.len())]
    )
}

fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

/// Python truthiness of a JSON value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// 0.3.0's `_normalize_chat_messages` for one message: `content` null or
/// missing becomes `""`, an assistant's `tool_calls` become OpenAI's list
/// form (dropped when empty), other fields are kept.
fn normalize_message(m: &Value) -> Result<Value> {
    let obj = m.as_object().context("a message must be an object")?;
    let role = obj
        .get("role")
        .and_then(Value::as_str)
        .context("a message needs a string `role`")?
        .to_string();
    let mut out: Map<String, Value> = obj
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "role" | "content" | "tool_calls"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let content = obj.get("content").filter(|v| truthy(v)).cloned();
    out.insert("role".into(), Value::String(role.clone()));
    out.insert(
        "content".into(),
        content.unwrap_or(Value::String(String::new())),
    );
    if role == "assistant" {
        if let Some(calls) = normalize_tool_calls(obj.get("tool_calls"))? {
            out.insert("tool_calls".into(), calls);
        }
    }
    Ok(Value::Object(out))
}

/// 0.3.0's `_normalize_tool_call_payload`.
fn normalize_tool_calls(tc: Option<&Value>) -> Result<Option<Value>> {
    let parsed;
    let tc = match tc {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => {
            let s = s.trim();
            if s.is_empty() || s == "[]" {
                return Ok(None);
            }
            parsed = serde_json::from_str::<Value>(s).context("`tool_calls` is not JSON")?;
            &parsed
        }
        Some(v) => v,
    };
    let calls: Vec<&Value> = match tc {
        Value::Object(_) => vec![tc],
        Value::Array(a) if !a.is_empty() => a.iter().collect(),
        _ => return Ok(None),
    };
    let mut out = Vec::new();
    for call in calls {
        let call = call
            .as_object()
            .context("a tool call entry must be an object")?;
        let func = match call.get("function") {
            Some(Value::Object(f)) => f,
            _ => call,
        };
        let mut arguments = func.get("arguments").cloned().unwrap_or_else(|| json!({}));
        if let Value::String(s) = &arguments {
            if let Ok(v) = serde_json::from_str::<Value>(s) {
                arguments = v;
            }
        }
        out.push(json!({
            "type": "function",
            "function": {"name": func.get("name").cloned().unwrap_or(Value::Null), "arguments": arguments},
        }));
    }
    Ok(Some(Value::Array(out)))
}

/// 0.3.0's `_coerce_tools`: a list of schemas or its JSON text; empty is none.
fn coerce_tools(tools: &Value) -> Result<Option<Value>> {
    match tools {
        Value::Null => Ok(None),
        Value::String(s) => {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            let v: Value = serde_json::from_str(s).context("tools are not JSON")?;
            Ok(truthy(&v).then_some(v))
        }
        Value::Array(a) => Ok((!a.is_empty()).then(|| tools.clone())),
        other => bail!("unsupported tools value {other}"),
    }
}

/// Whether a message's content holds an image part.
fn has_image(m: &Value) -> bool {
    m.get("content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts
                .iter()
                .any(|p| p.get("type").and_then(Value::as_str) == Some("image"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_take_the_openai_shape() {
        let v = normalize_tool_calls(Some(&json!(r#"{"name": "f", "arguments": "{\"x\": 1}"}"#)))
            .unwrap()
            .unwrap();
        assert_eq!(
            v,
            json!([{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}])
        );
        assert_eq!(normalize_tool_calls(Some(&json!("[]"))).unwrap(), None);
        assert_eq!(normalize_tool_calls(Some(&json!([]))).unwrap(), None);
    }

    #[test]
    fn merged_generation_prompt_headers_are_found() {
        assert_eq!(prompt_boundary(&[1, 2, 3, 9], &[1, 2, 3]).unwrap(), 3);
        assert_eq!(prompt_boundary(&[1, 2, 7, 9], &[1, 2, 3]).unwrap(), 2);
        assert!(prompt_boundary(&[5, 2, 3], &[1, 2, 3]).is_err());
    }
}
