//! Peak memory and time of training log-probs (forward + backward) through
//! the full-logits path (`forward_logprobs_with`: `[tokens, vocab]` logits,
//! log-softmax, gather, entropy) against the chunked LM head
//! (`forward_logprobs_chunked`, default chunk), on a one-layer Qwen2-shaped
//! model with Qwen2.5-0.5B's widths (hidden 896, MLP 4864, 14 heads / 2 KV
//! heads, vocab 151,936, tied embeddings), fp32, CPU, temperature 0.7,
//! entropy on, for 1k and 4k tokens (one row).
//!
//! Each (path, tokens) runs in a fresh child process (this binary with
//! `--child`): it builds the model, allocates every parameter's gradient,
//! reads its resident set (`VmRSS`), resets the high-water mark (`echo 5 >
//! /proc/self/clear_refs`) and runs one forward + backward of a loss of the
//! log-probs and entropy; the peak is `VmHWM - VmRSS` before the run, i.e.
//! what the loss path itself needs on top of the weights and gradients
//! (activations of the layer included). glibc's mmap threshold is pinned
//! (`MALLOC_MMAP_THRESHOLD_`) so freed tensors leave the resident set.
//!
//! A second table measures the loss path alone, the LM head: hidden states
//! `[tokens, 896]` as a leaf, the head weight (the model's tied embedding),
//! and forward + backward of the same loss through the full-logits head
//! (written out as `forward_logprobs_with` computes it) or through
//! `skyrl_torch_ops::chunked_logprobs` with the default chunk.
//!
//! Run: `cargo bench -p skyrl-model --bench logprob_memory` (about 6 minutes
//! on one thread; `-- --tokens 1024,4096 --threads N --iters K`).

use std::process::Command;
use std::time::Instant;

use skyrl_model::tiny::tiny_config;
use skyrl_model::{default_logprob_chunk, Arch, CausalLm, LoadOptions, LogprobOptions, TinySize};
use tch::{Device, Kind, Tensor};

const VOCAB: i64 = 151_936;
const OPTIONS: LogprobOptions = LogprobOptions {
    temperature: 0.7,
    with_entropy: true,
};

fn status_kib(field: &str) -> i64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"))
}

fn model() -> CausalLm {
    let mut c = tiny_config(Arch::Qwen2, TinySize::Small);
    c.vocab_size = VOCAB;
    c.hidden_size = 896;
    c.intermediate_size = 4864;
    c.num_hidden_layers = 1;
    c.num_attention_heads = 14;
    c.num_key_value_heads = Some(2);
    c.head_dim = Some(64);
    c.max_position_embeddings = 32768;
    let options = LoadOptions {
        device: Device::Cpu,
        kind: Kind::Float,
    };
    CausalLm::new(c, &options, 0).expect("model")
}

/// Log-probs and entropy `[1, tokens - 1]` of the LM head alone, for the
/// targets `ids[1..]`: `full-head` as `forward_logprobs_with` computes it,
/// `chunked-head` through the chunked autograd Function.
fn head(path: &str, hidden: &Tensor, weight: &Tensor, ids: &Tensor) -> (Tensor, Tensor) {
    let n = hidden.size()[0];
    let targets = ids.narrow(1, 1, n).reshape([n]);
    if path == "chunked-head" {
        let out = skyrl_torch_ops::chunked_logprobs(
            hidden,
            weight,
            &targets,
            OPTIONS.temperature,
            skyrl_torch_ops::HeadChunking::Recompute(default_logprob_chunk(VOCAB)),
            true,
        )
        .expect("chunked head");
        return (
            out.logprobs.view([1, n]),
            out.entropy.expect("entropy").view([1, n]),
        );
    }
    let z = hidden.matmul(&weight.tr()).to_kind(Kind::Float) / OPTIONS.temperature;
    let lse = z.logsumexp([-1], true);
    let lp = (z.gather(-1, &targets.unsqueeze(-1), false) - &lse).squeeze_dim(-1);
    let logp = &z - &lse;
    let ent = -(logp.exp() * logp).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float);
    (lp.view([1, n]), ent.view([1, n]))
}

