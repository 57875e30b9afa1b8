//! Block bookkeeping of the KV pool: reference counts, the free list and the
//! prefix cache (full blocks keyed by a hash of every token up to their end,
//! kept after their last user is gone and evicted least recently used first).
//!
//! Block 0 is never handed out: padded reads and writes of a batch go there.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};

/// Hash of a full block given the hash of the block before it (0 for the first).
pub fn chain_hash(parent: u64, tokens: &[i64]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parent.hash(&mut h);
    tokens.hash(&mut h);
    h.finish()
}

/// A cached block's identity: its chain hash and its own tokens (compared on
/// lookup, so a hash collision is a miss, never wrong KV).
#[derive(Debug, Clone)]
struct CachedKey {
    hash: u64,
    tokens: Vec<i64>,
}

/// Reference counts, free list and prefix cache of `num_blocks` blocks.
#[derive(Debug)]
pub struct BlockAllocator {
    refcount: Vec<u32>,
    /// Unused blocks that hold no cached prefix.
    free: VecDeque<usize>,
    /// Cached blocks per hash.
    by_hash: HashMap<u64, usize>,
    /// The cached identity of each block, if any.
    key: Vec<Option<CachedKey>>,
    /// Unused cached blocks by last use (oldest first): evicted on demand.
    evictable: BTreeMap<u64, usize>,
    /// Last-use tick of each evictable block (its key in `evictable`).
    last_use: Vec<u64>,
    tick: u64,
}

impl BlockAllocator {
    /// Bookkeeping for blocks `1..num_blocks` (block 0 is the padding block).
    pub fn new(num_blocks: usize) -> Self {
        BlockAllocator {
            refcount: vec![0; num_blocks],
            free: (1..num_blocks).collect(),
            by_hash: HashMap::new(),
            key: vec![None; num_blocks],
            evictable: BTreeMap::new(),
            last_use: vec![0; num_blocks],
            tick: 0,
        }
    }

    /// Blocks that can be handed out now (free or evictable).
    pub fn available(&self) -> usize {
        self.free.len() + self.evictable.len()
    }

    /// Blocks holding a cached prefix (used or not).
    pub fn cached(&self) -> usize {
        self.by_hash.len()
    }

    /// Blocks that hold no data a sequence or the cache needs.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// Takes a block (reference count 1), evicting the least recently used
    /// cached one when no block is free.
    pub fn allocate(&mut self) -> Option<usize> {
        let block = match self.free.pop_front() {
            Some(b) => b,
            None => {
                let (&tick, &b) = self.evictable.iter().next()?;
                self.evictable.remove(&tick);
                self.forget(b);
                b
            }
        };
        self.refcount[block] = 1;
        Some(block)
    }

    /// One more user of `block`.
    pub fn retain(&mut self, block: usize) {
        if self.refcount[block] == 0 {
            self.evictable.remove(&self.last_use[block]);
        }
        self.refcount[block] += 1;
    }

    /// One user fewer; an unused block goes back to the free list, or to the
    /// evictable set when it holds a cached prefix.
    pub fn release(&mut self, block: usize) {
        debug_assert!(self.refcount[block] > 0, "block {block} released twice");
        self.refcount[block] -= 1;
        if self.refcount[block] == 0 {
            if self.key[block].is_some() {
                self.tick += 1;
                self.last_use[block] = self.tick;
                self.evictable.insert(self.tick, block);
            } else {
                self.free.push_back(block);
            }
        }
    }

    /// Users of `block`.
    pub fn refcount(&self, block: usize) -> u32 {
        self.refcount[block]
    }

    /// The cached block holding `tokens` after the prefix hashed `parent`;
    /// the caller must [`BlockAllocator::retain`] it to use it.
    pub fn lookup(&self, hash: u64, tokens: &[i64]) -> Option<usize> {
        let block = *self.by_hash.get(&hash)?;
        match &self.key[block] {
            Some(k) if k.tokens == tokens => Some(block),
            _ => None,
        }
    }

    /// Records that the full `block` holds `tokens` with chain hash `hash`
    /// (no-op when that prefix is cached already, or the block is).
    pub fn register(&mut self, block: usize, hash: u64, tokens: &[i64]) {
        if self.by_hash.contains_key(&hash) || self.key[block].is_some() {
            return;
        }
        self.by_hash.insert(hash, block);
        self.key[block] = Some(CachedKey {
            hash,
            tokens: tokens.to_vec(),
        });
    }

    /// Drops every cached prefix: unused cached blocks become free.
    pub fn reset_cache(&mut self) {
        let evictable = std::mem::take(&mut self.evictable);
        for block in evictable.into_values() {
            self.key[block] = None;
            self.free.push_back(block);
        }
        for k in &mut self.key {
            *k = None;
        }
        self.by_hash.clear();
    }

    fn forget(&mut self, block: usize) {
        if let Some(k) = self.key[block].take() {
            if self.by_hash.get(&k.hash) == Some(&block) {
                self.by_hash.remove(&k.hash);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_blocks_are_reused_then_evicted_oldest_first() {
        let mut a = BlockAllocator::new(4); // blocks 1, 2, 3
        let b1 = a.allocate().unwrap();
        let b2 = a.allocate().unwrap();
        let h1 = chain_hash(0, &[1, 2]);
        let h2 = chain_hash(h1, &[3, 4]);
        a.register(b1, h1, &[1, 2]);
        a.register(b2, h2, &[3, 4]);
        a.release(b1);
        a.release(b2);
        assert_eq!(a.available(), 3);
        assert_eq!(a.lookup(h1, &[1, 2]), Some(b1));
        assert_eq!(a.lookup(h1, &[9, 9]), None, "collision is a miss");
        a.retain(b2);
        assert_eq!(a.refcount(b2), 1);
        // Free block first, then the oldest evictable (b1).
        let b3 = a.allocate().unwrap();
        assert!(b3 != b1 && b3 != b2);
        assert_eq!(a.allocate(), Some(b1));
        assert_eq!(a.lookup(h1, &[1, 2]), None);
        assert_eq!(a.allocate(), None);
        a.release(b2);
        a.reset_cache();
        assert_eq!(a.lookup(h2, &[3, 4]), None);
        assert_eq!(a.free(), 1);
    }
}
