//! Printed tables and the JSON results.

use skyrl_model::CausalLm;

use crate::grpo::GrpoResult;
use crate::mixed::MixedResult;
use crate::{Args, Sizes, Subject};

/// Everything measured on one model.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ModelResult {
    pub model: String,
    /// One GRPO run per `max_num_seqs`.
    pub grpo: Vec<GrpoResult>,
    pub mixed: Option<MixedResult>,
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|n| n.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Machine, threads and workload sizes.
pub fn header(args: &Args, sizes: &Sizes) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "machine: {cores} cores ({}), load average {}",
        cpu_name(),
        load_average()
    );
    println!(
        "threads: {} torch intra-op threads on every side (OMP_NUM_THREADS={}, OMP_WAIT_POLICY={}), \
         device {}, dtype {}, decode attention: {}, split decode steps: {}",
        args.threads,
        std::env::var("OMP_NUM_THREADS").unwrap_or_default(),
        std::env::var("OMP_WAIT_POLICY").unwrap_or_default(),
        args.device,
        args.dtype,
        args.decode_attention,
        !args.no_split_decode
    );
    println!(
        "sizes{}: GRPO {} prompts x {} samples, {}-token prompts, {} new tokens, max_num_seqs {:?}; \
         mixed {} requests, max_tokens U[{}, {}], max_num_seqs {}, {}",
        if args.quick { " (--quick)" } else { "" },
        sizes.prompts,
        sizes.n,
        sizes.prompt_len,
        sizes.gen_tokens,
        sizes.max_num_seqs,
        sizes.mixed_requests,
        sizes.mixed_min_tokens,
        sizes.mixed_max_tokens,
        sizes.mixed_max_num_seqs,
        arrivals(args.arrival_rate)
    );
}

fn arrivals(rate: f64) -> String {
    if rate > 0.0 {
        format!("Poisson arrivals at {rate} req/s")
    } else {
        "all submitted at t=0".into()
    }
}

/// The model's shape.
pub fn model_line(subject: &Subject, model: &CausalLm) {
    let c = model.config();
    println!(
        "\n== model {}: {} params, hidden {}, {} layers, vocab {} ({})",
        subject.label,
        model.num_parameters(),
        c.hidden_size,
        c.num_hidden_layers,
        c.vocab_size,
        subject.dir.display()
    );
}

fn ratio(a: f64, b: Option<f64>) -> String {
    b.map_or("-".into(), |b| format!("{:.2}x", a / b))
}

/// The GRPO table.
pub fn grpo(r: &GrpoResult) {
    println!(
        "GRPO rollout: {} sequences x {} new tokens = {} tokens, max_num_seqs {}",
        r.rows,
        r.gen_tokens,
        r.rows * r.gen_tokens,
        r.max_num_seqs
    );
    let hf = r.hf.as_ref().map(|h| h.tokens_per_s);
    println!(
        "  {:<34} {:>9} {:>10} {:>8} {:>5}",
        "engine", "seconds", "tok/s", "vs HF", "cpu"
    );
    let row = |name: &str, s: f64, t: f64, cpu: f64| {
        let vs = ratio(t, hf);
        println!(
            "  {name:<34} {s:>9.2} {t:>10.1} {vs:>8} {:>4.0}%",
            100.0 * cpu
        );
    };
    let p = &r.paged;
    row(
        "paged (continuous batching)",
        p.seconds,
        p.tokens_per_s,
        p.cpu_share,
    );
    if let Some(s) = &r.static_batch {
        row(
            "static batch (old engine)",
            s.seconds,
            s.tokens_per_s,
            s.cpu_share,
        );
    }
    if let Some(h) = &r.hf {
        let name = format!("HF generate (transformers {})", h.transformers);
        row(&name, h.seconds, h.tokens_per_s, h.cpu_share);
    }
    println!(
        "  prefill: {} prompt tokens computed, {} shared -> prefix sharing saved {:.1}% of prefill",
        r.prefill_tokens_computed,
        r.prefill_tokens_reused,
        100.0 * r.prefill_saved()
    );
    println!(
        "  paged engine: {} steps ({} decode steps split across threads), {} preemptions",
        r.steps, r.parallel_decode_steps, r.preemptions
    );
}

/// The mixed-length table.
pub fn mixed(r: &MixedResult) {
    println!(
        "mixed lengths: {} requests, {} tokens, {}",
        r.requests,
        r.tokens,
        arrivals(r.arrival_rate)
    );
    println!(
        "  {:<30} {:>9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>5}",
        "schedule", "seconds", "tok/s", "p50 s", "p99 s", "mean s", "batches", "cpu"
    );
    for o in &r.outcomes {
        println!(
            "  {:<30} {:>9.2} {:>10.1} {:>8.2} {:>8.2} {:>8.2} {:>8} {:>4.0}%",
            o.schedule,
            o.seconds,
            o.tokens_per_s,
            o.p50_s,
            o.p99_s,
            o.mean_s,
            o.batches,
            100.0 * o.cpu_share
        );
    }
    if let [c, old, ..] = r.outcomes.as_slice() {
        println!(
            "  continuous vs old server: {:.2}x tok/s, p50 {:.2}x lower, p99 {:.2}x lower",
            c.tokens_per_s / old.tokens_per_s,
            old.p50_s / c.p50_s,
            old.p99_s / c.p99_s
        );
    }
}

/// One line per model and `max_num_seqs` with the headline ratios.
pub fn summary(results: &[ModelResult]) {
    println!(
        "\n== summary (tok/s; ratios > 1: the paged engine is faster); load average now {}",
        load_average()
    );
    if results.iter().any(|m| !m.grpo.is_empty()) {
        println!(
            "  {:<8} {:>5} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8}",
            "model", "seqs", "paged", "static", "HF", "paged/HF", "paged/stat", "prefill"
        );
    }
    let num = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    let r = |a: f64, b: Option<f64>| ratio(a, b);
    for m in results {
        for g in &m.grpo {
            let stat = g.static_batch.as_ref().map(|s| s.tokens_per_s);
            let hf = g.hf.as_ref().map(|h| h.tokens_per_s);
            let paged = g.paged.tokens_per_s;
            println!(
                "  {:<8} {:>5} {:>9.1} {:>9} {:>9} {:>9} {:>10} {:>7.1}%",
                m.model,
                g.max_num_seqs,
                paged,
                num(stat),
                num(hf),
                r(paged, hf),
                r(paged, stat),
                100.0 * g.prefill_saved()
            );
        }
    }
    if results.iter().all(|m| m.mixed.is_none()) {
        return;
    }
    println!(
        "  {:<8} {:>12} {:>12} {:>9} {:>12} {:>12}",
        "model", "mixed cont", "mixed old", "cont/old", "p99 cont s", "p99 old s"
    );
    for m in results {
        let outcomes = m
            .mixed
            .as_ref()
            .map(|x| x.outcomes.as_slice())
            .unwrap_or(&[]);
        if let [c, rest @ ..] = outcomes {
            let old = rest.first();
            println!(
                "  {:<8} {:>12.1} {:>12} {:>9} {:>12.2} {:>12}",
                m.model,
                c.tokens_per_s,
                num(old.map(|o| o.tokens_per_s)),
                r(c.tokens_per_s, old.map(|o| o.tokens_per_s)),
                c.p99_s,
                old.map_or("-".into(), |o| format!("{:.2}", o.p99_s))
            );
        }
    }
}
