//! `skyrl retrieval-serve`: a BM25 retrieval server (`skyrl-retrieval`) over
//! a JSONL corpus, speaking Search-R1's `/retrieve` protocol for the `search`
//! environment (docs/search.md).

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use skyrl_retrieval::protocol::MAX_TOPK;
use skyrl_retrieval::{serve_blocking, Index, LISTENING_PREFIX};

#[derive(Args)]
pub struct RetrievalServeArgs {
    /// The corpus: JSON lines with a string `contents` (Search-R1's
    /// `"Title"\ntext`) and usually an `id`; every field is returned.
    #[arg(long)]
    corpus: PathBuf,
    /// Address to listen on. A non-loopback address needs `--public`.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0 picks a free one; the address is printed on stderr).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Passages per query when a request gives no `topk`.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=MAX_TOPK as i64))]
    topk: u16,
    /// Listen on a non-loopback address: anyone who reaches the port can read
    /// the corpus.
    #[arg(long)]
    public: bool,
}

pub fn run(args: RetrievalServeArgs) -> anyhow::Result<()> {
    let addr = resolve(&args.host, args.port)?;
    if !addr.ip().is_loopback() && !args.public {
        anyhow::bail!(
            "--host {}: anyone who reaches the port could read the whole corpus; use a \
             loopback address or pass --public",
            addr.ip()
        );
    }
    let started = Instant::now();
    let index = Index::load(&args.corpus)?;
    tracing::info!(
        passages = index.len(),
        avgdl = index.avgdl(),
        seconds = started.elapsed().as_secs_f64(),
        "indexed {}",
        args.corpus.display()
    );
    let listener = TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
    eprintln!("{LISTENING_PREFIX}{}", listener.local_addr()?);
    serve_blocking(listener, Arc::new(index), usize::from(args.topk))
        .context("retrieval server failed")
}

/// The first address `host:port` resolves to (`localhost` and IPv6 included).
fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve --host {host}"))?
        .next()
        .with_context(|| format!("--host {host} resolves to no address"))
}
