//! The static-batch engine (the built-in engine before paged KV): left-padded
//! prefill of a whole batch into one contiguous KV cache, then one token per
//! step until every row is done; finished rows are dropped from the batch.
//! Kept as the reference the paged engine is tested and benchmarked against.

use std::collections::HashSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::{Kind, Tensor};

use crate::engine::SampleStream;
use crate::error::{ModelError, Result};
use crate::kv_cache::KvCache;
use crate::layers::AttnMask;
use crate::model::{bool_mask, positions_from_mask, CausalLm};
use crate::sampling::{sample_next, Completion, SamplingParams, StopMatch, StopReason};
use crate::tokenizer::Tokenizer;

/// Generates one completion per prompt, in batches of at most `max_batch`.
///
/// With `params.seed`, prompt `i` samples from its own ChaCha8 stream seeded by
/// `(seed, i)`, so results are reproducible for the same inputs and batch size.
/// Stop strings need `tokenizer` (matched on the decoded completion, special
/// tokens skipped); stop ids are `params.stop_token_ids` plus the EOS ids of the
/// model config and tokenizer unless `params.ignore_eos`.
pub fn generate(
    model: &CausalLm,
    tokenizer: Option<&Tokenizer>,
    prompts: &[Vec<i64>],
    params: &SamplingParams,
    max_batch: usize,
) -> Result<Vec<Completion>> {
    let streams = SampleStream::sequence(params.seed, prompts.len());
    generate_with_streams(model, tokenizer, prompts, &streams, params, max_batch)
}

/// Generates one completion per prompt, prompt `i` sampling from `streams[i]`
/// (`params.seed` is ignored), in batches of at most `max_batch`.
pub fn generate_with_streams(
    model: &CausalLm,
    tokenizer: Option<&Tokenizer>,
    prompts: &[Vec<i64>],
    streams: &[SampleStream],
    params: &SamplingParams,
    max_batch: usize,
) -> Result<Vec<Completion>> {
    params.validate()?;
    if params.min_tokens > 0 || params.has_penalties() {
        return Err(ModelError::Input(
            "min_tokens and penalties need the paged engine (InferenceEngine)".into(),
        ));
    }
    if streams.len() != prompts.len() {
        return Err(ModelError::Input(format!(
            "{} prompts but {} sampling streams",
            prompts.len(),
            streams.len()
        )));
    }
    if !params.stop.is_empty() && tokenizer.is_none() {
        return Err(ModelError::Input(
            "stop strings need a tokenizer; construct the engine with one".into(),
        ));
    }
    let config = model.config();
    for (i, p) in prompts.iter().enumerate() {
        if p.is_empty() {
            return Err(ModelError::Input(format!("prompt {i} is empty")));
        }
        if let Some(&bad) = p.iter().find(|&&t| t < 0 || t >= config.vocab_size) {
            return Err(ModelError::Input(format!(
                "prompt {i} has token id {bad} outside the vocabulary [0, {})",
                config.vocab_size
            )));
        }
        if p.len() as i64 >= config.max_position_embeddings {
            return Err(ModelError::Input(format!(
                "prompt {i} has {} tokens; the model context is {}",
                p.len(),
                config.max_position_embeddings
            )));
        }
    }
    let mut stop_ids: HashSet<i64> = params.stop_token_ids.iter().copied().collect();
    if !params.ignore_eos {
        stop_ids.extend(config.eos_ids());
        if let Some(id) = tokenizer.and_then(Tokenizer::eos_token_id) {
            stop_ids.insert(id);
        }
    }
    let pad = tokenizer
        .and_then(Tokenizer::pad_token_id)
        .or(config.pad_token_id)
        .unwrap_or(0);
    let job = Job {
        model,
        tokenizer,
        params,
        stop_ids,
        pad,
    };
    let _guard = tch::no_grad_guard();
    let mut out = Vec::with_capacity(prompts.len());
    let size = max_batch.max(1);
    for (chunk, chunk_streams) in prompts.chunks(size).zip(streams.chunks(size)) {
        let rngs = chunk_streams
            .iter()
            .map(|s| stream_rng(s.seed, s.index))
            .collect();
        out.extend(job.run_batch(chunk, rngs)?);
    }
    Ok(out)
}

fn stream_rng(seed: u64, index: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    rng
}

struct Job<'a> {
    model: &'a CausalLm,
    tokenizer: Option<&'a Tokenizer>,
    params: &'a SamplingParams,
    stop_ids: HashSet<i64>,
    pad: i64,
}

/// Per-sequence decoding state.
struct Sequence {
    tokens: Vec<i64>,
    logprobs: Vec<f32>,
    rng: ChaCha8Rng,
    prompt_len: usize,
    done: Option<(StopReason, Option<StopMatch>)>,
}

