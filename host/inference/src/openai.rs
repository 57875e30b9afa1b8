//! OpenAI-compatible request/response types (with vLLM's extensions:
//! token-id prompts, `top_k`, `min_p`, `stop_token_ids`, `return_token_ids`).

use serde::{Deserialize, Serialize};

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

/// Sampling fields shared by both endpoints.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct SamplingFields {
    pub max_tokens: Option<usize>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub stop: Option<StopInput>,
    pub stop_token_ids: Option<Vec<i64>>,
    pub ignore_eos: Option<bool>,
    pub seed: Option<u64>,
    pub n: Option<usize>,
    pub stream: Option<bool>,
}

/// `POST /v1/completions`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CompletionRequest {
    pub model: Option<String>,
    pub prompt: PromptInput,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    /// Return the sampled tokens' log-probs (any value; top-k alternatives are not returned).
    pub logprobs: Option<u32>,
    /// vLLM: include `token_ids` / `prompt_token_ids` in each choice.
    #[serde(default)]
    pub return_token_ids: bool,
}

/// Log-probs of a text completion choice.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CompletionLogprobs {
    #[serde(default)]
    pub tokens: Vec<String>,
    pub token_logprobs: Vec<f32>,
}

/// One choice of a text completion.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CompletionChoice {
    pub index: usize,
    pub text: String,
    pub finish_reason: String,
    pub logprobs: Option<CompletionLogprobs>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub token_ids: Option<Vec<i64>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub prompt_token_ids: Option<Vec<i64>>,
}

/// Token counts.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub total_tokens: usize,
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
    /// skyrl extension: the weight version that produced this output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_version: Option<u64>,
}

/// A chat message.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatMessageIn {
    pub role: String,
    pub content: String,
}

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<ChatMessageIn>,
    #[serde(flatten)]
    pub sampling: SamplingFields,
    #[serde(default)]
    pub logprobs: bool,
}

/// OpenAI error body.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// OpenAI error detail.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ErrorDetail {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub code: u16,
}
