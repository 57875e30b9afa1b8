//! `skyrl tinker-serve`: the Tinker-compatible training service
//! (`skyrl-tinker`) on one base model.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use skyrl_inference::keys::key_or_env;
use skyrl_model::LoadOptions;
use skyrl_serve::LISTENING_PREFIX;
use skyrl_tinker::worker::follow;
use skyrl_tinker::{serve_blocking, start_with, Ranks, ServeOptions, WorkerConfig};

/// The variable `--api-key` defaults to.
pub const TINKER_API_KEY_VAR: &str = "SKYRL_TINKER_API_KEY";

#[derive(Args)]
pub struct TinkerServeArgs {
    /// The base model: a Hugging Face model directory, or a hub name
    /// `org/name[@revision]` already in the Hugging Face cache.
    #[arg(long)]
    base_model: String,
    /// Address to listen on. A non-loopback address needs `--api-key` (or
    /// `--insecure-no-auth`).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0 picks a free one; the address is printed on stdout).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Where checkpoints and the default database live.
    #[arg(long, default_value = "tinker_data")]
    data_dir: PathBuf,
    /// The state database: `sqlite:///PATH` (default: DATA_DIR/tinker.sqlite)
    /// or `postgres://USER[:PASSWORD]@HOST:PORT/DB`.
    #[arg(long)]
    db: Option<String>,
    /// The key clients must send (the client's `TINKER_API_KEY`; it must start
    /// with `tml-`); default `$SKYRL_TINKER_API_KEY`. Without one the server
    /// accepts any request.
    #[arg(long)]
    api_key: Option<String>,
    /// Listen on a non-loopback address without an API key.
    #[arg(long)]
    insecure_no_auth: bool,
    /// Under torchrun/srun: seconds a collective, or a rank taking a request,
    /// may wait for another rank.
    #[arg(long, default_value_t = 600.0)]
    dist_timeout_s: f64,
}

pub fn run(args: TinkerServeArgs) -> anyhow::Result<()> {
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .with_context(|| format!("`{}:{}` is not a socket address", args.host, args.port))?;
    let api_key = key_or_env(&args.api_key, TINKER_API_KEY_VAR);
    if !addr.ip().is_loopback() && api_key.is_none() {
        if !args.insecure_no_auth {
            anyhow::bail!(
                "--host {}: without --api-key (or ${TINKER_API_KEY_VAR}) anyone who reaches the \
                 port could train, sample and download weights; set a key, use a loopback \
                 address, or pass --insecure-no-auth",
                addr.ip()
            );
        }
        tracing::warn!("serving on {addr} without an API key (--insecure-no-auth)");
    }
    let base_dir = skyrl_model::resolve_model(&args.base_model)?;
    if !(args.dist_timeout_s > 0.0 && args.dist_timeout_s.is_finite()) {
        anyhow::bail!("--dist-timeout-s must be a positive number of seconds");
    }
    // Under a launcher every rank holds the models; rank 0 serves.
    let ranks = Ranks::join(Duration::from_secs_f64(args.dist_timeout_s))?;
    let options = LoadOptions {
        // `cuda:LOCAL_RANK` under a launcher, else the first GPU or the CPU.
        device: ranks.device(),
        kind: tch::Kind::Float,
    };
    if ranks.rank() != 0 {
        let config = WorkerConfig {
            base_dir,
            base_name: args.base_model.clone(),
            data_dir: args.data_dir,
            options,
        };
        return follow(config, ranks);
    }
    let state = start_with(
        &ServeOptions {
            base_dir,
            base_name: args.base_model.clone(),
            db: args.db,
            data_dir: args.data_dir,
            api_key,
            options,
        },
        ranks,
    )?;
    let listener = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    println!("{LISTENING_PREFIX}{}", listener.local_addr()?);
    std::io::stdout().flush()?;
    serve_blocking(state, listener)
}
