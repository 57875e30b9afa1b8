//! The engine core: waiting and running sequences, admission, preemption and
//! one step of prefill + decode over the block pool.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use tch::Tensor;

use super::blocks::{chain_hash, BlockAllocator};
use super::forward::{forward_chunks, Chunk};
use super::kv::KvPool;
use super::parts::DecodeParts;
use super::rows::DecodeRow;
use super::sampler::{sample_rows, Row};
use super::sequence::Sequence;
use super::{EngineSettings, EngineStats, SeqId, SeqRequest, SeqUpdate};
use crate::error::{ModelError, Result};
use crate::intra_op;
use crate::model::CausalLm;
use crate::sampling::PromptTokenLogprob;
use crate::tokenizer::Tokenizer;

/// The pool's tensors and bookkeeping.
#[derive(Debug)]
struct Pool {
    kv: KvPool,
    blocks: BlockAllocator,
    /// The decode rows' keys and values, contiguous, per part of the batch.
    rows: DecodeParts,
}

/// Sequences in flight and the block pool (see the [module docs](super)).
#[derive(Debug)]
pub struct Core {
    settings: EngineSettings,
    pool: Option<Pool>,
    waiting: VecDeque<Sequence>,
    /// In admission order (the last is preempted first).
    running: Vec<Sequence>,
    next_id: u64,
    stats: EngineStats,
}

/// How a waiting sequence gets its KV at admission.
enum Plan {
    /// Prefill `tokens[computed..]` after reusing `cached` blocks.
    Prefill { cached: Vec<usize> },
    /// Same tokens as the sequence admitted at `leader` (index into the
    /// admitted list): share its blocks once it is prefilled.
    Fork { leader: usize },
}

