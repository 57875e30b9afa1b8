//! Streamed answers (`stream: true`): server-sent events `data: {chunk}`, one
//! chunk per choice and engine step that produced text, the choice's
//! `finish_reason` on its last chunk, an optional usage chunk, then
//! `data: [DONE]`.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use skyrl_inference::openai::*;
use skyrl_model::Completion;
use tokio::sync::{mpsc, oneshot};

use crate::generate::{generate_error, request_id, Outcome, Plan};
use crate::server::{now, ApiError, AppState};
use crate::text::{chat_logprobs, stop_holdback, CompletionLogprobsBuilder, TextStream};
use crate::worker::{GenerateError, SeqEvent};

/// Which endpoint's chunks to send.
pub(crate) enum Flavor {
    /// `text_completion` chunks: `logprobs` alternatives per token when
    /// asked, and with `echo` each prompt's text as its choices' first chunk.
    Completion {
        logprobs: Option<usize>,
        echo: Option<Vec<String>>,
        return_token_ids: bool,
    },
    /// `chat.completion.chunk` chunks: a first delta with the role, then content.
    Chat {
        logprobs: Option<usize>,
        return_token_ids: bool,
    },
}

/// Where a streamed request's output comes from.
pub(crate) struct Source {
    /// An event already taken off `events`.
    pub first: Option<SeqEvent>,
    pub events: mpsc::UnboundedReceiver<SeqEvent>,
    /// The final reply, unless already in `outcome`.
    pub reply: Option<oneshot::Receiver<Result<Outcome, GenerateError>>>,
    pub outcome: Option<Outcome>,
}

/// One choice's progress.
struct Choice {
    text: TextStream,
    /// Whether its first chunk (role, or echoed prompt) went out.
    started: bool,
    /// Character offset of its next token (completion log-probs).
    offset: usize,
}

struct Stream {
    s: AppState,
    plan: Plan,
    flavor: Flavor,
    id: String,
    created: u64,
    choices: Vec<Choice>,
    source: Source,
    /// Encoded chunks waiting to be sent.
    out: VecDeque<String>,
    done: bool,
}

/// The SSE response for a request whose output comes from `source`.
pub(crate) fn respond(s: AppState, plan: Plan, flavor: Flavor, source: Source) -> Response {
    let hold = stop_holdback(&plan.params.stop, plan.include_stop);
    let choices = (0..plan.prompts.len() * plan.n)
        .map(|_| Choice {
            text: TextStream::new(hold, plan.skip_special),
            started: false,
            offset: 0,
        })
        .collect();
    let prefix = match flavor {
        Flavor::Completion { .. } => "cmpl",
        Flavor::Chat { .. } => "chatcmpl",
    };
    let stream = Stream {
        s,
        plan,
        flavor,
        id: format!("{prefix}-{}", request_id()),
        created: now(),
        choices,
        source,
        out: VecDeque::new(),
        done: false,
    };
    let events = futures_util::stream::unfold(stream, |mut st| async move {
        let data = st.next().await?;
        Some((Ok::<_, Infallible>(Event::default().data(data)), st))
    });
    Sse::new(events).into_response()
}

impl Stream {
    /// The next `data:` payload; `None` after `[DONE]`.
    async fn next(&mut self) -> Option<String> {
        loop {
            if let Some(data) = self.out.pop_front() {
                return Some(data);
            }
            if self.done {
                return None;
            }
            let event = match self.source.first.take() {
                Some(ev) => Some(ev),
                None => self.source.events.recv().await,
            };
            match event {
                Some(ev) => self.on_event(ev),
                None => self.end().await,
            }
        }
    }

    /// Every sequence ended: the usage chunk or the error, then `[DONE]`.
    async fn end(&mut self) {
        let outcome = match (self.source.outcome.take(), self.source.reply.take()) {
            (Some(out), _) => Ok(out),
            (None, Some(rx)) => match rx.await {
                Ok(r) => r.map_err(generate_error),
                Err(_) => Err(ApiError(
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "the engine thread has stopped".into(),
                )),
            },
            (None, None) => Err(ApiError(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "no reply from the engine".into(),
            )),
        };
        match outcome {
            Ok((outs, _)) => {
                if self.plan.include_usage {
                    let usage = self.plan.usage(&outs);
                    self.push_usage(usage);
                }
            }
            Err(e) => self.out.push_back(json_text(&e.body())),
        }
        self.out.push_back("[DONE]".into());
        self.done = true;
    }

