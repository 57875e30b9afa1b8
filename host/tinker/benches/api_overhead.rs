//! The Tinker API's overhead: the same LoRA training steps (forward-backward
//! and AdamW) and the same sampling, once in process and once through
//! `skyrl tinker-serve` driven by the official `tinker` client, side by side
//! in one run; and the same sampling through `skyrl serve` (the OpenAI API,
//! the official `openai` client) on the same weights. Prints tokens/s of each
//! and the ratios.
//!
//! `cargo build --release -p skyrl-cli && cargo bench -p skyrl-tinker --bench api_overhead [-- --steps N]`

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use skyrl_model::{init_tiny_model, Arch, InferenceEngine, LoadOptions, SamplingParams, TinySize};
use skyrl_tinker::loss::LossFn;
use skyrl_tinker::training::{AdamStep, DatumInput, TrainingModel};
use skyrl_tinker::{serve_blocking, start, ServeOptions};

const BATCH: usize = 8;
const TOKENS: usize = 128;
const SAMPLES: usize = 16;
const NEW_TOKENS: usize = 64;

fn cpu() -> LoadOptions {
    LoadOptions {
        device: tch::Device::Cpu,
        kind: tch::Kind::Float,
    }
}

fn python() -> PathBuf {
    std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/python")
        })
}

/// The bench's datums: `BATCH` sequences of `TOKENS` token ids.
fn data() -> Vec<DatumInput> {
    (0..BATCH)
        .map(|b| {
            let toks: Vec<i64> = (0..=TOKENS as i64)
                .map(|t| 3 + (t * 7 + b as i64) % 90)
                .collect();
            DatumInput {
                tokens: toks[..TOKENS].to_vec(),
                targets: toks[1..].to_vec(),
                weights: vec![1.0; TOKENS],
                sampler_logprobs: vec![],
                advantages: vec![],
            }
        })
        .collect()
}

fn main() {
    tch::set_num_threads(1);
    let args: Vec<String> = std::env::args().collect();
    let steps: usize = args
        .iter()
        .position(|a| a == "--steps")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    init_tiny_model(Arch::Qwen2, TinySize::Small, &model, 0).unwrap();
    let adam = AdamStep {
        learning_rate: 1e-4,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-12,
        weight_decay: 0.0,
        grad_clip_norm: 0.0,
    };

    // In process: the same model code and engine the server runs, measured
    // before and after the API run (the mean is the baseline; the spread
    // shows this machine's drift).
    let mut direct = TrainingModel::new(&model, "small", 8, 1, &cpu()).unwrap();
    let batch = data();
    // As the server's sampler: the model and its tokenizer (stop checks).
    let engine = InferenceEngine::new(
        skyrl_model::CausalLm::from_pretrained(&model, &cpu()).unwrap(),
        skyrl_model::Tokenizer::from_dir(&model).ok(),
    );
    let params = SamplingParams {
        max_tokens: NEW_TOKENS,
        ignore_eos: true,
        seed: Some(0),
        ..SamplingParams::default()
    };
    let prompts = vec![vec![5i64, 9, 12, 20]; SAMPLES];
    let mut measure = || {
        direct.pass(&batch, LossFn::CrossEntropy, true).unwrap();
        direct.optim_step(&adam);
        let t = Instant::now();
        for _ in 0..steps {
            direct.pass(&batch, LossFn::CrossEntropy, true).unwrap();
            direct.optim_step(&adam);
        }
        let train = (steps * BATCH * TOKENS) as f64 / t.elapsed().as_secs_f64();
        engine.generate(&prompts, &params).unwrap();
        let t = Instant::now();
        for _ in 0..steps {
            engine.generate(&prompts, &params).unwrap();
        }
        let sample = (steps * SAMPLES * NEW_TOKENS) as f64 / t.elapsed().as_secs_f64();
        (train, sample)
    };
    let before = measure();

    // Through the API and the official client.
    let state = start(&ServeOptions {
        base_dir: model.clone(),
        base_name: "small".into(),
        db: None,
        data_dir: dir.path().join("data"),
        api_key: None,
        options: cpu(),
    })
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || serve_blocking(state, listener).unwrap());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/api_client.py");
    let out = Command::new(python())
        .arg(script)
        .args([
            &url,
            "small",
            &steps.to_string(),
            &BATCH.to_string(),
            &TOKENS.to_string(),
        ])
        .args([&SAMPLES.to_string(), &NEW_TOKENS.to_string()])
        .env("TINKER_API_KEY", "tml-local")
        .output()
        .expect("run the project venv's python (scripts/setup)");
    assert!(
        out.status.success(),
        "api_client.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let train_api = v["train_tokens_per_s"].as_f64().unwrap();
    let sample_api = v["sample_tokens_per_s"].as_f64().unwrap();
    let serve = serve_sampling(&model, steps);
    let after = measure();
    let train_direct = (before.0 + after.0) / 2.0;
    let sample_direct = (before.1 + after.1) / 2.0;
    println!("model: TinySize::Small, LoRA rank 8, {BATCH} x {TOKENS} tokens per step, {steps} steps, one torch thread");
    println!(
        "train  in process {train_direct:>7.0} tok/s ({:.0} before, {:.0} after) | through the API {train_api:>7.0} tok/s | API/direct {:.3}",
        before.0, after.0, train_api / train_direct
    );
    println!(
        "sample in process {sample_direct:>7.0} tok/s ({:.0} before, {:.0} after) | through the API {sample_api:>7.0} tok/s | API/direct {:.3}  ({SAMPLES} samples x {NEW_TOKENS} tokens)",
        before.1, after.1, sample_api / sample_direct
    );
    match serve {
        Some(serve) => println!(
            "sample through skyrl serve (OpenAI API) {serve:>7.0} tok/s | tinker-serve/skyrl serve {:.3}",
            sample_api / serve
        ),
        None => println!(
            "skyrl serve: not measured (build the CLI first: cargo build --release -p skyrl-cli)"
        ),
    }
}

/// The same sampling (`SAMPLES` x `NEW_TOKENS` from the same prompt) through
/// `skyrl serve` on `model` and the official `openai` client: tokens/s, or
/// `None` when the CLI is not built.
fn serve_sampling(model: &std::path::Path, steps: usize) -> Option<f64> {
    // target/release/deps/api_overhead-HASH -> target/release/skyrl
    let exe = std::env::current_exe().ok()?;
    let skyrl = exe.parent()?.parent()?.join("skyrl");
    if !skyrl.is_file() {
        return None;
    }
    let mut child = Command::new(skyrl)
        .args(["serve", "--model"])
        .arg(model)
        .args(["--port", "0"])
        .env("OMP_NUM_THREADS", "1")
        .env_remove("SKYRL_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start skyrl serve");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let url = format!(
        "http://{}",
        line.trim()
            .strip_prefix("skyrl serve listening on http://")
            .unwrap_or_else(|| panic!("skyrl serve printed {line:?}"))
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/api_client.py");
    let out = Command::new(python())
        .arg(script)
        .args(["openai", &url, &steps.to_string()])
        .args([&SAMPLES.to_string(), &NEW_TOKENS.to_string()])
        .output()
        .expect("run the project venv's python (scripts/setup)");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        out.status.success(),
        "api_client.py openai failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    v["sample_tokens_per_s"].as_f64()
}