impl Core {
    /// An empty core; the pool is allocated on the first step.
    pub fn new(settings: EngineSettings) -> Self {
        Core {
            settings,
            pool: None,
            waiting: VecDeque::new(),
            running: Vec::new(),
            next_id: 0,
            stats: EngineStats::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &EngineSettings {
        &self.settings
    }

    /// Whether sequences are waiting or running.
    pub fn has_unfinished(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    /// Counters and pool use.
    pub fn stats(&self) -> EngineStats {
        let mut s = self.stats.clone();
        if let Some(p) = &self.pool {
            s.kv_blocks_free = p.blocks.free();
            s.kv_blocks_cached = p.blocks.cached();
        }
        s.running = self.running.len();
        s.waiting = self.waiting.len();
        s
    }

    /// Forgets cached prefixes (blocks in use stay with their sequences).
    pub fn reset_prefix_cache(&mut self) {
        if let Some(p) = &mut self.pool {
            p.blocks.reset_cache();
        }
    }

    /// Frees the pool; refused while sequences are in flight.
    pub fn release_pool(&mut self) -> Result<()> {
        if self.has_unfinished() {
            return Err(ModelError::Input(format!(
                "cannot free the KV cache with {} sequences in flight",
                self.running.len() + self.waiting.len()
            )));
        }
        self.pool = None;
        Ok(())
    }

    /// Validates and queues `request`.
    pub fn submit(
        &mut self,
        model: &CausalLm,
        tokenizer: Option<&Tokenizer>,
        request: SeqRequest,
    ) -> Result<SeqId> {
        let params = request.params;
        params.validate()?;
        if !params.stop.is_empty() && tokenizer.is_none() {
            return Err(ModelError::Input(
                "stop strings need a tokenizer; construct the engine with one".into(),
            ));
        }
        let config = model.config();
        let prompt = request.prompt;
        if prompt.is_empty() {
            return Err(ModelError::Input("the prompt is empty".into()));
        }
        if let Some(&bad) = prompt.iter().find(|&&t| t < 0 || t >= config.vocab_size) {
            return Err(ModelError::Input(format!(
                "the prompt has token id {bad} outside the vocabulary [0, {})",
                config.vocab_size
            )));
        }
        let context = config.max_position_embeddings as usize;
        if prompt.len() >= context {
            return Err(ModelError::Input(format!(
                "the prompt has {} tokens; the model context is {context}",
                prompt.len()
            )));
        }
        let most = (prompt.len() + params.max_tokens).min(context);
        let have = self.settings.num_blocks(model).saturating_sub(1);
        if most.div_ceil(self.settings.block_size) > have {
            return Err(ModelError::Input(format!(
                "a sequence of {most} tokens needs {} KV blocks; the pool has {have}",
                most.div_ceil(self.settings.block_size)
            )));
        }
        let mut stop_ids: HashSet<i64> = params.stop_token_ids.iter().copied().collect();
        if !params.ignore_eos {
            stop_ids.extend(config.eos_ids());
            if let Some(id) = tokenizer.and_then(Tokenizer::eos_token_id) {
                stop_ids.insert(id);
            }
        }
        let id = SeqId(self.next_id);
        self.next_id += 1;
        self.waiting.push_back(Sequence {
            id,
            prompt,
            rng: request.stream.rng(),
            params,
            stop_ids: Arc::new(stop_ids),
            output: Vec::new(),
            logprobs: Vec::new(),
            top_logprobs: Vec::new(),
            prompt_logprobs: None,
            output_counts: Default::default(),
            blocks: Vec::new(),
            block_hashes: Vec::new(),
            computed: 0,
            cached_prompt_tokens: 0,
            done: None,
        });
        Ok(id)
    }

    /// Drops sequence `id` wherever it is.
    pub fn abort(&mut self, id: SeqId) {
        if let Some(i) = self.waiting.iter().position(|s| s.id == id) {
            let seq = self.waiting.remove(i).expect("index found");
            self.release(&seq);
        } else if let Some(i) = self.running.iter().position(|s| s.id == id) {
            let seq = self.running.remove(i);
            self.release(&seq);
        }
    }

    fn release(&mut self, seq: &Sequence) {
        if let Some(p) = &mut self.pool {
            for &b in &seq.blocks {
                p.blocks.release(b);
            }
        }
    }

    fn ensure_pool(&mut self, model: &CausalLm) -> Result<()> {
        if self.pool.is_none() {
            self.settings.validate(model)?;
            let n = self.settings.num_blocks(model);
            self.pool = Some(Pool {
                kv: KvPool::new(model, n, self.settings.block_size),
                blocks: BlockAllocator::new(n),
                rows: DecodeParts::default(),
            });
            self.stats.kv_blocks_total = n - 1;
        }
        Ok(())
    }

    /// One step (see [`crate::InferenceEngine::step`]).
    pub fn step(
        &mut self,
        model: &CausalLm,
        tokenizer: Option<&Tokenizer>,
    ) -> Result<Vec<SeqUpdate>> {
        self.ensure_pool(model)?;
        let out = self.try_step(model, tokenizer);
        if self.running.is_empty() {
            // Nothing decodes now: give the decode rows' memory back (on a
            // shared GPU the trainer needs it between rollouts).
            if let Some(p) = &mut self.pool {
                p.rows.clear();
            }
        }
        if out.is_err() {
            for seq in std::mem::take(&mut self.running) {
                self.release(&seq);
            }
            for seq in std::mem::take(&mut self.waiting) {
                self.release(&seq);
            }
        }
        out
    }

    fn try_step(
        &mut self,
        model: &CausalLm,
        tokenizer: Option<&Tokenizer>,
    ) -> Result<Vec<SeqUpdate>> {
        self.stats.steps += 1;
        let decoding = self.running.len();
        self.make_room_for_decode(decoding);
        let decoding = self.running.len();
        let (admitted, plans) = self.admit();
        let context = model.config().max_position_embeddings as usize;
        let mut rows: Vec<(usize, Tensor)> = Vec::new();
        // Decode: one token for every sequence that was running before this step.
        if decoding > 0 {
            let pool = self.pool.as_mut().expect("pool allocated");
            let decode_rows: Vec<DecodeRow<'_>> = self.running[..decoding]
                .iter()
                .map(|seq| DecodeRow {
                    id: seq.id,
                    token: seq.token_at(seq.computed),
                    position: seq.computed,
                    blocks: &seq.blocks,
                })
                .collect();
            let (logits, parts) = pool.rows.forward(model, &pool.kv, &decode_rows);
            if parts > 1 {
                self.stats.parallel_decode_steps += 1;
            }
            drop(decode_rows);
            for i in 0..decoding {
                self.running[i].computed += 1;
                rows.push((i, logits.get(i as i64)));
            }
            self.stats.decode_tokens += decoding as u64;
        }
        // Prefill the admitted leaders, then fork their siblings.
        let first_admitted = self.running.len();
        self.running.extend(admitted);
        let leaders: Vec<usize> = plans
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p, Plan::Prefill { .. }))
            .map(|(i, _)| i)
            .collect();
        let mut leader_logits: Vec<Option<Tensor>> = (0..plans.len()).map(|_| None).collect();
        if !leaders.is_empty() {
            let pool = &self.pool.as_ref().expect("pool allocated").kv;
            let chunks: Vec<Chunk<'_>> = leaders
                .iter()
                .map(|&i| {
                    let seq = &self.running[first_admitted + i];
                    Chunk {
                        tokens: (seq.computed..seq.len()).map(|p| seq.token_at(p)).collect(),
                        start: seq.computed,
                        blocks: &seq.blocks,
                        all_logits: seq.wants_prompt_logprobs(),
                    }
                })
                .collect();
            let fed: u64 = chunks.iter().map(|c| c.tokens.len() as u64).sum();
            self.stats.prefill_tokens_computed += fed;
            // Rows are padded to the longest chunk.
            let longest = chunks.iter().map(|c| c.tokens.len()).max().unwrap_or(0);
            // The LM head runs once over every chunk's last position, and
            // once per chunk that wants prompt logprobs over its positions.
            let head_rows = chunks
                .iter()
                .filter(|c| c.all_logits)
                .map(|c| c.tokens.len())
                .fold(chunks.len(), usize::max);
            let out = intra_op::run_sized(
                model,
                (chunks.len() * longest) as i64,
                head_rows as i64,
                || forward_chunks(model, pool, &chunks),
            );
            for (row, &i) in leaders.iter().enumerate() {
                let seq = &mut self.running[first_admitted + i];
                if let Some(all) = &out.all[row] {
                    seq.prompt_logprobs = Some(prompt_logprobs(seq, all));
                }
                seq.computed = seq.len();
                leader_logits[i] = Some(out.last.get(row as i64));
            }
        }
        for (i, plan) in plans.iter().enumerate() {
            if let Plan::Fork { leader } = plan {
                self.fork(first_admitted + *leader, first_admitted + i);
                leader_logits[i] = leader_logits[*leader].as_ref().map(Tensor::shallow_clone);
            }
        }
        for (i, logits) in leader_logits.into_iter().enumerate() {
            rows.push((
                first_admitted + i,
                logits.expect("every admitted row has logits"),
            ));
        }
        let pool = self.pool.as_ref().expect("pool allocated");
        let used = self.stats.kv_blocks_total - pool.blocks.available();
        self.stats.kv_blocks_peak_used = self.stats.kv_blocks_peak_used.max(used);
        self.sample(rows, tokenizer, context)
    }

    /// Frees a block for every running sequence whose next token starts a
    /// new block, preempting the newest sequences while none is left.
    fn make_room_for_decode(&mut self, decoding: usize) {
        let bs = self.settings.block_size;
        let mut i = 0;
        let mut decoding = decoding;
        while i < decoding {
            let needs = self.running[i].computed / bs >= self.running[i].blocks.len();
            if !needs {
                i += 1;
                continue;
            }
            let pool = self.pool.as_mut().expect("pool allocated");
            match pool.blocks.allocate() {
                Some(b) => {
                    self.running[i].blocks.push(b);
                    i += 1;
                }
                None => {
                    let victim = self.running.pop().expect("a running sequence");
                    decoding -= 1;
                    self.preempt(victim);
                }
            }
        }
    }

    /// Frees `seq`'s blocks and puts it first in line; it is recomputed
    /// (prompt and the tokens generated so far) when admitted again.
    fn preempt(&mut self, mut seq: Sequence) {
        self.release(&seq);
        if let Some(p) = &mut self.pool {
            // Its recomputed KV must not be mistaken for the row it had.
            p.rows.clear();
        }
        seq.blocks.clear();
        seq.block_hashes.clear();
        seq.computed = 0;
        self.stats.preemptions += 1;
        tracing::debug!(seq = seq.id.0, "preempted: KV pool exhausted");
        self.waiting.push_front(seq);
    }

    /// Takes waiting sequences (first come, first served) while
    /// `max_num_seqs`, the prefill token budget and free blocks allow.
    fn admit(&mut self) -> (Vec<Sequence>, Vec<Plan>) {
        let bs = self.settings.block_size;
        let caching = self.settings.enable_prefix_caching;
        let mut admitted: Vec<Sequence> = Vec::new();
        let mut plans = Vec::new();
        let mut budget = self.settings.max_num_batched_tokens;
        // Tokens of each admitted leader -> its index; blocks promised to forks.
        let mut leaders: HashMap<Vec<i64>, usize> = HashMap::new();
        let mut promised = 0;
        while let Some(seq) = self.waiting.front() {
            if self.running.len() + admitted.len() >= self.settings.max_num_seqs {
                break;
            }
            let pool = self.pool.as_mut().expect("pool allocated");
            let tokens = seq.tokens();
            let leader = if seq.wants_prompt_logprobs() {
                None
            } else {
                leaders.get(&tokens).copied()
            };
            // One block per sequence in flight stays free for their next tokens.
            let reserve = self.running.len() + admitted.len() + promised;
            let plan = match leader {
                Some(leader) => {
                    let partial = usize::from(tokens.len() % bs != 0);
                    if pool.blocks.available() < partial + reserve {
                        break;
                    }
                    promised += partial;
                    Plan::Fork { leader }
                }
                None => {
                    let cached = if caching && !seq.wants_prompt_logprobs() {
                        cached_prefix(&pool.blocks, &tokens, bs)
                    } else {
                        Vec::new()
                    };
                    let new_tokens = tokens.len() - cached.len() * bs;
                    let new_blocks = tokens.len().div_ceil(bs) - cached.len();
                    let unused_cached = cached
                        .iter()
                        .filter(|&&b| pool.blocks.refcount(b) == 0)
                        .count();
                    if !admitted.is_empty() && new_tokens > budget {
                        break;
                    }
                    if pool.blocks.available() < new_blocks + unused_cached + reserve {
                        break;
                    }
                    budget = budget.saturating_sub(new_tokens);
                    if !seq.wants_prompt_logprobs() {
                        leaders.insert(tokens, admitted.len());
                    }
                    Plan::Prefill { cached }
                }
            };
            let mut seq = self.waiting.pop_front().expect("front exists");
            if let Plan::Prefill { cached } = &plan {
                for &b in cached {
                    pool.blocks.retain(b);
                }
                seq.blocks = cached.clone();
                seq.computed = cached.len() * bs;
                seq.cached_prompt_tokens = seq.computed.min(seq.prompt.len());
                self.stats.prefill_tokens_reused += seq.computed as u64;
                while seq.blocks.len() < seq.len().div_ceil(bs) {
                    let b = pool.blocks.allocate().expect("availability checked");
                    seq.blocks.push(b);
                }
            }
            admitted.push(seq);
            plans.push(plan);
        }
        (admitted, plans)
    }

    /// Gives `follower` the prefilled blocks of `leader` (same tokens): full
    /// blocks shared, the partial last block copied.
    fn fork(&mut self, leader: usize, follower: usize) {
        let bs = self.settings.block_size;
        let pool = self.pool.as_mut().expect("pool allocated");
        let (blocks, computed) = {
            let l = &self.running[leader];
            (l.blocks.clone(), l.computed)
        };
        let full = computed / bs;
        let mut table = Vec::with_capacity(blocks.len());
        for &b in &blocks[..full] {
            pool.blocks.retain(b);
            table.push(b);
        }
        if full < blocks.len() {
            let copy = pool.blocks.allocate().expect("availability checked");
            pool.kv.copy_block(blocks[full], copy);
            table.push(copy);
        }
        let seq = &mut self.running[follower];
        self.stats.prefill_tokens_reused += seq.len() as u64;
        seq.cached_prompt_tokens = seq.prompt.len();
        seq.blocks = table;
        seq.computed = computed;
    }

    /// Samples one token for each `(running index, logits)` row, records it,
    /// registers newly full blocks, and retires finished sequences.
    fn sample(
        &mut self,
        rows: Vec<(usize, Tensor)>,
        tokenizer: Option<&Tokenizer>,
        context: usize,
    ) -> Result<Vec<SeqUpdate>> {
        let uniforms: Vec<f64> = rows
            .iter()
            .map(|(i, _)| rand::Rng::random::<f64>(&mut self.running[*i].rng))
            .collect();
        let inputs: Vec<Row<'_>> = rows
            .iter()
            .map(|(i, logits)| Row {
                seq: &self.running[*i],
                logits,
            })
            .collect();
        let sampled = sample_rows(&inputs, &uniforms);
        drop(inputs);
        let mut updates = Vec::with_capacity(rows.len());
        for ((i, _), s) in rows.iter().zip(sampled) {
            let seq = &mut self.running[*i];
            seq.push(s.token, s.logprob, s.top.clone(), tokenizer, context)?;
            updates.push(SeqUpdate {
                id: seq.id,
                new_token_ids: vec![s.token],
                new_logprobs: vec![s.logprob],
                new_top_logprobs: s.top.into_iter().collect(),
                finished: None,
            });
        }
        if self.settings.enable_prefix_caching {
            self.register_full_blocks();
        }
        let mut finished = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            if self.running[i].done.is_some() {
                let seq = self.running.remove(i);
                self.release(&seq);
                finished.push(seq);
            } else {
                i += 1;
            }
        }
        for seq in finished {
            if let Some(u) = updates.iter_mut().find(|u| u.id == seq.id) {
                u.finished = Some(seq.into_completion());
            }
        }
        Ok(updates)
    }

