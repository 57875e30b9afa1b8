//! The decode batch's keys and values kept contiguous per row between steps.
//!
//! Without a paged-attention kernel, attending over the block pool means
//! gathering every row's slots into a dense tensor, for every layer, on every
//! step: as much memory traffic as attention itself. Decode batches change
//! rarely (a sequence joins or leaves every few steps at most), so the engine
//! keeps the running rows' keys and values in `[B, Hkv, capacity, D]` tensors,
//! the static engine's layout: a decode step appends one column (to these rows
//! and to the pool, which stays authoritative for prefix caching, forks and
//! preemption) and attends over a view. The rows are rebuilt from the pool
//! only when the batch changes: rows that stay are carried over, rows that
//! join are gathered. This costs memory for a second copy of the running
//! sequences' KV, at most `max_num_seqs x capacity` positions.

use tch::{Kind, Tensor};

use super::kv::KvPool;
use super::SeqId;
use crate::kv_cache::LayerKv;
use crate::layers::AttnMask;
use crate::model::CausalLm;

/// Positions added beyond the longest row when the capacity must grow.
const CAPACITY_STEP: usize = 128;

/// One decode row: its sequence, tokens already in the cache, block table.
pub struct DecodeRow<'a> {
    pub id: SeqId,
    /// The token to feed and its position (= the positions cached so far).
    pub token: i64,
    pub position: usize,
    pub blocks: &'a [usize],
}

/// Contiguous keys and values of the decode rows of the last step.
#[derive(Debug, Default)]
pub struct RowCache {
    ids: Vec<SeqId>,
    /// Cached positions of each row.
    lens: Vec<usize>,
    capacity: usize,
    /// Per layer, `[B, Hkv, capacity, D]`.
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
}

