//! One full training step, forward + backward + grad-norm clipping + AdamW,
//! on a checkpoint, in tokens/s and s/step, with the process's peak RSS: the
//! Rust side of `bench/real_size.sh` (the PyTorch side is
//! `bench/full_step_torch.py`, run by the script on the same model and shapes).
//!
//! The step: `CausalLm::forward_logprobs_chunked` over `--batch` x `--seq-len`
//! random token ids (seeded, fixed), loss = -mean log-prob, backward,
//! `skyrl_train::optim::AdamW::step(1.0)` (clip to norm 1, then the fused
//! AdamW update; lr 1e-5, betas 0.9/0.999, eps 1e-8, weight decay 0.01),
//! zero the gradients. One untimed step first (it allocates the optimizer
//! state and the gradients), then `--iters` timed steps; the median is printed.
//!
//! `cargo bench -p skyrl-train --bench full_step -- --model-dir DIR [--batch 8]
//! [--seq-len 128] [--iters 3] [--threads 1]`; the last line is
//! `result-json {...}`. Without `--model-dir` it runs one step on a random tiny
//! model (the smoke test `cargo test --benches` runs).

mod common;

use std::path::PathBuf;
use std::time::Instant;

use common::{flag, median, number_flag, HP, MAX_NORM};
use skyrl_model::{init_tiny_model, Arch, CausalLm, LoadOptions, LogprobOptions, TinySize};
use skyrl_train::optim::{AdamW, LrSchedule};
use tch::{Device, Kind, Tensor};

/// Peak resident set of this process in MiB (`VmHWM`; NaN if unreadable).
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn main() -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    let number = |name: &str, default: i64| number_flag(&argv, name).unwrap_or(default);
    let model_dir = flag(&argv, "--model-dir").map(PathBuf::from);
    let smoke = model_dir.is_none();
    let batch = number("--batch", if smoke { 2 } else { 8 });
    let seq_len = number("--seq-len", if smoke { 16 } else { 128 });
    let iters = number("--iters", if smoke { 1 } else { 3 }).max(1) as usize;
    let threads = number("--threads", 1);
    tch::set_num_threads(threads as i32);
    tch::manual_seed(0);

    let tmp = tempfile::tempdir()?;
    let dir = match model_dir {
        Some(d) => d,
        None => {
            let d = tmp.path().join("model");
            init_tiny_model(Arch::Qwen2, TinySize::Tiny, &d, 0)?;
            d
        }
    };
    let model = CausalLm::from_pretrained(
        &dir,
        &LoadOptions {
            device: Device::Cpu,
            kind: Kind::Float,
        },
    )?;
    let vocab = model.config().vocab_size;
    let mut opt = AdamW::new(model.trainable_parameters(), HP, LrSchedule::Constant);
    let ids = Tensor::randint_low(3, vocab, [batch, seq_len], (Kind::Int64, Device::Cpu));
    let mask = ids.ones_like();
    let options = LogprobOptions::default();
    let mut step = || -> anyhow::Result<(f64, f64)> {
        let t = Instant::now();
        let lp = model.forward_logprobs_chunked(&ids, &mask, &options, None)?;
        let loss = -lp.logprobs.mean(Kind::Float);
        loss.backward();
        let fwd_bwd = t.elapsed().as_secs_f64();
        opt.step(MAX_NORM);
        opt.zero_grad();
        Ok((fwd_bwd, t.elapsed().as_secs_f64()))
    };
    step()?;
    let (mut fb, mut total) = (Vec::new(), Vec::new());
    for _ in 0..iters {
        let (a, b) = step()?;
        fb.push(a);
        total.push(b);
    }
    let (fb, total) = (median(&fb), median(&total));
    let tokens = (batch * seq_len) as f64;
    let rss = peak_rss_mib();
    println!(
        "rust full step ({} params, {batch} x {seq_len} tokens, {threads} thread(s), median of {iters}): \
         {total:.3} s/step ({:.1} tok/s; fwd+bwd {fb:.3} s, clip+AdamW {:.3} s), peak RSS {rss:.0} MiB",
        model.num_parameters(),
        tokens / total,
        total - fb
    );
    println!(
        "result-json {}",
        serde_json::json!({
            "seconds_per_step": total,
            "tokens_per_s": tokens / total,
            "fwd_bwd_seconds": fb,
            "optimizer_seconds": total - fb,
            "peak_rss_mib": rss,
            "params": model.num_parameters(),
        })
    );
    Ok(())
}