/// One child run: prints `peak_mib seconds` (max peak and median time over `iters`).
fn child(path: &str, tokens: i64, iters: usize) {
    tch::manual_seed(0);
    let model = model();
    let params = model.named_parameters();
    // allocate every gradient now, so the peak below is the loss path's
    let zero: Tensor = params
        .iter()
        .map(|(_, p)| p.sum(Kind::Float) * 0.0)
        .fold(Tensor::zeros([], (Kind::Float, Device::Cpu)), |a, b| a + b);
    zero.backward();
    let ids = Tensor::randint(VOCAB, [1, tokens], (Kind::Int64, Device::Cpu));
    let mask = ids.ones_like();
    let weights = Tensor::randn([2, 1, tokens - 1], (Kind::Float, Device::Cpu));
    let hidden =
        Tensor::randn([tokens - 1, 896], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    (&hidden * 0.0).sum(Kind::Float).backward();
    assert_eq!(params[0].0, "model.embed_tokens.weight", "the tied head");
    let (mut peak, mut times) = (0i64, Vec::new());
    for _ in 0..iters {
        for (_, p) in &params {
            let mut g = p.grad();
            let _ = g.zero_();
        }
        let base = status_kib("VmRSS:");
        std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
        let t = Instant::now();
        let (logprobs, entropy) = match path {
            "full" | "chunked" => {
                let out = if path == "full" {
                    model.forward_logprobs_with(&ids, &mask, &OPTIONS)
                } else {
                    model.forward_logprobs_chunked(&ids, &mask, &OPTIONS, None)
                }
                .expect("log-probs");
                (out.logprobs, out.entropy.expect("entropy"))
            }
            _ => head(path, &hidden, &params[0].1, &ids),
        };
        let loss = (logprobs * weights.get(0)).sum(Kind::Float)
            + (entropy * weights.get(1)).sum(Kind::Float);
        loss.backward();
        times.push(t.elapsed().as_secs_f64());
        peak = peak.max(status_kib("VmHWM:") - base);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    println!("{} {}", peak as f64 / 1024.0, times[times.len() / 2]);
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        argv.iter()
            .position(|x| x == flag)
            .and_then(|i| argv.get(i + 1))
            .cloned()
    };
    let threads: i32 = value("--threads").map_or(1, |v| v.parse().expect("threads"));
    let iters: usize = value("--iters").map_or(1, |v| v.parse().expect("iters"));
    tch::set_num_threads(threads);
    if let Some(i) = argv.iter().position(|x| x == "--child") {
        let tokens = argv[i + 2].parse().expect("tokens");
        return child(&argv[i + 1], tokens, iters);
    }
    let test = argv.iter().any(|x| x == "--test");
    let tokens: Vec<i64> = value("--tokens")
        .unwrap_or_else(|| {
            if test {
                "64".into()
            } else {
                "1024,4096".into()
            }
        })
        .split(',')
        .map(|t| t.parse().expect("token count"))
        .collect();
    let exe = std::env::current_exe().expect("own path");
    let run = |path: &str, t: i64| -> (f64, f64) {
        let out = Command::new(&exe)
            .args(["--child", path, &t.to_string()])
            .args([
                "--threads",
                &threads.to_string(),
                "--iters",
                &iters.to_string(),
            ])
            .env("MALLOC_MMAP_THRESHOLD_", "131072")
            .env("OMP_NUM_THREADS", threads.to_string())
            .output()
            .expect("child run");
        assert!(
            out.status.success(),
            "child {path} {t} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8_lossy(&out.stdout);
        let v: Vec<f64> = line
            .split_whitespace()
            .map(|x| x.parse().expect("number"))
            .collect();
        (v[0], v[1])
    };
    for (title, full_path, chunked_path) in [
        ("whole model", "full", "chunked"),
        ("LM head alone (the loss path)", "full-head", "chunked-head"),
    ] {
        println!(
            "log-probs + entropy, forward + backward, {title}: 1-layer Qwen2 (hidden 896, vocab {VOCAB}), \
             fp32, {threads} thread(s), chunk {} tokens",
            default_logprob_chunk(VOCAB)
        );
        println!(
            "  {:>6}  {:>11}  {:>14}  {:>14}  {:>10}  {:>9}  {:>9}  {:>7}",
            "tokens",
            "logits MiB",
            "full peak MiB",
            "chunked MiB",
            "mem ratio",
            "full s",
            "chunked s",
            "time"
        );
        for &t in &tokens {
            let (full_mib, full_s) = run(full_path, t);
            let (chunk_mib, chunk_s) = run(chunked_path, t);
            let logits = (t - 1) as f64 * VOCAB as f64 * 4.0 / (1 << 20) as f64;
            println!(
                "  {t:>6}  {logits:>11.0}  {full_mib:>14.0}  {chunk_mib:>14.0}  {:>9.2}x  {full_s:>9.2}  {chunk_s:>9.2}  {:>6.2}x",
                full_mib / chunk_mib,
                chunk_s / full_s
            );
        }
    }
    println!("  (mem ratio: full peak / chunked peak; time: chunked / full)");
}
