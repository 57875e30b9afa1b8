//! Seeded workload generation and small statistics helpers.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use skyrl_model::{CausalLm, SamplingParams};

/// `count` random prompts of `len` tokens, ids in `3..min(vocab, 32000)` (past
/// the special ids of the built-in tokenizer, inside any real tokenizer's range).
pub fn random_prompts(model: &CausalLm, count: usize, len: usize, seed: u64) -> Vec<Vec<i64>> {
    let hi = model.config().vocab_size.min(32_000);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| (0..len).map(|_| rng.random_range(3..hi)).collect())
        .collect()
}

/// Each prompt `n` times in a row: a GRPO group's samples, as the generator sends them.
pub fn repeat_each(prompts: &[Vec<i64>], n: usize) -> Vec<Vec<i64>> {
    prompts
        .iter()
        .flat_map(|p| std::iter::repeat_n(p.clone(), n))
        .collect()
}

/// Temperature-1 sampling of exactly `max_tokens` tokens (EOS ignored).
pub fn full_length(max_tokens: usize, seed: u64) -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        max_tokens,
        ignore_eos: true,
        seed: Some(seed),
        ..Default::default()
    }
}

/// A seeded generator for anything else a workload draws.
pub fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// The `q`-quantile (0..=1) of `values` by nearest rank; 0 when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
