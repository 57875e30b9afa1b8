//! `skyrl tinker-serve`: the Tinker-compatible training service
//! (`skyrl-tinker`) on one base model.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use skyrl_model::LoadOptions;
use skyrl_serve::LISTENING_PREFIX;
use skyrl_tinker::{serve_blocking, start, ServeOptions};

#[derive(Args)]
pub struct TinkerServeArgs {
    /// The base model: a Hugging Face model directory, or a hub name
    /// `org/name[@revision]` already in the Hugging Face cache.
    #[arg(long)]
    base_model: String,
    /// Address to listen on. The service has no authentication yet, so only
    /// loopback addresses are accepted unless `--insecure-no-auth`.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0 picks a free one; the address is printed on stdout).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Where checkpoints and the default database live.
    #[arg(long, default_value = "tinker_data")]
    data_dir: PathBuf,
    /// The state database: `sqlite:///PATH` (default: DATA_DIR/tinker.sqlite).
    #[arg(long)]
    db: Option<String>,
    /// Listen on a non-loopback address without authentication.
    #[arg(long)]
    insecure_no_auth: bool,
}

pub fn run(args: TinkerServeArgs) -> anyhow::Result<()> {
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .with_context(|| format!("`{}:{}` is not a socket address", args.host, args.port))?;
    if !addr.ip().is_loopback() && !args.insecure_no_auth {
        anyhow::bail!(
            "--host {}: the Tinker service has no authentication yet, so anyone who reaches the \
             port could train and sample; use a loopback address or pass --insecure-no-auth",
            addr.ip()
        );
    }
    let base_dir = skyrl_model::resolve_model(&args.base_model)?;
    let state = start(&ServeOptions {
        base_dir,
        base_name: args.base_model.clone(),
        db: args.db,
        data_dir: args.data_dir,
        options: LoadOptions {
            device: tch::Device::cuda_if_available(),
            kind: tch::Kind::Float,
        },
    })?;
    let listener = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    println!("{LISTENING_PREFIX}{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    serve_blocking(state, listener)
}
