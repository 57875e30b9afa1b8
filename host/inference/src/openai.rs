//! OpenAI-compatible request/response types, streaming chunks included, with
//! vLLM's extensions (token-id prompts, `top_k`, `min_p`, `repetition_penalty`,
//! `stop_token_ids`, `ignore_eos`, `include_stop_str_in_output`,
//! `skip_special_tokens`, `return_token_ids`).

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `prompt` of `/v1/completions`: text, texts, token ids or batches of ids.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum PromptInput {
    Text(String),
    Ids(Vec<i64>),
    IdsBatch(Vec<Vec<i64>>),
    Texts(Vec<String>),
}

/// `stop`: one string or several.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum StopInput {
    One(String),
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct StreamOptions {
    /// Send a last chunk with `usage` and no choices.
    #[serde(default)]
    pub include_usage: bool,
}

/// Sampling fields shared by both endpoints.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct SamplingFields {
    pub max_tokens: Option<usize>,
    /// vLLM: fewest new tokens (stop tokens and strings wait until then).
    pub min_tokens: Option<usize>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    /// vLLM: > 1 discourages tokens of the prompt and the output so far.
    pub repetition_penalty: Option<f64>,
    pub stop: Option<StopInput>,
    pub stop_token_ids: Option<Vec<i64>>,
    /// vLLM: keep the matched stop string at the end of the text.
    pub include_stop_str_in_output: Option<bool>,
    /// vLLM: leave special tokens out of the text (default true).
    pub skip_special_tokens: Option<bool>,
    pub ignore_eos: Option<bool>,
    pub seed: Option<u64>,
    /// Choices per prompt.
    pub n: Option<usize>,
    /// Answer with server-sent events.
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    /// Not supported; a non-empty map is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logit_bias: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: PromptInput,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// Return the sampled tokens' log-probs with this many most likely
    /// alternatives each.
    pub logprobs: Option<u32>,
    /// Prepend the prompt to the text (and, with `logprobs`, its tokens'
    /// log-probs, the first one null).
    #[serde(default)]
    pub echo: bool,
    /// vLLM: include `token_ids` / `prompt_token_ids` in each choice.
    #[serde(default)]
    pub return_token_ids: bool,
    /// Not supported; refused when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<String>,
    /// Not supported; refused when above `n`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_of: Option<usize>,
}

/// Tokens and their log-probs, most likely first, as a JSON object
/// `{token: logprob}` (order kept).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopLogprobs(pub Vec<(String, f32)>);

impl Serialize for TopLogprobs {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (token, lp) in &self.0 {
            map.serialize_entry(token, lp)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for TopLogprobs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = TopLogprobs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of token log-probs")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<TopLogprobs, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Option<f32>>()? {
                    out.push((k, v.unwrap_or(f32::NEG_INFINITY)));
                }
                Ok(TopLogprobs(out))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// A log-prob list where JSON `null` (no log-prob: the first prompt token of
/// an `echo`) reads as NaN; NaN is written back as `null`.
fn nullable_logprobs<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
    let v = Vec::<Option<f32>>::deserialize(d)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f32::NAN)).collect())
}

/// Log-probs of a text completion choice (or of one streamed chunk).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct CompletionLogprobs {
    /// Each token's text.
    #[serde(default)]
    pub tokens: Vec<String>,
    /// Each token's log-prob; NaN (`null` on the wire) where there is none
    /// (the first prompt token of an `echo`).
    #[serde(deserialize_with = "nullable_logprobs")]
    pub token_logprobs: Vec<f32>,
    /// Per token, the most likely alternatives (the sampled token included);
    /// `null` where there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<Vec<Option<TopLogprobs>>>,
    /// Per token, its character offset in the choice's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_offset: Option<Vec<usize>>,
}

/// One choice of a text completion.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CompletionChoice {
    pub index: usize,
    pub text: String,
    pub finish_reason: String,
    pub logprobs: Option<CompletionLogprobs>,
    /// vLLM: the stop string or stop token id that ended the choice (null for
    /// EOS and length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub token_ids: Option<Vec<i64>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prompt_token_ids: Option<Vec<i64>>,
}

/// Prompt tokens served from cache.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct PromptTokensDetails {
    pub cached_tokens: usize,
}

/// Token counts.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub total_tokens: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

/// `/v1/completions` response (fields other servers may omit default when parsed).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CompletionResponse {
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub object: String,
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub model: String,
    pub choices: Vec<CompletionChoice>,
    #[serde(default)]
    pub usage: Usage,
    /// skyrl extension: the weight version when the request started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_version: Option<u64>,
}

/// One choice of a streamed `/v1/completions` chunk.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CompletionChunkChoice {
    pub index: usize,
    /// New text.
    pub text: String,
    pub logprobs: Option<CompletionLogprobs>,
    /// Set on the choice's last chunk.
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub token_ids: Option<Vec<i64>>,
}