impl RowCache {
    /// Makes the cache hold exactly `rows`, in order, with room for one more
    /// position each: keeps it when it already does, carries over rows that
    /// stay, and gathers the others from `pool`.
    fn sync(&mut self, pool: &KvPool, rows: &[DecodeRow<'_>]) {
        let longest = rows.iter().map(|r| r.position).max().unwrap_or(0);
        let same_rows = self.ids.len() == rows.len()
            && rows
                .iter()
                .zip(self.ids.iter().zip(&self.lens))
                .all(|(r, (id, len))| r.id == *id && r.position == *len);
        if same_rows && longest < self.capacity {
            return;
        }
        let capacity = if longest < self.capacity {
            self.capacity
        } else {
            longest + CAPACITY_STEP
        };
        // Rows carried over: a leading run of the new rows that sit, in the
        // same order and with the same length, in the old cache.
        let mut carried = Vec::new();
        let mut from = 0;
        for r in rows {
            let Some(offset) = self.ids[from..].iter().position(|id| *id == r.id) else {
                break;
            };
            let old = from + offset;
            if self.lens[old] != r.position {
                break;
            }
            carried.push(old as i64);
            from = old + 1;
        }
        let gathered_rows = &rows[carried.len()..];
        let device = pool.device();
        let carried_index = Tensor::from_slice(&carried).to_device(device);
        let bs = pool.block_size();
        let read: Vec<i64> = gathered_rows
            .iter()
            .flat_map(|r| {
                (0..capacity).map(move |k| {
                    if k < r.position {
                        (r.blocks[k / bs] * bs + k % bs) as i64
                    } else {
                        (k % bs) as i64
                    }
                })
            })
            .collect();
        let read = Tensor::from_slice(&read).to_device(device);
        let rebuild = |old: &[Tensor], pool_layers: &[Tensor]| -> Vec<Tensor> {
            old.iter()
                .map(Some)
                .chain(std::iter::repeat(None))
                .zip(pool_layers)
                .map(|(old, pool_layer)| {
                    let mut parts = Vec::with_capacity(2);
                    if !carried.is_empty() {
                        let old = old.expect("carried rows come from an old cache");
                        let kept = old.index_select(0, &carried_index);
                        let keep = kept.size()[2].min(capacity as i64);
                        let part = if keep == capacity as i64 {
                            kept
                        } else {
                            let s = kept.size();
                            let grown = Tensor::zeros(
                                [s[0], s[1], capacity as i64, s[3]],
                                (kept.kind(), kept.device()),
                            );
                            grown.narrow(2, 0, keep).copy_(&kept.narrow(2, 0, keep));
                            grown
                        };
                        parts.push(part);
                    }
                    if !gathered_rows.is_empty() {
                        let s = pool_layer.size();
                        let part = pool_layer
                            .index_select(0, &read)
                            .view([gathered_rows.len() as i64, capacity as i64, s[1], s[2]])
                            .permute([0, 2, 1, 3])
                            .contiguous();
                        parts.push(part);
                    }
                    if parts.len() == 1 {
                        parts.pop().expect("one part")
                    } else {
                        Tensor::cat(&parts, 0)
                    }
                })
                .collect()
        };
        let keys = rebuild(&self.keys, pool.keys());
        let values = rebuild(&self.values, pool.values());
        self.keys = keys;
        self.values = values;
        self.capacity = capacity;
        self.ids = rows.iter().map(|r| r.id).collect();
        self.lens = rows.iter().map(|r| r.position).collect();
    }
}

/// One decode step of `rows` (each feeds one token): writes their keys and
/// values into `pool` and `cache`, returns `[B, V]` fp32 logits.
pub fn forward_decode(
    model: &CausalLm,
    pool: &KvPool,
    cache: &mut RowCache,
    rows: &[DecodeRow<'_>],
) -> Tensor {
    cache.sync(pool, rows);
    let bs = pool.block_size();
    let device = model.device();
    let b = rows.len() as i64;
    let heads = model.config().kv_heads();
    let capacity = cache.capacity as i64;
    let keys_len = rows.iter().map(|r| r.position + 1).max().unwrap_or(1) as i64;
    let tensor = |v: Vec<i64>| Tensor::from_slice(&v).to_device(device);
    let ids = tensor(rows.iter().map(|r| r.token).collect()).view([b, 1]);
    let positions = tensor(rows.iter().map(|r| r.position as i64).collect()).view([b, 1]);
    let pool_write = tensor(
        rows.iter()
            .map(|r| (r.blocks[r.position / bs] * bs + r.position % bs) as i64)
            .collect(),
    );
    let row_write = tensor(
        rows.iter()
            .enumerate()
            .flat_map(|(i, r)| {
                (0..heads).map(move |h| (i as i64 * heads + h) * capacity + r.position as i64)
            })
            .collect(),
    );
    // Row b sees keys 0..=position_b.
    let ends = tensor(rows.iter().map(|r| r.position as i64 + 1).collect()).view([b, 1, 1, 1]);
    let k = Tensor::arange(keys_len, (Kind::Int64, device)).view([1, 1, 1, keys_len]);
    let mask = AttnMask::from_bool(&k.lt_tensor(&ends), model.kind());
    let mut store: Vec<RowLayer> = cache
        .keys
        .iter()
        .zip(&cache.values)
        .zip(pool.keys().iter().zip(pool.values()))
        .map(|((rk, rv), (pk, pv))| RowLayer {
            row_keys: rk.shallow_clone(),
            row_values: rv.shallow_clone(),
            pool_keys: pk.shallow_clone(),
            pool_values: pv.shallow_clone(),
            pool_write: pool_write.shallow_clone(),
            row_write: row_write.shallow_clone(),
            keys_len,
        })
        .collect();
    let hidden = model.forward_hidden(&ids, &positions, &mask, Some(&mut store));
    for len in &mut cache.lens {
        *len += 1;
    }
    model
        .logits(&hidden.view([b, hidden.size()[2]]))
        .to_kind(Kind::Float)
}

struct RowLayer {
    row_keys: Tensor,
    row_values: Tensor,
    pool_keys: Tensor,
    pool_values: Tensor,
    pool_write: Tensor,
    row_write: Tensor,
    keys_len: i64,
}

impl RowLayer {
    fn write(&self, rows: &Tensor, pool: &Tensor, new: &Tensor) -> Tensor {
        let s = new.size();
        let (b, h, d) = (s[0], s[1], s[3]);
        let _ = pool
            .shallow_clone()
            .index_copy_(0, &self.pool_write, &new.reshape([b, h, d]));
        let capacity = rows.size()[2];
        let _ = rows.view([b * h * capacity, d]).index_copy_(
            0,
            &self.row_write,
            &new.reshape([b * h, d]),
        );
        rows.narrow(2, 0, self.keys_len)
    }
}

impl LayerKv for RowLayer {
    fn append(&mut self, k: &Tensor, v: &Tensor) -> (Tensor, Tensor) {
        (
            self.write(&self.row_keys, &self.pool_keys, k),
            self.write(&self.row_values, &self.pool_values, v),
        )
    }
}
