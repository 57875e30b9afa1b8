//! Side-by-side throughput of the Rust engine and HF transformers on the same weights:
//! generation tokens/s (batched sampling with a KV cache) and training tokens/s
//! (forward + backward of next-token log-probs).
//!
//! `cargo run --release -p skyrl-model --bin skyrl-model-bench -- --size tiny`
//!
//! With `--load-reps N` it only compares load times instead: `CausalLm::from_pretrained`
//! and transformers' `AutoModelForCausalLM.from_pretrained` (fp32, CPU), each run `N`
//! times, fastest of each printed with the ratio; `load+read` adds one read of every
//! parameter (both sides map weights lazily, so this pages them in).
//!
//! Each side also reports its peak resident memory (VmHWM / ru_maxrss), and the
//! last line is `result-json {...}` with every number, for scripts
//! (`bench/real_size.sh`). `--train-batch 0` skips training on both sides.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use rand::{Rng, SeedableRng};
use tch::{Device, Kind, Tensor};

use skyrl_model::{
    init_tiny_model, Arch, CausalLm, InferenceEngine, LoadOptions, LogprobOptions, SamplingParams,
    TinySize,
};

#[derive(Parser, Debug)]
#[command(about = "Benchmark skyrl-model against PyTorch/transformers")]
struct Args {
    /// Existing HF model directory; default: a fresh random tiny model.
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Architecture of the generated model (qwen2, llama, qwen3).
    #[arg(long, default_value = "qwen2")]
    arch: String,
    /// Size of the generated model (tiny, small).
    #[arg(long, default_value = "small")]
    size: String,
    /// cpu or cuda.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Intra-op threads for both sides.
    #[arg(long, default_value_t = 1)]
    threads: i32,
    #[arg(long, default_value_t = 8)]
    batch: usize,
    #[arg(long, default_value_t = 64)]
    prompt_len: usize,
    #[arg(long, default_value_t = 64)]
    gen_tokens: usize,
    #[arg(long, default_value_t = 8)]
    train_batch: i64,
    #[arg(long, default_value_t = 128)]
    train_seq_len: i64,
    #[arg(long, default_value_t = 3)]
    iters: usize,
    /// Python with torch + transformers (default: $SKYRL_PYTHON, then the project venv).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Measure only the Rust side.
    #[arg(long)]
    no_python: bool,
    /// Only compare load times, each side loading the checkpoint this many times.
    #[arg(long, default_value_t = 0)]
    load_reps: usize,
}

fn main() -> Result<()> {
    // OpenMP reads its wait policy at start-up: re-exec once with it set.
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        let status = Command::new(std::env::current_exe()?)
            .args(std::env::args_os().skip(1))
            .env("OMP_WAIT_POLICY", "PASSIVE")
            .status()?;
        std::process::exit(status.code().unwrap_or(1));
    }
    let args = Args::parse();
    tch::set_num_threads(args.threads);
    let device = match args.device.as_str() {
        "cpu" => Device::Cpu,
        "cuda" => Device::Cuda(0),
        other => bail!("--device must be cpu or cuda, got {other}"),
    };
    let _tmp;
    let dir = match &args.model_dir {
        Some(d) => d.clone(),
        None => {
            _tmp = tempfile::tempdir()?;
            let d = _tmp.path().join("model");
            init_tiny_model(
                Arch::parse(&args.arch)?,
                TinySize::parse(&args.size)?,
                &d,
                0,
            )?;
            d
        }
    };
    if args.load_reps > 0 {
        return bench_load(&args, &dir, device);
    }
    let model = CausalLm::from_pretrained(
        &dir,
        &LoadOptions {
            device,
            kind: Kind::Float,
        },
    )?;
    let config = model.config().clone();
    println!(
        "model: {} {} params={} hidden={} layers={} device={:?} threads={}",
        dir.display(),
        config.model_type,
        model.num_parameters(),
        config.hidden_size,
        config.num_hidden_layers,
        device,
        args.threads
    );
    let (rust_gen, rust_train) = bench_rust(model, &args, device)?;
    let rust_rss = peak_rss_mib();
    println!(
        "rust   : generate {rust_gen:>10.1} tok/s   train {rust_train:>10.1} tok/s   peak RSS {rust_rss:.0} MiB"
    );
    let mut result = serde_json::json!({
        "rust": {"gen_tokens_per_s": rust_gen, "train_tokens_per_s": rust_train,
                 "peak_rss_mib": rust_rss},
        "threads": args.threads,
    });
    if args.no_python {
        println!("result-json {result}");
        return Ok(());
    }
    let py = bench_python(&args, &dir)?;
    let py_gen = py["gen_tokens_per_s"]
        .as_f64()
        .context("python gen_tokens_per_s")?;
    // null when training was skipped (--train-batch 0)
    let py_train = py["train_tokens_per_s"].as_f64().unwrap_or(f64::NAN);
    println!(
        "python : generate {py_gen:>10.1} tok/s   train {py_train:>10.1} tok/s   peak RSS {:.0} MiB   (torch {})",
        py["peak_rss_mib"].as_f64().unwrap_or(f64::NAN),
        py["torch"]
    );
    println!(
        "ratio rust/python: generate {:.2}x   train {:.2}x",
        rust_gen / py_gen,
        rust_train / py_train
    );
    result["python"] = py;
    println!("result-json {result}");
    Ok(())
}

