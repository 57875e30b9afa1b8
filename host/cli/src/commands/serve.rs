//! `skyrl serve`: the built-in engine behind an OpenAI-compatible HTTP API.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use skyrl_model::{CausalLm, InferenceEngine, LoadOptions, Tokenizer};
use skyrl_serve::server::{serve_blocking, AppState};
use skyrl_serve::{EngineWorker, LISTENING_PREFIX};

#[derive(Args)]
pub struct ServeArgs {
    /// Hugging Face model directory (config, safetensors, tokenizer).
    #[arg(long)]
    model: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0 picks a free one; the address is printed on stdout).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Model name reported by /v1/models (default: the directory name).
    #[arg(long)]
    served_model_name: Option<String>,
    /// Most sequences decoded together.
    #[arg(long, default_value_t = 64)]
    max_num_seqs: usize,
    /// Milliseconds the engine waits for more requests to join a decode batch.
    #[arg(long, default_value_t = 3)]
    batch_window_ms: u64,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let options = LoadOptions {
        device: tch::Device::cuda_if_available(),
        kind: tch::Kind::Float,
    };
    let model = CausalLm::from_pretrained(&args.model, &options)
        .with_context(|| format!("cannot load the model from {}", args.model.display()))?;
    let tokenizer = Tokenizer::from_dir(&args.model)?;
    let engine = InferenceEngine::new(model, Some(Tokenizer::from_dir(&args.model)?))
        .with_max_batch(args.max_num_seqs);
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .with_context(|| format!("`{}:{}` is not a socket address", args.host, args.port))?;
    let model_name = args.served_model_name.unwrap_or_else(|| {
        args.model
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "skyrl".into())
    });
    let worker =
        EngineWorker::spawn_with_window(engine, Duration::from_millis(args.batch_window_ms));
    let state = AppState::new(worker, tokenizer, model_name);
    let listener = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    println!("{LISTENING_PREFIX}{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    serve_blocking(state, listener)
}
