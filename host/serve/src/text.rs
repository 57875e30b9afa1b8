//! Text of completions: stop-string truncation, incremental decoding for
//! streams, and log-prob entries in OpenAI's shapes.

use skyrl_inference::openai::{
    ChatLogprobs, ChatTokenLogprob, ChatTopLogprob, CompletionLogprobs, TopLogprobs,
};
use skyrl_model::{Completion, StopMatch, Tokenizer};

/// The lowest log-prob reported (OpenAI's floor); also replaces NaN.
const LOGPROB_FLOOR: f32 = -9999.0;

/// `lp` floored at [`LOGPROB_FLOOR`] (JSON cannot carry -inf).
pub(crate) fn finite(lp: f32) -> f32 {
    lp.max(LOGPROB_FLOOR)
}

/// Cuts `text` where the stop string that ended `c` starts (OpenAI leaves stop
/// strings out), unless `include_stop` (vLLM's `include_stop_str_in_output`).
pub(crate) fn truncate_at_stop(text: &mut String, c: &Completion, include_stop: bool) {
    if include_stop {
        return;
    }
    if let Some(StopMatch::String(stop)) = &c.stop_match {
        // Earlier text cannot hold the stop string (generation would have
        // ended there), so its first occurrence is the match.
        if let Some(at) = text.find(stop.as_str()) {
            text.truncate(at);
        }
    }
}

/// The text a choice returns: its tokens decoded, cut at the stop string.
pub(crate) fn completion_text(
    tok: &Tokenizer,
    c: &Completion,
    skip_special: bool,
    include_stop: bool,
) -> Result<String, String> {
    let mut text = tok
        .decode(&c.token_ids, skip_special)
        .map_err(|e| e.to_string())?;
    truncate_at_stop(&mut text, c, include_stop);
    Ok(text)
}

/// Characters a stream holds back so that a stop string, which is cut from
/// the text, is never sent in part: the longest stop string less one.
pub(crate) fn stop_holdback(stop: &[String], include_stop: bool) -> usize {
    if include_stop {
        return 0;
    }
    stop.iter()
        .map(|s| s.chars().count().saturating_sub(1))
        .max()
        .unwrap_or(0)
}

/// Turns a growing token list into text deltas. Each step decodes only a
/// window of recent tokens (vLLM's and TGI's prefix-offset scheme) and waits
/// while the last token ends inside a UTF-8 character.
#[derive(Debug)]
pub(crate) struct TextStream {
    ids: Vec<i64>,
    /// Start of the window decoded for context.
    prefix: usize,
    /// Tokens already turned into text.
    read: usize,
    /// The text so far.
    text: String,
    /// Bytes of `text` already handed out.
    sent: usize,
    /// Characters held back at the end.
    hold: usize,
    skip_special: bool,
}

impl TextStream {
    /// A stream holding back `hold` characters (see [`stop_holdback`]).
    pub(crate) fn new(hold: usize, skip_special: bool) -> Self {
        TextStream {
            ids: Vec::new(),
            prefix: 0,
            read: 0,
            text: String::new(),
            sent: 0,
            hold,
            skip_special,
        }
    }

    /// Adds tokens (call [`TextStream::release`] or [`TextStream::finish`] next).
    pub(crate) fn push(&mut self, tok: &Tokenizer, ids: &[i64]) {
        if ids.is_empty() {
            return;
        }
        self.ids.extend_from_slice(ids);
        let decode = |ids: &[i64]| tok.decode(ids, self.skip_special).unwrap_or_default();
        let before = decode(&self.ids[self.prefix..self.read]);
        let now = decode(&self.ids[self.prefix..]);
        if now.len() > before.len() && !now.ends_with('\u{FFFD}') {
            if let Some(new) = now.get(before.len()..) {
                self.text.push_str(new);
                self.prefix = self.read;
                self.read = self.ids.len();
            }
        }
    }

    /// The text that can be sent while the sequence runs: all but the
    /// held-back end.
    pub(crate) fn release(&mut self) -> String {
        let mut end = self.text.len();
        for _ in 0..self.hold {
            match self.text[..end].char_indices().next_back() {
                Some((i, _)) => end = i,
                None => break,
            }
        }
        self.take_until(end)
    }

    /// The rest of the text once the sequence finished with `final_text`
    /// (the whole choice's text, stop string already cut). Should the window
    /// decode have drifted from the full decode (rare cleanup rules), nothing
    /// more is sent rather than text that may belong to a stop string.
    pub(crate) fn finish(&mut self, final_text: &str) -> String {
        let rest = if final_text.starts_with(&self.text[..self.sent]) {
            final_text[self.sent..].to_string()
        } else {
            String::new()
        };
        self.text = final_text.to_string();
        self.sent = self.text.len();
        rest
    }

    fn take_until(&mut self, end: usize) -> String {
        if end <= self.sent {
            return String::new();
        }
        let out = self.text[self.sent..end].to_string();
        self.sent = end;
        out
    }
}

/// A token's text (special tokens spelled out).
pub(crate) fn token_text(tok: &Tokenizer, id: i64) -> String {
    tok.decode(&[id], false).unwrap_or_default()
}

/// Builds `/v1/completions` log-probs token by token, tracking text offsets.
pub(crate) struct CompletionLogprobsBuilder<'a> {
    tok: &'a Tokenizer,
    /// Alternatives per token.
    k: usize,
    out: CompletionLogprobs,
    /// Character offset of the next token in the choice's text.
    offset: usize,
}

