//! Rollout benchmark of the built-in inference engine (issue 20).
//!
//! Two workloads, per model size, on the same weights:
//! - GRPO-shaped rollout ([`grpo`]): `prompts` x `n` samples of `gen_tokens`
//!   tokens (temperature 1, EOS ignored): the paged engine against the old
//!   static-batch engine and Hugging Face `model.generate` (bench/rollout_hf.py),
//!   plus the prefill share saved by prefix sharing;
//! - mixed lengths ([`mixed`]): requests with `max_tokens` drawn from a range,
//!   continuous batching (`submit` + `step`) against the old server's grouping of
//!   requests with identical settings, with tokens/s and p50/p99 request latency.
//!
//! ```sh
//! cargo bench -p skyrl-model --bench rollout -- --quick       # smoke run, < 1 min
//! cargo bench -p skyrl-model --bench rollout -- --sizes small # one size, full workload
//! bench/rollout.sh                                            # the driver: both sizes, summary
//! ```

mod clock;
mod grpo;
mod hf;
mod mixed;
mod report;
mod workload;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Result};
use clap::Parser;
use tch::{Device, Kind};

use skyrl_model::engine::DEFAULT_MAX_BATCH;
use skyrl_model::{init_tiny_model, Arch, CausalLm, LoadOptions, TinySize};

/// Command-line options; sizes left unset take the full or `--quick` default.
#[derive(Parser, Debug, Clone)]
#[command(about = "GRPO rollout and mixed-length serving benchmark of the built-in engine")]
pub struct Args {
    /// Model sizes to generate (tiny, small), comma-separated; ignored with --model-dir.
    #[arg(long, value_delimiter = ',', default_value = "tiny,small")]
    pub sizes: Vec<String>,
    /// An existing HF model directory instead of generated ones.
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// Smoke-run sizes (8 prompts x 4 samples x 32 tokens; 12 mixed requests of 16..64).
    #[arg(long)]
    pub quick: bool,
    /// GRPO: distinct prompts [64; quick 8].
    #[arg(long)]
    pub prompts: Option<usize>,
    /// GRPO: samples per prompt [8; quick 4].
    #[arg(long)]
    pub n: Option<usize>,
    /// Prompt tokens, both workloads [128; quick 32].
    #[arg(long)]
    pub prompt_len: Option<usize>,
    /// GRPO: new tokens per sample [256; quick 32].
    #[arg(long)]
    pub gen_tokens: Option<usize>,
    /// GRPO: most sequences decoded together, for every engine; each value is
    /// one run [64 (the engine's default) and prompts x n (all at once, as one
    /// HF generate call does)].
    #[arg(long, value_delimiter = ',')]
    pub max_num_seqs: Vec<usize>,
    /// Mixed: number of requests (one sequence each) [64; quick 12].
    #[arg(long)]
    pub mixed_requests: Option<usize>,
    /// Mixed: smallest max_tokens [16].
    #[arg(long)]
    pub mixed_min_tokens: Option<usize>,
    /// Mixed: largest max_tokens, inclusive [512; quick 64].
    #[arg(long)]
    pub mixed_max_tokens: Option<usize>,
    /// Mixed: the engine's max_num_seqs, and the old server's max batch [64; quick 8].
    #[arg(long)]
    pub mixed_max_num_seqs: Option<usize>,
    /// Mixed: Poisson arrivals at this many requests/s (0: all at t=0).
    #[arg(long, default_value_t = 0.0)]
    pub arrival_rate: f64,
    /// Mixed: the old server's coalescing window in ms (skyrl serve's default).
    #[arg(long, default_value_t = 3)]
    pub window_ms: u64,
    /// Torch intra-op threads for every engine (Rust and Python).
    #[arg(long, default_value_t = 2)]
    pub threads: i32,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// float32, bfloat16 or float16 (both sides).
    #[arg(long, default_value = "float32")]
    pub dtype: String,
    /// Seed of prompts, lengths, arrivals and sampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// How the Rust engines attend in CPU fp32 decode steps: `kernel` (the
    /// one-pass decode kernel) or `sdpa` (libtorch's SDPA, as before it).
    #[arg(long, default_value = "kernel", value_parser = ["kernel", "sdpa"])]
    pub decode_attention: String,
    /// Keep every decode step of the Rust engines on one thread instead of
    /// splitting small steps' rows across threads.
    #[arg(long)]
    pub no_split_decode: bool,
    /// Skip the Hugging Face side.
    #[arg(long)]
    pub no_hf: bool,
    /// Skip the old static-batch engine.
    #[arg(long)]
    pub no_static: bool,
    /// Skip the GRPO workload.
    #[arg(long)]
    pub skip_grpo: bool,
    /// Skip the mixed-length workload.
    #[arg(long)]
    pub skip_mixed: bool,
    /// Python with torch + transformers [$SKYRL_PYTHON, then .deps/venv].
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Write the GRPO prompts (JSON list of token-id lists) here, e.g. for vLLM.
    #[arg(long)]
    pub prompts_out: Option<PathBuf>,
    /// Write all results as one JSON document here.
    #[arg(long)]
    pub json_out: Option<PathBuf>,
    /// Passed by `cargo bench`. Without it (`cargo test --benches`) the bench
    /// runs as a smoke test, like criterion: --quick on the tiny model, no HF.
    #[arg(long, hide = true)]
    pub bench: bool,
}

/// [`Args`] with every size resolved.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sizes {
    pub prompts: usize,
    pub n: usize,
    pub prompt_len: usize,
    pub gen_tokens: usize,
    pub max_num_seqs: Vec<usize>,
    pub mixed_requests: usize,
    pub mixed_min_tokens: usize,
    pub mixed_max_tokens: usize,
    pub mixed_max_num_seqs: usize,
}

