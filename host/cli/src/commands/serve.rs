//! `skyrl serve`: the built-in engine behind an OpenAI-compatible HTTP API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use skyrl_model::{CausalLm, InferenceEngine, LoadOptions, Tokenizer};
use skyrl_serve::server::{serve_blocking, AppState};
use skyrl_serve::EngineWorker;

#[derive(Args)]
pub struct ServeArgs {
    /// Hugging Face model directory (config, safetensors, tokenizer).
    #[arg(long)]
    model: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on.
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Model name reported by /v1/models (default: the directory name).
    #[arg(long)]
    served_model_name: Option<String>,
    /// Most sequences decoded together.
    #[arg(long, default_value_t = 64)]
    max_num_seqs: usize,
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
    let state = AppState {
        worker: EngineWorker::spawn(engine),
        tokenizer: Arc::new(tokenizer),
        model_name,
    };
    serve_blocking(state, addr)
}
