//! Hugging Face tokenizer (`tokenizer.json`) plus `tokenizer_config.json`
//! (special tokens, chat template).

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::chat_template::ChatTemplate;
use crate::error::ModelError;

/// Tokenizer files copied by [`Tokenizer::save`].
pub const TOKENIZER_FILES: &[&str] = &[
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "generation_config.json",
];

/// Text <-> token ids, with the model's chat template.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    template: Option<ChatTemplate>,
    bos_token: Option<String>,
    eos_token: Option<String>,
    pad_token: Option<String>,
    unk_token: Option<String>,
    files: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("eos_token", &self.eos_token)
            .field("has_chat_template", &self.template.is_some())
            .finish()
    }
}

/// A special token in `tokenizer_config.json`: a string or `{"content": ...}`.
fn token_string(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

/// `chat_template` is a string or a list of `{name, template}` (pick `default`).
fn template_source(config: &Value, dir: &Path) -> Result<Option<String>, ModelError> {
    match config.get("chat_template") {
        Some(Value::String(s)) => return Ok(Some(s.clone())),
        Some(Value::Array(list)) => {
            let pick = list
                .iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some("default"))
                .or_else(|| list.first());
            return Ok(pick
                .and_then(|t| t.get("template"))
                .and_then(Value::as_str)
                .map(str::to_string));
        }
        _ => {}
    }
    let jinja = dir.join("chat_template.jinja");
    if jinja.is_file() {
        return std::fs::read_to_string(&jinja)
            .map(Some)
            .map_err(|e| ModelError::io(&jinja, e));
    }
    Ok(None)
}

