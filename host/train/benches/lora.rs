//! LoRA against full fine-tuning: trainable parameters, optimizer-state and
//! gradient bytes, and the time of one training step (forward + backward of
//! the response log-probs + clipping + AdamW), on the `tiny` and `small`
//! presets and a wider model (hidden 768, 4 layers, vocab 32000), one thread.
//!
//! LoRA is rank 8, alpha 16, on every linear layer (`all-linear`, as skyrl's
//! default `target_modules`). Each step runs a fixed batch of 8 rows x 128
//! tokens; full and LoRA steps alternate after one untimed step each, so
//! machine noise hits both alike; times are medians.
//!
//! Run: `OMP_WAIT_POLICY=PASSIVE cargo bench -p skyrl-train --bench lora`
//! (`-- --iters K` changes the number of timed steps, default 5).

mod common;

use std::time::Instant;

use common::{median, number_flag};
use skyrl_model::{
    init_tiny_model, Arch, CausalLm, LoadOptions, LogprobOptions, LoraInit, LoraSpec, ModelConfig,
    ModuleSelector, TinySize,
};
use skyrl_train::config::OptimizerConfig;
use skyrl_train::optim::AdamW;
use tch::{Device, Kind, Tensor};

const ROWS: i64 = 8;
const TOKENS: i64 = 128;

/// One way of training a model: the model and its optimizer.
struct Run {
    model: CausalLm,
    optimizer: AdamW,
    times: Vec<f64>,
}

impl Run {
    fn new(dir: &std::path::Path, lora: bool) -> Run {
        let options = LoadOptions {
            device: Device::Cpu,
            kind: Kind::Float,
        };
        let mut model = CausalLm::from_pretrained(dir, &options).expect("load model");
        if lora {
            model
                .attach_lora(LoraSpec {
                    rank: 8,
                    alpha: 16.0,
                    dropout: 0.0,
                    target_modules: ModuleSelector::AllLinear,
                    exclude_modules: None,
                    init: LoraInit::Kaiming,
                    seed: 0,
                    base_model_name_or_path: None,
                })
                .expect("attach LoRA");
        }
        let config = OptimizerConfig {
            lr: 1e-4,
            ..OptimizerConfig::default()
        };
        let optimizer =
            AdamW::from_config(model.trainable_parameters(), &config, 1000).expect("optimizer");
        Run {
            model,
            optimizer,
            times: Vec::new(),
        }
    }

    fn step(&mut self, ids: &Tensor, mask: &Tensor, timed: bool) {
        let start = Instant::now();
        self.optimizer.zero_grad();
        let out = self
            .model
            .forward_logprobs_chunked(ids, mask, &LogprobOptions::default(), None)
            .expect("forward");
        (-out.logprobs.mean(Kind::Float)).backward();
        self.optimizer.step(1.0);
        if timed {
            self.times.push(start.elapsed().as_secs_f64());
        }
    }

    fn trainable(&self) -> i64 {
        self.model
            .trainable_parameters()
            .iter()
            .map(|(_, t)| t.numel() as i64)
            .sum()
    }

    fn gradient_bytes(&self) -> i64 {
        self.model
            .trainable_parameters()
            .iter()
            .map(|(_, t)| t.grad())
            .filter(Tensor::defined)
            .map(|g| g.numel() as i64 * 4)
            .sum()
    }
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn bench(name: &str, dir: &std::path::Path, vocab: i64, iters: usize) {
    tch::manual_seed(0);
    let ids = Tensor::randint(vocab, [ROWS, TOKENS], (Kind::Int64, Device::Cpu));
    let mask = Tensor::ones([ROWS, TOKENS], (Kind::Int64, Device::Cpu));
    let mut full = Run::new(dir, false);
    let mut lora = Run::new(dir, true);
    full.step(&ids, &mask, false);
    lora.step(&ids, &mask, false);
    for _ in 0..iters {
        full.step(&ids, &mask, true);
        lora.step(&ids, &mask, true);
    }
    let params = full.model.num_parameters();
    let (tf, tl) = (median(&full.times), median(&lora.times));
    let (of, ol) = (full.optimizer.state_bytes(), lora.optimizer.state_bytes());
    println!(
        "| {name} ({:.1}M) | {} / {} ({:.2}%) | {:.2} / {:.3} MiB ({:.0}x less) | {:.2} / {:.3} MiB | {:.1} / {:.1} ms | {:.2}x |",
        params as f64 / 1e6,
        full.trainable(),
        lora.trainable(),
        100.0 * lora.trainable() as f64 / full.trainable() as f64,
        mib(of),
        mib(ol),
        of as f64 / ol as f64,
        mib(full.gradient_bytes()),
        mib(lora.gradient_bytes()),
        tf * 1e3,
        tl * 1e3,
        tf / tl,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let iters = number_flag(&args, "--iters").map_or(5, |n| n as usize);
    tch::set_num_threads(1);
    let tmp = tempfile::tempdir().expect("temp dir");
    println!(
        "LoRA rank 8 (all-linear) vs full fine-tuning; step = fwd+bwd of {ROWS}x{TOKENS} tokens + clip + AdamW, one thread, median of {iters}"
    );
    println!(
        "| model | trainable, full / LoRA | optimizer state, full / LoRA | gradients, full / LoRA | step, full / LoRA | LoRA speed-up |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, size) in [("tiny", TinySize::Tiny), ("small", TinySize::Small)] {
        let dir = tmp.path().join(name);
        init_tiny_model(Arch::Qwen2, size, &dir, 0).expect("init model");
        let vocab = ModelConfig::load(&dir).expect("config").vocab_size;
        bench(name, &dir, vocab, iters);
    }
    // A wider model, where the weight gradients LoRA skips cost real time.
    let dir = tmp.path().join("wide");
    init_tiny_model(Arch::Qwen2, TinySize::Small, &dir, 0).expect("init model");
    let mut config = ModelConfig::load(&dir).expect("config");
    config.hidden_size = 768;
    config.intermediate_size = 2048;
    config.num_attention_heads = 12;
    config.num_key_value_heads = Some(2);
    config.num_hidden_layers = 4;
    config.vocab_size = 32000;
    config.head_dim = None;
    let model = CausalLm::new(
        config,
        &LoadOptions {
            device: Device::Cpu,
            kind: Kind::Float,
        },
        0,
    )
    .expect("wide model");
    model
        .write_into(&dir, usize::MAX)
        .expect("write wide model");
    bench("hidden 768, 4 layers", &dir, 32000, iters);
}
