//! What fits: the per-GPU training state of Qwen2.5-sized policies on one
//! node of 8 GPUs with 80 GB each, bf16, for `ddp` and the sharded strategy
//! (`fsdp2`), from [`MemoryPlan`] (the accounting `PolicyWorker::memory`
//! measures; tests/distributed_commands.rs checks the two agree).
//!
//! Run: `cargo bench -p skyrl-train --bench memory_plan`.

use skyrl_train::workers::{MemoryPlan, Strategy};

/// Parameter counts of the Qwen2.5 instruct models (tied embeddings counted once).
const MODELS: [(&str, i64); 3] = [
    ("Qwen2.5-0.5B", 494_032_768),
    ("Qwen2.5-7B", 7_615_616_512),
    ("Qwen2.5-14B", 14_770_033_664),
];
const GPUS: usize = 8;
const GPU_GB: f64 = 80.0;

fn gb(bytes: i64) -> f64 {
    bytes as f64 / 1e9
}

fn main() {
    println!("per-GPU training state, bf16 parameters, {GPUS} GPUs x {GPU_GB} GB (activations and KV cache not counted)");
    println!(
        "{:<13} {:<8} {:>9} {:>9} {:>10} {:>9} {:>10}  fits",
        "model", "strategy", "params", "grads", "optimizer", "peak", "headroom"
    );
    for (name, n) in MODELS {
        for (label, strategy) in [("ddp", Strategy::Ddp), ("fsdp2", Strategy::Sharded)] {
            let p = MemoryPlan::new(n, GPUS, strategy, true);
            let headroom = GPU_GB - gb(p.peak());
            println!(
                "{name:<13} {label:<8} {:>8.1}G {:>8.1}G {:>9.1}G {:>8.1}G {:>9.1}G  {}",
                gb(p.parameters),
                gb(p.gradients_peak),
                gb(p.optimizer),
                gb(p.peak()),
                headroom,
                if headroom > 0.0 { "yes" } else { "no" }
            );
        }
    }
}