    fn register_full_blocks(&mut self) {
        let bs = self.settings.block_size;
        let pool = self.pool.as_mut().expect("pool allocated");
        for seq in &mut self.running {
            let full = seq.computed / bs;
            while seq.block_hashes.len() < full {
                let i = seq.block_hashes.len();
                let tokens: Vec<i64> = (i * bs..(i + 1) * bs).map(|p| seq.token_at(p)).collect();
                let parent = seq.block_hashes.last().copied().unwrap_or(0);
                let hash = chain_hash(parent, &tokens);
                pool.blocks.register(seq.blocks[i], hash, &tokens);
                seq.block_hashes.push(hash);
            }
        }
    }
}

/// Cached blocks holding the longest prefix of `tokens` in whole blocks,
/// leaving at least the last token to compute.
fn cached_prefix(blocks: &BlockAllocator, tokens: &[i64], bs: usize) -> Vec<usize> {
    let usable = (tokens.len() - 1) / bs;
    let mut found = Vec::new();
    let mut parent = 0;
    for chunk in tokens[..usable * bs].chunks_exact(bs) {
        let hash = chain_hash(parent, chunk);
        match blocks.lookup(hash, chunk) {
            Some(b) => found.push(b),
            None => break,
        }
        parent = hash;
    }
    found
}

