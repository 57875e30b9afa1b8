//! The KV pool tensors and the per-forward view attention writes through.
//!
//! Each layer holds keys and values as `[num_blocks * block_size, Hkv, D]`
//! (one row per token slot). A forward call writes its new tokens' keys and
//! values at their slots, then gathers every row's slots (padded with slots
//! of block 0, masked out) into `[B, Hkv, S, D]` for attention.

use tch::Tensor;

use crate::kv_cache::LayerKv;
use crate::model::CausalLm;

/// Keys and values of every layer, in token slots.
#[derive(Debug)]
pub struct KvPool {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    block_size: usize,
}

impl KvPool {
    /// Allocates `num_blocks` blocks for `model` (uninitialised memory: CPU
    /// pages are touched only when written); block 0 is zeroed.
    pub fn new(model: &CausalLm, num_blocks: usize, block_size: usize) -> Self {
        let c = model.config();
        let slots = (num_blocks * block_size) as i64;
        let shape = [slots, c.kv_heads(), c.head_dim()];
        let options = (model.kind(), model.device());
        let alloc = || {
            (0..c.num_hidden_layers)
                .map(|_| {
                    let t = Tensor::empty(shape, options);
                    let _ = t.narrow(0, 0, block_size as i64).zero_();
                    t
                })
                .collect::<Vec<_>>()
        };
        KvPool {
            keys: alloc(),
            values: alloc(),
            block_size,
        }
    }

    /// Tokens per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Per layer, keys `[slots, Hkv, D]`.
    pub fn keys(&self) -> &[Tensor] {
        &self.keys
    }

    /// Per layer, values `[slots, Hkv, D]`.
    pub fn values(&self) -> &[Tensor] {
        &self.values
    }

    /// Where the pool lives.
    pub fn device(&self) -> tch::Device {
        self.keys[0].device()
    }

    /// Copies block `src` into block `dst` in every layer (copy-on-write of a
    /// shared partial block).
    pub fn copy_block(&mut self, src: usize, dst: usize) {
        let bs = self.block_size as i64;
        for t in self.keys.iter_mut().chain(self.values.iter_mut()) {
            let from = t.narrow(0, src as i64 * bs, bs);
            t.narrow(0, dst as i64 * bs, bs).copy_(&from);
        }
    }

    /// A view for one forward: new tokens go to `write_slots [B*T]`, row `b`
    /// attends over `read_slots [B, S]`.
    pub fn batch(&self, write_slots: &[i64], read_slots: &[i64], rows: i64) -> Vec<PagedLayer> {
        let device = self.keys[0].device();
        let to_tensor = |v: &[i64]| Tensor::from_slice(v).to_device(device);
        let write = to_tensor(write_slots);
        let read = to_tensor(read_slots);
        let s = read_slots.len() as i64 / rows.max(1);
        self.keys
            .iter()
            .zip(&self.values)
            .map(|(k, v)| PagedLayer {
                keys: k.shallow_clone(),
                values: v.shallow_clone(),
                write: write.shallow_clone(),
                read: read.shallow_clone(),
                rows,
                keys_per_row: s,
            })
            .collect()
    }
}

/// One layer of the pool as one forward call sees it (see [`KvPool::batch`]).
pub struct PagedLayer {
    keys: Tensor,
    values: Tensor,
    write: Tensor,
    read: Tensor,
    rows: i64,
    keys_per_row: i64,
}

impl PagedLayer {
    fn store_and_gather(&mut self, pool: &mut Tensor, new: &Tensor) -> Tensor {
        let s = new.size();
        let (b, h, t, d) = (s[0], s[1], s[2], s[3]);
        let flat = new.permute([0, 2, 1, 3]).reshape([b * t, h, d]);
        let _ = pool.index_copy_(0, &self.write, &flat);
        pool.index_select(0, &self.read)
            .view([self.rows, self.keys_per_row, h, d])
            .permute([0, 2, 1, 3])
    }
}

impl LayerKv for PagedLayer {
    fn append(&mut self, k: &Tensor, v: &Tensor) -> (Tensor, Tensor) {
        let mut keys = self.keys.shallow_clone();
        let mut values = self.values.shallow_clone();
        (
            self.store_and_gather(&mut keys, k),
            self.store_and_gather(&mut values, v),
        )
    }
}