impl Tokenizer {
    /// Loads `dir/tokenizer.json` and (optionally) `dir/tokenizer_config.json`.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self, ModelError> {
        let dir = dir.as_ref();
        let path = dir.join("tokenizer.json");
        let inner = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| ModelError::Tokenizer(format!("{}: {e}", path.display())))?;
        let config_path = dir.join("tokenizer_config.json");
        let config: Value = if config_path.is_file() {
            let text = std::fs::read_to_string(&config_path)
                .map_err(|e| ModelError::io(&config_path, e))?;
            serde_json::from_str(&text)
                .map_err(|e| ModelError::Tokenizer(format!("{}: {e}", config_path.display())))?
        } else {
            Value::Object(Default::default())
        };
        let bos_token = token_string(config.get("bos_token"));
        let eos_token = token_string(config.get("eos_token"));
        let pad_token = token_string(config.get("pad_token"));
        let unk_token = token_string(config.get("unk_token"));
        let template = template_source(&config, dir)?
            .map(|src| {
                ChatTemplate::new(
                    &src,
                    bos_token.clone(),
                    eos_token.clone(),
                    pad_token.clone(),
                    unk_token.clone(),
                )
            })
            .transpose()?;
        let mut files = Vec::new();
        for name in TOKENIZER_FILES {
            let p = dir.join(name);
            if p.is_file() {
                files.push((
                    name.to_string(),
                    std::fs::read(&p).map_err(|e| ModelError::io(&p, e))?,
                ));
            }
        }
        Ok(Tokenizer {
            inner,
            template,
            bos_token,
            eos_token,
            pad_token,
            unk_token,
            files,
        })
    }

    /// Writes the tokenizer files it was loaded from into `dir`.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<(), ModelError> {
        let dir = dir.as_ref();
        for (name, bytes) in &self.files {
            let p = dir.join(name);
            std::fs::write(&p, bytes).map_err(|e| ModelError::io(&p, e))?;
        }
        Ok(())
    }

    /// Token ids of `text`. `add_special_tokens` applies the post-processor (e.g. BOS).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<i64>, ModelError> {
        let enc = self
            .inner
            .encode(text, add_special_tokens)
            .map_err(|e| ModelError::Tokenizer(format!("encode: {e}")))?;
        Ok(enc.get_ids().iter().map(|&id| id as i64).collect())
    }

    /// Text of `ids`.
    pub fn decode(&self, ids: &[i64], skip_special_tokens: bool) -> Result<String, ModelError> {
        let ids = ids
            .iter()
            .map(|&id| {
                u32::try_from(id)
                    .map_err(|_| ModelError::Input(format!("token id {id} out of range")))
            })
            .collect::<Result<Vec<u32>, _>>()?;
        self.inner
            .decode(&ids, skip_special_tokens)
            .map_err(|e| ModelError::Tokenizer(format!("decode: {e}")))
    }

    /// Id of a token string (special tokens included).
    pub fn token_to_id(&self, token: &str) -> Option<i64> {
        self.inner.token_to_id(token).map(i64::from)
    }

    /// Vocabulary size including added tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// EOS token string from `tokenizer_config.json`.
    pub fn eos_token(&self) -> Option<&str> {
        self.eos_token.as_deref()
    }

    /// BOS token string from `tokenizer_config.json`.
    pub fn bos_token(&self) -> Option<&str> {
        self.bos_token.as_deref()
    }

    /// EOS token id.
    pub fn eos_token_id(&self) -> Option<i64> {
        self.eos_token.as_deref().and_then(|t| self.token_to_id(t))
    }

    /// Padding id: `pad_token`, else EOS.
    pub fn pad_token_id(&self) -> Option<i64> {
        self.pad_token
            .as_deref()
            .and_then(|t| self.token_to_id(t))
            .or_else(|| self.eos_token_id())
    }

    /// True when `tokenizer_config.json` carries a chat template.
    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    /// Renders the chat template (`apply_chat_template(..., tokenize=False)`).
    pub fn apply_chat_template<M: Serialize>(
        &self,
        messages: &[M],
        add_generation_prompt: bool,
    ) -> Result<String, ModelError> {
        self.apply_chat_template_with(messages, add_generation_prompt, None)
    }

    /// [`Tokenizer::apply_chat_template`] with extra template variables (`tools`, ...).
    pub fn apply_chat_template_with<M: Serialize>(
        &self,
        messages: &[M],
        add_generation_prompt: bool,
        extra: Option<&serde_json::Map<String, Value>>,
    ) -> Result<String, ModelError> {
        let template = self.template.as_ref().ok_or_else(|| {
            ModelError::Tokenizer("tokenizer_config.json has no chat_template".into())
        })?;
        template.render(messages, add_generation_prompt, extra)
    }

    /// Token ids of the rendered chat (`apply_chat_template(..., tokenize=True)`:
    /// encoded without adding special tokens).
    pub fn encode_chat<M: Serialize>(
        &self,
        messages: &[M],
        add_generation_prompt: bool,
    ) -> Result<Vec<i64>, ModelError> {
        let text = self.apply_chat_template(messages, add_generation_prompt)?;
        self.encode(&text, false)
    }

    /// [`Tokenizer::encode_chat`] with extra template variables.
    pub fn encode_chat_with<M: Serialize>(
        &self,
        messages: &[M],
        add_generation_prompt: bool,
        extra: Option<&serde_json::Map<String, Value>>,
    ) -> Result<Vec<i64>, ModelError> {
        let text = self.apply_chat_template_with(messages, add_generation_prompt, extra)?;
        self.encode(&text, false)
    }

    /// Compiles another chat template (a custom rollout template, a file)
    /// with this tokenizer's special tokens, for the `*_using` methods.
    pub fn compile_chat_template(&self, source: &str) -> Result<ChatTemplate, ModelError> {
        ChatTemplate::new(
            source,
            self.bos_token.clone(),
            self.eos_token.clone(),
            self.pad_token.clone(),
            self.unk_token.clone(),
        )
    }

    /// [`Tokenizer::encode_chat_with`] through `template` instead of the
    /// model's own (`apply_chat_template(..., chat_template=...)`).
    pub fn encode_chat_using<M: Serialize>(
        &self,
        template: &ChatTemplate,
        messages: &[M],
        add_generation_prompt: bool,
        extra: Option<&serde_json::Map<String, Value>>,
    ) -> Result<Vec<i64>, ModelError> {
        let text = template.render(messages, add_generation_prompt, extra)?;
        self.encode(&text, false)
    }

    /// Token ids of the chat rendered by `template` and its assistant mask:
    /// 1 on the tokens of the template's `{% generation %}` blocks, as
    /// transformers' `apply_chat_template(..., return_assistant_tokens_mask=True)`
    /// computes it (a block covers the tokens from the one holding its first
    /// character to the one holding its last; a block starting past the end
    /// of the tokens ends the marking).
    pub fn encode_chat_assistant_mask<M: Serialize>(
        &self,
        template: &ChatTemplate,
        messages: &[M],
        add_generation_prompt: bool,
        extra: Option<&serde_json::Map<String, Value>>,
    ) -> Result<(Vec<i64>, Vec<u8>), ModelError> {
        let render = template.render_marked(messages, add_generation_prompt, extra)?;
        let enc = self
            .inner
            .encode_char_offsets(render.text.as_str(), false)
            .map_err(|e| ModelError::Tokenizer(format!("encode: {e}")))?;
        let ids: Vec<i64> = enc.get_ids().iter().map(|&id| id as i64).collect();
        let mut mask = vec![0u8; ids.len()];
        for &(start, end) in &render.generation_spans {
            if end <= start {
                continue;
            }
            let Some(first) = enc.char_to_token(start, 0) else {
                break;
            };
            let last = enc.char_to_token(end - 1, 0).map_or(ids.len(), |t| t + 1);
            mask[first..last.max(first)].iter_mut().for_each(|m| *m = 1);
        }
        Ok((ids, mask))
    }

    /// The wrapped `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}