/// Log-probs of prompt tokens `1..` from the logits of positions `0..`.
fn prompt_logprobs(seq: &Sequence, all: &Tensor) -> Vec<PromptTokenLogprob> {
    let k = seq.params.prompt_logprobs.unwrap_or(0) as i64;
    let n = seq.prompt.len() as i64;
    if n < 2 {
        return Vec::new();
    }
    let logp = all.narrow(0, 0, n - 1).log_softmax(-1, tch::Kind::Float);
    let targets = Tensor::from_slice(&seq.prompt[1..])
        .to_device(logp.device())
        .unsqueeze(-1);
    let chosen_t = logp.gather(-1, &targets, false);
    // vLLM's rank: 1 + the tokens more likely than the prompt's.
    let ranks = Vec::<i64>::try_from(
        (logp
            .gt_tensor(&chosen_t)
            .sum_dim_intlist(-1, false, tch::Kind::Int64)
            + 1)
        .to_device(tch::Device::Cpu),
    )
    .unwrap_or_default();
    let chosen = Vec::<f32>::try_from(chosen_t.squeeze_dim(-1).to_device(tch::Device::Cpu))
        .unwrap_or_default();
    let top = super::sampler::top_k_rows(&logp, k);
    seq.prompt[1..]
        .iter()
        .zip(chosen)
        .zip(ranks)
        .zip(top)
        .map(|(((&token, logprob), rank), top)| PromptTokenLogprob {
            token,
            logprob,
            rank: rank as usize,
            top,
        })
        .collect()
}
