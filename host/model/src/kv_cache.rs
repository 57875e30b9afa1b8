//! Key/value caches for incremental decoding: the traits attention writes
//! through, and the contiguous preallocated cache of the static-batch engine
//! (the paged pool lives in [`crate::paged`]).

use tch::{Device, Kind, Tensor};

/// One layer's key/value store as attention sees it.
pub trait LayerKv {
    /// Stores the new `k, v [B, Hkv, T, D]` and returns the keys and values
    /// every query of this call attends over, `[B, Hkv, S, D]`.
    fn append(&mut self, k: &Tensor, v: &Tensor) -> (Tensor, Tensor);
}

/// Per-layer key/value stores of a batch.
pub trait KvStore {
    /// The store of layer `i`.
    fn layer_kv(&mut self, i: usize) -> &mut dyn LayerKv;
}

/// One store per layer, in layer order.
impl<L: LayerKv> KvStore for Vec<L> {
    fn layer_kv(&mut self, i: usize) -> &mut dyn LayerKv {
        &mut self[i]
    }
}

/// Keys and values of one layer: `[B, Hkv, capacity, D]`, the first `len` columns filled.
#[derive(Debug)]
pub struct LayerCache {
    keys: Tensor,
    values: Tensor,
    len: i64,
}

impl LayerCache {
    fn new(
        batch: i64,
        kv_heads: i64,
        capacity: i64,
        head_dim: i64,
        kind: Kind,
        device: Device,
    ) -> Self {
        let shape = [batch, kv_heads, capacity, head_dim];
        LayerCache {
            keys: Tensor::zeros(shape, (kind, device)),
            values: Tensor::zeros(shape, (kind, device)),
            len: 0,
        }
    }
}

impl LayerKv for LayerCache {
    /// Writes `k, v [B, Hkv, T, D]` after the filled columns and returns all filled
    /// keys and values `[B, Hkv, len + T, D]`.
    ///
    /// # Panics
    /// When the capacity is exceeded (the engine sizes the cache up front).
    fn append(&mut self, k: &Tensor, v: &Tensor) -> (Tensor, Tensor) {
        let t = k.size()[2];
        let capacity = self.keys.size()[2];
        assert!(
            self.len + t <= capacity,
            "KV cache overflow: {} + {t} > {capacity}",
            self.len
        );
        self.keys.narrow(2, self.len, t).copy_(k);
        self.values.narrow(2, self.len, t).copy_(v);
        self.len += t;
        (
            self.keys.narrow(2, 0, self.len),
            self.values.narrow(2, 0, self.len),
        )
    }
}

/// Per-layer contiguous caches of a batch.
#[derive(Debug)]
pub struct KvCache {
    layers: Vec<LayerCache>,
}

impl KvCache {
    /// Allocates room for `capacity` positions of `batch` sequences.
    pub fn new(
        layers: i64,
        batch: i64,
        kv_heads: i64,
        capacity: i64,
        head_dim: i64,
        kind: Kind,
        device: Device,
    ) -> Self {
        KvCache {
            layers: (0..layers)
                .map(|_| LayerCache::new(batch, kv_heads, capacity, head_dim, kind, device))
                .collect(),
        }
    }

    /// Filled positions.
    pub fn len(&self) -> i64 {
        self.layers.first().map_or(0, |l| l.len)
    }

    /// True when nothing has been written yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Mutable cache of layer `i`.
    pub fn layer_mut(&mut self, i: usize) -> &mut LayerCache {
        &mut self.layers[i]
    }

    /// Keeps only batch rows `rows` (an int64 index tensor), e.g. after some
    /// sequences finished.
    pub fn select_rows(&mut self, rows: &Tensor) {
        for layer in &mut self.layers {
            layer.keys = layer.keys.index_select(0, rows);
            layer.values = layer.values.index_select(0, rows);
        }
    }
}

impl KvStore for KvCache {
    fn layer_kv(&mut self, i: usize) -> &mut dyn LayerKv {
        &mut self.layers[i]
    }
}
