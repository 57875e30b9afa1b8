//! One batched forward over the pool: each row feeds its next tokens (a whole
//! uncached prompt at prefill, one token at decode), writes their keys and
//! values into its blocks, and attends over everything it has so far.

use tch::{Kind, Tensor};

use super::kv::KvPool;
use crate::layers::AttnMask;
use crate::model::CausalLm;

/// What one row of a forward feeds.
pub struct Chunk<'a> {
    /// Tokens to feed, at positions `start..start + tokens.len()`.
    pub tokens: Vec<i64>,
    pub start: usize,
    /// The row's block table (covers every position up to the last fed one).
    pub blocks: &'a [usize],
    /// Also return the logits of every fed position.
    pub all_logits: bool,
}

/// Logits of a forward.
pub struct ForwardOut {
    /// `[B, V]` fp32 logits of each row's last fed position.
    pub last: Tensor,
    /// `[T_b, V]` fp32 logits of every fed position, for rows that asked.
    pub all: Vec<Option<Tensor>>,
}

fn slot(blocks: &[usize], position: usize, bs: usize) -> i64 {
    (blocks[position / bs] * bs + position % bs) as i64
}

/// Runs `chunks` through `model`, reading and writing `pool`.
pub fn forward_chunks(model: &CausalLm, pool: &KvPool, chunks: &[Chunk<'_>]) -> ForwardOut {
    let bs = pool.block_size();
    let b = chunks.len();
    let t = chunks.iter().map(|c| c.tokens.len()).max().unwrap_or(1);
    let s = chunks
        .iter()
        .map(|c| c.start + c.tokens.len())
        .max()
        .unwrap_or(1);
    let mut ids = Vec::with_capacity(b * t);
    let mut positions = Vec::with_capacity(b * t);
    let mut query_at = Vec::with_capacity(b * t);
    let mut write = Vec::with_capacity(b * t);
    let mut read = Vec::with_capacity(b * s);
    let mut ends = Vec::with_capacity(b);
    let mut last_rows = Vec::with_capacity(b);
    for (row, c) in chunks.iter().enumerate() {
        let n = c.tokens.len();
        let end = c.start + n;
        for j in 0..t {
            let p = c.start + j;
            query_at.push(p as i64);
            if j < n {
                ids.push(c.tokens[j]);
                positions.push(p as i64);
                write.push(slot(c.blocks, p, bs));
            } else {
                // Padding: a valid id at position 0, written into block 0.
                ids.push(0);
                positions.push(0);
                write.push((j % bs) as i64);
            }
        }
        read.extend((0..s).map(|k| {
            if k < end {
                slot(c.blocks, k, bs)
            } else {
                (k % bs) as i64
            }
        }));
        ends.push(end as i64);
        last_rows.push((row * t + n - 1) as i64);
    }
    let device = model.device();
    let (b, t, s) = (b as i64, t as i64, s as i64);
    let tensor = |v: &[i64]| Tensor::from_slice(v).to_device(device);
    let ids = tensor(&ids).view([b, t]);
    let positions = tensor(&positions).view([b, t]);
    // Query at absolute position q sees key k when k <= q and k < its row's end.
    let q = tensor(&query_at).view([b, t, 1]);
    let k = Tensor::arange(s, (Kind::Int64, device)).view([1, 1, s]);
    let ends = tensor(&ends).view([b, 1, 1]);
    let allowed = k
        .le_tensor(&q)
        .logical_and(&k.lt_tensor(&ends))
        .unsqueeze(1);
    let mask = AttnMask::from_bool(&allowed, model.kind());
    let mut kv = pool.batch(&write, &read, b);
    let hidden = model.forward_hidden(&ids, &positions, &mask, Some(&mut kv));
    let h = hidden.size()[2];
    let flat = hidden.view([b * t, h]);
    let last = model
        .logits(&flat.index_select(0, &tensor(&last_rows)))
        .to_kind(Kind::Float);
    let all = chunks
        .iter()
        .enumerate()
        .map(|(row, c)| {
            c.all_logits.then(|| {
                model
                    .logits(&hidden.get(row as i64).narrow(0, 0, c.tokens.len() as i64))
                    .to_kind(Kind::Float)
            })
        })
        .collect();
    ForwardOut { last, all }
}