/// A streamed `/v1/completions` chunk (`object: "text_completion"`).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CompletionChunk {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<CompletionChunkChoice>,
    /// Only in the last chunk, with `stream_options.include_usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// A content part of a chat message (only text is understood).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

/// `content` of a chat message: text, or a list of parts.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl MessageContent {
    /// The text, text parts joined; other parts are refused.
    pub fn text(&self) -> Result<String, String> {
        match self {
            MessageContent::Text(t) => Ok(t.clone()),
            MessageContent::Parts(parts) => parts
                .iter()
                .map(|p| match (p.kind.as_str(), &p.text) {
                    ("text", Some(t)) => Ok(t.as_str()),
                    (kind, _) => Err(format!("content parts of type `{kind}` are not supported")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|ts| ts.concat()),
        }
    }
}

/// A chat message.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatMessageIn {
    pub role: String,
    /// `null` (e.g. an assistant turn with tool calls) reads as empty text.
    #[serde(default)]
    pub content: Option<MessageContent>,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<ChatMessageIn>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// Newer name of `max_tokens`.
    pub max_completion_tokens: Option<usize>,
    /// Return each generated token's log-prob.
    #[serde(default)]
    pub logprobs: bool,
    /// With `logprobs`: this many most likely alternatives per token.
    pub top_logprobs: Option<usize>,
    /// vLLM: include `token_ids` / `prompt_token_ids` in each choice.
    #[serde(default)]
    pub return_token_ids: bool,
    /// Not supported (no tool-call parsing); a non-empty list is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<serde_json::Value>>,
}

/// An assistant message of a chat answer.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatMessageOut {
    pub role: String,
    pub content: String,
}

/// One alternative token of a chat log-prob entry.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatTopLogprob {
    pub token: String,
    pub logprob: f32,
    /// The token's UTF-8 bytes.
    pub bytes: Vec<u8>,
}

/// A generated token of a chat answer with its log-prob and alternatives.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatTokenLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Vec<u8>,
    pub top_logprobs: Vec<ChatTopLogprob>,
}

/// `logprobs` of a chat choice.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ChatLogprobs {
    pub content: Vec<ChatTokenLogprob>,
}

/// One choice of a chat answer.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatChoice {
    pub index: usize,
    pub message: ChatMessageOut,
    pub logprobs: Option<ChatLogprobs>,
    pub finish_reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub token_ids: Option<Vec<i64>>,
}

/// `/v1/chat/completions` response.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatCompletionResponse {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: Usage,
    /// vLLM: with `return_token_ids`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prompt_token_ids: Option<Vec<i64>>,
    /// skyrl extension: the weight version when the request started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_version: Option<u64>,
}

/// The new part of a streamed chat message.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct ChatDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// One choice of a streamed chat chunk.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatChunkChoice {
    pub index: usize,
    pub delta: ChatDelta,
    pub logprobs: Option<ChatLogprobs>,
    /// Set on the choice's last chunk.
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub token_ids: Option<Vec<i64>>,
}

/// A streamed chat chunk (`object: "chat.completion.chunk"`).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatCompletionChunk {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChunkChoice>,
    /// Only in the last chunk, with `stream_options.include_usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// OpenAI error body.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// OpenAI error detail (`code` is the HTTP status, as vLLM sends it).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ErrorDetail {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field at fault, when known.
    #[serde(default)]
    pub param: Option<String>,
    pub code: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logprobs_keep_nulls_and_the_order_of_alternatives() {
        let lp = CompletionLogprobs {
            tokens: vec!["a".into(), "b".into()],
            token_logprobs: vec![f32::NAN, -0.5],
            top_logprobs: Some(vec![
                None,
                Some(TopLogprobs(vec![("z".into(), -0.25), ("b".into(), -0.5)])),
            ]),
            text_offset: Some(vec![0, 1]),
        };
        let text = serde_json::to_string(&lp).unwrap();
        assert_eq!(
            text,
            r#"{"tokens":["a","b"],"token_logprobs":[null,-0.5],"top_logprobs":[null,{"z":-0.25,"b":-0.5}],"text_offset":[0,1]}"#
        );
        let back: CompletionLogprobs = serde_json::from_str(&text).unwrap();
        assert!(back.token_logprobs[0].is_nan());
        assert_eq!(back.top_logprobs, lp.top_logprobs);
    }

    #[test]
    fn chat_content_may_be_text_parts_or_null() {
        let m: Vec<ChatMessageIn> = serde_json::from_str(
            r#"[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
                {"role":"assistant","content":null}]"#,
        )
        .unwrap();
        assert_eq!(m[0].content.as_ref().unwrap().text().unwrap(), "ab");
        assert!(m[1].content.is_none());
    }
}