/// Fastest of `--load-reps` loads on each side, and the ratio.
fn bench_load(args: &Args, dir: &std::path::Path, device: Device) -> Result<()> {
    let options = LoadOptions {
        device,
        kind: Kind::Float,
    };
    let (mut times, mut read_times) = (Vec::new(), Vec::new());
    for _ in 0..args.load_reps {
        let start = Instant::now();
        let model = CausalLm::from_pretrained(dir, &options)?;
        sync(device);
        times.push(start.elapsed().as_secs_f64());
        // One read of every parameter: pages in lazily mapped weights.
        let _total: f64 = model
            .var_store()
            .trainable_variables()
            .iter()
            .map(|v| v.sum(Kind::Float).double_value(&[]))
            .sum();
        read_times.push(start.elapsed().as_secs_f64());
        if times.len() == 1 {
            println!("model: {} params={}", dir.display(), model.num_parameters());
        }
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let (rust, rust_read) = (min(&times), min(&read_times));
    println!("rust   : load {rust:.3} s (all: {times:.3?})   load+read {rust_read:.3} s");
    if args.no_python {
        return Ok(());
    }
    let py = bench_python(args, dir)?;
    let python = py["load_seconds"].as_f64().context("python load_seconds")?;
    let python_read = py["load_read_seconds"]
        .as_f64()
        .context("python load_read_seconds")?;
    println!(
        "python : load {python:.3} s (all: {})   load+read {python_read:.3} s",
        py["load_all"]
    );
    println!(
        "ratio rust/python: load {:.2}x   load+read {:.2}x",
        rust / python,
        rust_read / python_read
    );
    Ok(())
}

/// Peak resident set of this process in MiB (`VmHWM` in /proc/self/status;
/// NaN where that file is missing).
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

fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

fn bench_rust(model: CausalLm, args: &Args, device: Device) -> Result<(f64, f64)> {
    let vocab = model.config().vocab_size;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let prompts: Vec<Vec<i64>> = (0..args.batch)
        .map(|_| {
            (0..args.prompt_len)
                .map(|_| rng.random_range(3..vocab))
                .collect()
        })
        .collect();
    let params = SamplingParams {
        temperature: 1.0,
        max_tokens: args.gen_tokens,
        ignore_eos: true,
        seed: Some(0),
        ..Default::default()
    };
    let engine = InferenceEngine::new(model, None).with_max_batch(args.batch);
    engine.generate(&prompts, &params)?;
    sync(device);
    let start = Instant::now();
    for _ in 0..args.iters {
        let out = engine.generate(&prompts, &params)?;
        assert!(out.iter().all(|c| c.token_ids.len() == args.gen_tokens));
    }
    sync(device);
    let gen_s = start.elapsed().as_secs_f64() / args.iters as f64;

    let gen_tok_s = (args.batch * args.gen_tokens) as f64 / gen_s;
    if args.train_batch == 0 {
        return Ok((gen_tok_s, f64::NAN));
    }
    let model = engine.model();
    let ids = Tensor::randint_low(
        3,
        vocab,
        [args.train_batch, args.train_seq_len],
        (Kind::Int64, device),
    );
    let mask = ids.ones_like();
    let step = || -> Result<()> {
        // the trainer's path: the chunked LM head with its default policy
        let lp = model.forward_logprobs_chunked(&ids, &mask, &LogprobOptions::default(), None)?;
        let loss = -lp.logprobs.mean(Kind::Float);
        loss.backward();
        for mut v in model.var_store().trainable_variables() {
            v.zero_grad();
        }
        Ok(())
    };
    step()?;
    sync(device);
    let start = Instant::now();
    for _ in 0..args.iters {
        step()?;
    }
    sync(device);
    let train_s = start.elapsed().as_secs_f64() / args.iters as f64;
    Ok((
        gen_tok_s,
        (args.train_batch * args.train_seq_len) as f64 / train_s,
    ))
}

fn bench_python(args: &Args, dir: &std::path::Path) -> Result<serde_json::Value> {
    let python = args
        .python
        .clone()
        .or_else(|| std::env::var_os("SKYRL_PYTHON").map(PathBuf::from))
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/python")
        });
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/model_bench.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg("--model-dir")
        .arg(dir)
        .args(["--device", &args.device])
        .args(["--threads", &args.threads.to_string()])
        .args(["--batch", &args.batch.to_string()])
        .args(["--prompt-len", &args.prompt_len.to_string()])
        .args(["--gen-tokens", &args.gen_tokens.to_string()])
        .args(["--train-batch", &args.train_batch.to_string()])
        .args(["--train-seq-len", &args.train_seq_len.to_string()])
        .args(["--iters", &args.iters.to_string()])
        .args(["--load-reps", &args.load_reps.to_string()])
        .env("OMP_WAIT_POLICY", "PASSIVE")
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if !out.status.success() {
        bail!(
            "{} {} failed:\n{}",
            python.display(),
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().context("python printed nothing")?;
    serde_json::from_str(line).with_context(|| format!("parsing python output {line:?}"))
}