impl Args {
    /// The full workload, or the `--quick` one, with explicit flags on top.
    pub fn sizes(&self) -> Sizes {
        let q = self.quick;
        let pick =
            |v: Option<usize>, full: usize, quick: usize| v.unwrap_or(if q { quick } else { full });
        let prompts = pick(self.prompts, 64, 8);
        let n = pick(self.n, 8, 4);
        let mut max_num_seqs = self.max_num_seqs.clone();
        if max_num_seqs.is_empty() {
            max_num_seqs = vec![DEFAULT_MAX_BATCH.min(prompts * n), prompts * n];
            max_num_seqs.dedup();
        }
        Sizes {
            prompts,
            n,
            prompt_len: pick(self.prompt_len, 128, 32),
            gen_tokens: pick(self.gen_tokens, 256, 32),
            max_num_seqs,
            mixed_requests: pick(self.mixed_requests, 64, 12),
            mixed_min_tokens: pick(self.mixed_min_tokens, 16, 16),
            mixed_max_tokens: pick(self.mixed_max_tokens, 512, 64),
            mixed_max_num_seqs: pick(self.mixed_max_num_seqs, 64, 8),
        }
    }

    fn device(&self) -> Result<Device> {
        Ok(match self.device.as_str() {
            "cpu" => Device::Cpu,
            "cuda" => Device::Cuda(0),
            d => match d.strip_prefix("cuda:").and_then(|i| i.parse().ok()) {
                Some(i) => Device::Cuda(i),
                None => bail!("--device must be cpu, cuda or cuda:N, got {d}"),
            },
        })
    }

    /// The tch kind and the torch dtype name of `--dtype`.
    fn kind(&self) -> Result<(Kind, &'static str)> {
        Ok(match self.dtype.as_str() {
            "float32" | "fp32" | "float" => (Kind::Float, "float32"),
            "bfloat16" | "bf16" => (Kind::BFloat16, "bfloat16"),
            "float16" | "fp16" | "half" => (Kind::Half, "float16"),
            d => bail!("--dtype must be float32, bfloat16 or float16, got {d}"),
        })
    }
}

/// One model under test.
pub struct Subject {
    /// `tiny`, `small` or the directory name.
    pub label: String,
    pub dir: PathBuf,
    pub device: Device,
    pub dtype: &'static str,
}

impl Subject {
    fn load(&self, kind: Kind) -> Result<CausalLm> {
        let options = LoadOptions {
            device: self.device,
            kind,
        };
        Ok(CausalLm::from_pretrained(&self.dir, &options)?)
    }
}

/// Waits for the device to finish queued work (CUDA is asynchronous).
pub fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

fn main() -> Result<()> {
    let mut args = Args::parse();
    if !args.bench {
        println!("no --bench flag (cargo test): smoke test on the tiny model, numbers are not measurements");
        args.quick = true;
        args.no_hf = true;
        args.sizes = vec!["tiny".into()];
    }
    // OpenMP reads its settings at start-up: re-exec once with them set, so the
    // Rust side runs exactly like the Python side (which inherits them).
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        let status = Command::new(std::env::current_exe()?)
            .args(std::env::args_os().skip(1))
            .env("OMP_WAIT_POLICY", "PASSIVE")
            .env("OMP_NUM_THREADS", args.threads.to_string())
            .status()?;
        std::process::exit(status.code().unwrap_or(1));
    }
    tch::set_num_threads(args.threads);
    skyrl_model::layers::set_sdpa_for_decode(args.decode_attention == "sdpa");
    skyrl_model::paged::set_split_decode(!args.no_split_decode);
    let sizes = args.sizes();
    let device = args.device()?;
    let (kind, dtype) = args.kind()?;
    let tmp = tempfile::tempdir()?;
    let subjects: Vec<Subject> = match &args.model_dir {
        Some(dir) => vec![Subject {
            label: dir
                .file_name()
                .map_or("model".into(), |n| n.to_string_lossy().into_owned()),
            dir: dir.clone(),
            device,
            dtype,
        }],
        None => args
            .sizes
            .iter()
            .map(|size| {
                let dir = tmp.path().join(size);
                init_tiny_model(Arch::Qwen2, TinySize::parse(size)?, &dir, args.seed)?;
                Ok(Subject {
                    label: size.clone(),
                    dir,
                    device,
                    dtype,
                })
            })
            .collect::<Result<_>>()?,
    };
    report::header(&args, &sizes);
    let mut results = Vec::new();
    for subject in &subjects {
        let model = subject.load(kind)?;
        report::model_line(subject, &model);
        let mut grpo = Vec::new();
        if !args.skip_grpo {
            for &max_num_seqs in &sizes.max_num_seqs {
                let r = grpo::run(&args, &sizes, subject, subject.load(kind)?, max_num_seqs)?;
                report::grpo(&r);
                grpo.push(r);
            }
        }
        let mixed = if args.skip_mixed {
            None
        } else {
            let r = mixed::run(&args, &sizes, subject, model)?;
            report::mixed(&r);
            Some(r)
        };
        results.push(report::ModelResult {
            model: subject.label.clone(),
            grpo,
            mixed,
        });
    }
    report::summary(&results);
    if let Some(path) = &args.json_out {
        let doc = serde_json::json!({
            "threads": args.threads,
            "device": args.device,
            "dtype": dtype,
            "sizes": sizes,
            "arrival_rate": args.arrival_rate,
            "results": results,
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)?;
    }
    Ok(())
}
