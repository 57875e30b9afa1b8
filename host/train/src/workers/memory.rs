//! What the policy's training state costs per rank, by the same accounting
//! [`super::PolicyWorker::memory`] measures: parameters and gradients in the
//! parameters' dtype, fp32 Adam moments, fp32 master weights for bf16
//! parameters, divided over the ranks where the strategy shards them.
//! Activations, the KV cache of a colocated engine and allocator slack are
//! not counted.

use crate::config::Strategy;

/// Bytes of training state on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryPlan {
    pub parameters: i64,
    /// During backward and up to the optimizer step.
    pub gradients_peak: i64,
    /// Between steps (a sharded optimizer frees them after the reduce-scatter).
    pub gradients_at_rest: i64,
    pub optimizer: i64,
}

impl MemoryPlan {
    /// The plan for `num_params` parameters over `world` ranks.
    pub fn new(num_params: i64, world: usize, strategy: Strategy, bf16: bool) -> Self {
        let elt = if bf16 { 2 } else { 4 };
        let fp32_copies = 2 + i64::from(bf16);
        let world = world.max(1) as i64;
        let sharded = strategy == Strategy::Sharded && world > 1;
        let optimizer = if sharded {
            let shard = (num_params + world - 1) / world;
            fp32_copies * shard * 4
        } else {
            fp32_copies * num_params * 4
        };
        Self {
            parameters: num_params * elt,
            gradients_peak: num_params * elt,
            gradients_at_rest: if sharded { 0 } else { num_params * elt },
            optimizer,
        }
    }

    /// Peak bytes (parameters, gradients and optimizer state at once).
    pub fn peak(&self) -> i64 {
        self.parameters + self.gradients_peak + self.optimizer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharding_divides_the_optimizer_state_by_the_ranks() {
        let n = 1_000_000;
        let ddp = MemoryPlan::new(n, 8, Strategy::Ddp, true);
        let fsdp = MemoryPlan::new(n, 8, Strategy::Sharded, true);
        assert_eq!(ddp.parameters, 2 * n);
        assert_eq!(ddp.optimizer, 12 * n);
        assert_eq!(fsdp.optimizer, 12 * n / 8);
        assert_eq!(fsdp.gradients_at_rest, 0);
        // One rank: nothing to shard.
        assert_eq!(
            MemoryPlan::new(n, 1, Strategy::Sharded, false).optimizer,
            8 * n
        );
    }
}