impl<'a> CompletionLogprobsBuilder<'a> {
    /// Entries with `k` alternatives each, the first token at character `offset`.
    pub(crate) fn new(tok: &'a Tokenizer, k: usize, offset: usize) -> Self {
        CompletionLogprobsBuilder {
            tok,
            k,
            out: CompletionLogprobs {
                tokens: Vec::new(),
                token_logprobs: Vec::new(),
                top_logprobs: Some(Vec::new()),
                text_offset: Some(Vec::new()),
            },
            offset,
        }
    }

    /// Adds a token with its log-prob and most likely alternatives (the token
    /// itself is added to them when missing, as OpenAI does); `None` for the
    /// first prompt token, which has none.
    pub(crate) fn push(&mut self, id: i64, logprob: Option<(f32, &[(i64, f32)])>) {
        let text = token_text(self.tok, id);
        let len = text.chars().count();
        self.out.tokens.push(text.clone());
        self.out
            .text_offset
            .get_or_insert_with(Vec::new)
            .push(self.offset);
        self.offset += len;
        let top = logprob.map(|(lp, top)| {
            let mut entries: Vec<(String, f32)> = top
                .iter()
                .take(self.k)
                .map(|&(t, l)| (token_text(self.tok, t), finite(l)))
                .collect();
            if !top.iter().take(self.k).any(|&(t, _)| t == id) {
                entries.push((text, finite(lp)));
            }
            TopLogprobs(entries)
        });
        self.out
            .token_logprobs
            .push(logprob.map_or(f32::NAN, |(lp, _)| finite(lp)));
        self.out.top_logprobs.get_or_insert_with(Vec::new).push(top);
    }

    /// The character offset after the last token.
    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    pub(crate) fn finish(self) -> CompletionLogprobs {
        self.out
    }
}

/// Chat log-prob entries of `ids` with `k` alternatives each.
pub(crate) fn chat_logprobs(
    tok: &Tokenizer,
    ids: &[i64],
    logprobs: &[f32],
    tops: &[Vec<(i64, f32)>],
    k: usize,
) -> ChatLogprobs {
    let content = ids
        .iter()
        .zip(logprobs)
        .enumerate()
        .map(|(i, (&id, &lp))| {
            let token = token_text(tok, id);
            let top_logprobs = tops
                .get(i)
                .map(|top| {
                    top.iter()
                        .take(k)
                        .map(|&(t, l)| {
                            let token = token_text(tok, t);
                            ChatTopLogprob {
                                bytes: token.as_bytes().to_vec(),
                                token,
                                logprob: finite(l),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            ChatTokenLogprob {
                bytes: token.as_bytes().to_vec(),
                token,
                logprob: finite(lp),
                top_logprobs,
            }
        })
        .collect();
    ChatLogprobs { content }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyrl_model::StopReason;

    fn stopped_by(stop: Option<&str>) -> Completion {
        Completion {
            token_ids: vec![],
            logprobs: vec![],
            stop_reason: StopReason::Stop,
            stop_match: stop.map(|s| StopMatch::String(s.into())),
            top_logprobs: vec![],
            prompt_logprobs: None,
            cached_prompt_tokens: 0,
        }
    }

    #[test]
    fn stop_strings_are_cut_unless_kept() {
        let c = stopped_by(Some("END"));
        let mut t = "the answer ENDx".to_string();
        truncate_at_stop(&mut t, &c, true);
        assert_eq!(t, "the answer ENDx");
        truncate_at_stop(&mut t, &c, false);
        assert_eq!(t, "the answer ");
        let mut t = "no stop".to_string();
        truncate_at_stop(&mut t, &stopped_by(None), false);
        assert_eq!(t, "no stop");
    }

    #[test]
    fn streams_hold_back_what_may_start_a_stop_string() {
        let dir = tempfile::tempdir().unwrap();
        skyrl_model::init_tiny_model(
            skyrl_model::Arch::Qwen2,
            skyrl_model::TinySize::Tiny,
            dir.path(),
            1,
        )
        .unwrap();
        let tok = Tokenizer::from_dir(dir.path()).unwrap();
        let ids = |t: &str| tok.encode(t, false).unwrap();
        let mut s = TextStream::new(stop_holdback(&["xyz".into()], false), true);
        let mut sent = String::new();
        for c in ["a", "b", "x", "y"] {
            s.push(&tok, &ids(c));
            sent += &s.release();
        }
        assert_eq!(sent, "ab", "`xy` may start the stop string");
        s.push(&tok, &ids("z"));
        assert_eq!(s.finish("ab"), "", "the stop string is never sent");
        // Without a stop string everything goes out at once; special tokens
        // are skipped.
        let mut s = TextStream::new(0, true);
        s.push(&tok, &ids("hi"));
        assert_eq!(s.release(), "hi");
        s.push(&tok, &[2]);
        assert_eq!(s.release(), "");
        assert_eq!(s.finish("hi!"), "!");
    }

    #[test]
    fn holdback_is_the_longest_stop_string_less_one() {
        let stop = vec!["ab".to_string(), "wxyz".to_string()];
        assert_eq!(stop_holdback(&stop, false), 3);
        assert_eq!(stop_holdback(&stop, true), 0);
        assert_eq!(stop_holdback(&[], false), 0);
    }
}