impl Job<'_> {
    fn run_batch(&self, prompts: &[Vec<i64>], rngs: Vec<ChaCha8Rng>) -> Result<Vec<Completion>> {
        let model = self.model;
        let device = model.device();
        let config = model.config();
        let mut seqs: Vec<Sequence> = prompts
            .iter()
            .zip(rngs)
            .map(|(p, rng)| Sequence {
                tokens: Vec::new(),
                logprobs: Vec::new(),
                rng,
                prompt_len: p.len(),
                done: None,
            })
            .collect();
        if self.params.max_tokens == 0 {
            return Ok(seqs
                .into_iter()
                .map(|s| finish(s, StopReason::Length, None))
                .collect());
        }
        let b = prompts.len() as i64;
        let l = prompts.iter().map(Vec::len).max().unwrap_or(0) as i64;
        let mut ids = Vec::with_capacity((b * l) as usize);
        let mut mask = Vec::with_capacity((b * l) as usize);
        for p in prompts {
            let padding = l as usize - p.len();
            ids.extend(std::iter::repeat_n(self.pad, padding).chain(p.iter().copied()));
            mask.extend(
                std::iter::repeat_n(false, padding).chain(std::iter::repeat_n(true, p.len())),
            );
        }
        let ids = Tensor::from_slice(&ids).view([b, l]).to_device(device);
        let mut key_mask = Tensor::from_slice(&mask).view([b, l]).to_device(device);
        let positions = positions_from_mask(&key_mask);
        let capacity = l + self.params.max_tokens as i64;
        let mut cache = KvCache::new(
            config.num_hidden_layers,
            b,
            config.kv_heads(),
            capacity,
            config.head_dim(),
            model.kind(),
            device,
        );
        let attn = AttnMask::from_bool(&bool_mask(&key_mask, l, 0), model.kind());
        let hidden = model.forward_hidden(&ids, &positions, &attn, Some(&mut cache));
        let mut logits = model.logits(&hidden.narrow(1, l - 1, 1).squeeze_dim(1));
        let mut next_pos = positions.narrow(1, l - 1, 1).squeeze_dim(1) + 1;
        // Rows of the current batch -> index into `seqs`.
        let mut active: Vec<usize> = (0..seqs.len()).collect();
        loop {
            let uniforms: Vec<f64> = active.iter().map(|&i| seqs[i].rng.random()).collect();
            let (tokens, logprobs) = sample_next(&logits, self.params, &uniforms);
            let tokens_cpu = Vec::<i64>::try_from(tokens.to_device(tch::Device::Cpu))?;
            let logprobs_cpu = Vec::<f32>::try_from(logprobs.to_device(tch::Device::Cpu))?;
            for (row, &i) in active.iter().enumerate() {
                let seq = &mut seqs[i];
                seq.tokens.push(tokens_cpu[row]);
                seq.logprobs.push(logprobs_cpu[row]);
                seq.done = self.check_stop(seq, config.max_position_embeddings)?;
            }
            let keep: Vec<i64> = (0..active.len() as i64)
                .filter(|&row| seqs[active[row as usize]].done.is_none())
                .collect();
            if keep.is_empty() {
                break;
            }
            let mut step_tokens = tokens;
            if keep.len() < active.len() {
                let rows = Tensor::from_slice(&keep).to_device(device);
                cache.select_rows(&rows);
                key_mask = key_mask.index_select(0, &rows);
                next_pos = next_pos.index_select(0, &rows);
                step_tokens = step_tokens.index_select(0, &rows);
                active = keep.iter().map(|&row| active[row as usize]).collect();
            }
            let n = active.len() as i64;
            key_mask = Tensor::cat(&[&key_mask, &Tensor::ones([n, 1], (Kind::Bool, device))], 1);
            let attn = AttnMask::from_bool(&bool_mask(&key_mask, 1, cache.len()), model.kind());
            let hidden = model.forward_hidden(
                &step_tokens.view([n, 1]),
                &next_pos.view([n, 1]),
                &attn,
                Some(&mut cache),
            );
            logits = model.logits(&hidden.squeeze_dim(1));
            next_pos += 1;
        }
        Ok(seqs
            .into_iter()
            .map(|mut s| {
                let (reason, matched) = s.done.take().unwrap_or((StopReason::Length, None));
                finish(s, reason, matched)
            })
            .collect())
    }

    fn check_stop(
        &self,
        seq: &Sequence,
        context: i64,
    ) -> Result<Option<(StopReason, Option<StopMatch>)>> {
        let last = *seq.tokens.last().expect("a token was just pushed");
        if self.stop_ids.contains(&last) {
            return Ok(Some((StopReason::Stop, Some(StopMatch::Token(last)))));
        }
        if !self.params.stop.is_empty() {
            let tokenizer = self.tokenizer.expect("checked in generate");
            let text = tokenizer.decode(&seq.tokens, true)?;
            if let Some(s) = self.params.stop.iter().find(|s| text.contains(s.as_str())) {
                return Ok(Some((StopReason::Stop, Some(StopMatch::String(s.clone())))));
            }
        }
        if seq.tokens.len() >= self.params.max_tokens
            || (seq.prompt_len + seq.tokens.len()) as i64 >= context
        {
            return Ok(Some((StopReason::Length, None)));
        }
        Ok(None)
    }
}

fn finish(seq: Sequence, stop_reason: StopReason, stop_match: Option<StopMatch>) -> Completion {
    Completion {
        token_ids: seq.tokens,
        logprobs: seq.logprobs,
        stop_reason,
        stop_match,
        top_logprobs: Vec::new(),
        prompt_logprobs: None,
        cached_prompt_tokens: 0,
    }
}