    fn on_event(&mut self, ev: SeqEvent) {
        let i = ev.index;
        let u = ev.update;
        let tok = self.s.tokenizer.clone();
        let mut lead = None;
        if !self.choices[i].started {
            self.choices[i].started = true;
            lead = match &self.flavor {
                Flavor::Chat { .. } => Some(String::new()),
                Flavor::Completion {
                    echo: Some(texts), ..
                } => Some(texts[i / self.plan.n].clone()),
                Flavor::Completion { .. } => None,
            };
        }
        self.choices[i].text.push(&tok, &u.new_token_ids);
        let finish = u.finished.as_ref();
        let text = match finish {
            Some(c) => {
                let final_text = match self.plan.text(&self.s, c) {
                    Ok(t) => t,
                    Err(e) => e.1,
                };
                self.choices[i].text.finish(&final_text)
            }
            None => self.choices[i].text.release(),
        };
        let (chat, logprobs, return_ids) = match &self.flavor {
            Flavor::Completion {
                logprobs,
                return_token_ids,
                ..
            } => (false, *logprobs, *return_token_ids),
            Flavor::Chat {
                logprobs,
                return_token_ids,
            } => (true, *logprobs, *return_token_ids),
        };
        let ids = (return_ids && !u.new_token_ids.is_empty()).then(|| u.new_token_ids.clone());
        if chat {
            if let Some(lead) = lead {
                let delta = ChatDelta {
                    role: Some("assistant".into()),
                    content: Some(lead),
                };
                let chunk = self.chat_chunk(i, delta, None, None, None);
                self.push(&chunk);
            }
            let logprobs = logprobs.map(|k| {
                chat_logprobs(
                    &tok,
                    &u.new_token_ids,
                    &u.new_logprobs,
                    &u.new_top_logprobs,
                    k,
                )
            });
            if text.is_empty() && logprobs.is_none() && ids.is_none() && finish.is_none() {
                return;
            }
            let delta = ChatDelta {
                role: None,
                content: (!text.is_empty()).then_some(text),
            };
            let chunk = self.chat_chunk(i, delta, logprobs, ids, finish);
            self.push(&chunk);
        } else {
            if let Some(lead) = lead {
                self.choices[i].offset = lead.chars().count();
                let chunk = self.completion_chunk(i, lead, None, None, None);
                self.push(&chunk);
            }
            let logprobs = logprobs.map(|k| {
                let mut b = CompletionLogprobsBuilder::new(&tok, k, self.choices[i].offset);
                for (j, (&id, &lp)) in u.new_token_ids.iter().zip(&u.new_logprobs).enumerate() {
                    let top = u.new_top_logprobs.get(j).map_or(&[][..], Vec::as_slice);
                    b.push(id, Some((lp, top)));
                }
                self.choices[i].offset = b.offset();
                b.finish()
            });
            if text.is_empty() && logprobs.is_none() && ids.is_none() && finish.is_none() {
                return;
            }
            let chunk = self.completion_chunk(i, text, logprobs, ids, finish);
            self.push(&chunk);
        }
    }

    fn completion_chunk(
        &self,
        index: usize,
        text: String,
        logprobs: Option<CompletionLogprobs>,
        token_ids: Option<Vec<i64>>,
        finish: Option<&Completion>,
    ) -> CompletionChunk {
        CompletionChunk {
            id: self.id.clone(),
            object: "text_completion".into(),
            created: self.created,
            model: self.s.model_name.clone(),
            choices: vec![CompletionChunkChoice {
                index,
                text,
                logprobs,
                finish_reason: finish.map(|c| c.stop_reason.as_str().into()),
                stop_reason: finish.and_then(|c| self.plan.stop_reason(c)),
                token_ids,
            }],
            usage: None,
        }
    }

    fn chat_chunk(
        &self,
        index: usize,
        delta: ChatDelta,
        logprobs: Option<ChatLogprobs>,
        token_ids: Option<Vec<i64>>,
        finish: Option<&Completion>,
    ) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.created,
            model: self.s.model_name.clone(),
            choices: vec![ChatChunkChoice {
                index,
                delta,
                logprobs,
                finish_reason: finish.map(|c| c.stop_reason.as_str().into()),
                stop_reason: finish.and_then(|c| self.plan.stop_reason(c)),
                token_ids,
            }],
            usage: None,
        }
    }

    /// The last chunk with `stream_options.include_usage`: usage, no choices.
    fn push_usage(&mut self, usage: Usage) {
        let data = match self.flavor {
            Flavor::Completion { .. } => json_text(&CompletionChunk {
                id: self.id.clone(),
                object: "text_completion".into(),
                created: self.created,
                model: self.s.model_name.clone(),
                choices: Vec::new(),
                usage: Some(usage),
            }),
            Flavor::Chat { .. } => json_text(&ChatCompletionChunk {
                id: self.id.clone(),
                object: "chat.completion.chunk".into(),
                created: self.created,
                model: self.s.model_name.clone(),
                choices: Vec::new(),
                usage: Some(usage),
            }),
        };
        self.out.push_back(data);
    }

    fn push(&mut self, chunk: &impl Serialize) {
        self.out.push_back(json_text(chunk));
    }
}

fn json_text(v: &impl Serialize) -> String {
    serde_json::to_string(v).expect("wire types serialize")
}
