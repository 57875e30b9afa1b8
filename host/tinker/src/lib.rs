//! A Tinker-compatible training service (`skyrl tinker-serve`): the official
//! `tinker` Python client (0.38) creates LoRA models of the served base
//! model, runs `forward_backward` / `optim_step` on the project's model and
//! AdamW, saves weights for sampling and samples them with the built-in
//! engine. Sessions, models, futures and checkpoints live in SQLite or
//! Postgres, so a restarted server still answers every finished future.

pub mod auth;
pub mod checkpoints;
pub mod db;
pub mod error;
pub mod loss;
pub mod proto;
pub mod queue;
pub mod replicas;
pub mod routes;
pub mod sampler;
pub mod store;
pub mod training;
pub mod worker;

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use skyrl_model::LoadOptions;

pub use db::DbUrl;
pub use replicas::Ranks;
pub use routes::{router, AppState};
pub use store::Store;
pub use worker::WorkerConfig;

/// What `skyrl tinker-serve` needs to start.
pub struct ServeOptions {
    /// The base model's directory and the name clients ask for.
    pub base_dir: PathBuf,
    pub base_name: String,
    /// `sqlite:///PATH` (or a bare path) or `postgres://...`; default
    /// `DATA_DIR/tinker.sqlite`.
    pub db: Option<String>,
    /// Where checkpoints are written.
    pub data_dir: PathBuf,
    /// The API key clients must send (`X-API-Key`), if any.
    pub api_key: Option<String>,
    pub options: LoadOptions,
}

/// Opens the store, starts the model thread and returns the router's state
/// (one process).
pub fn start(opts: &ServeOptions) -> Result<AppState> {
    start_with(opts, Ranks::single())
}

/// [`start`] as rank 0 of `ranks` (the other ranks run
/// [`worker::follow`]).
pub fn start_with(opts: &ServeOptions, ranks: Ranks) -> Result<AppState> {
    if let Some(key) = &opts.api_key {
        auth::check_server_key(key)?;
    }
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("cannot create {}", opts.data_dir.display()))?;
    let db = DbUrl::parse(opts.db.as_deref(), &opts.data_dir)?;
    let store = Arc::new(
        Store::open(&db)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {}", db.display(), e.detail))?,
    );
    tracing::info!(db = %db.display(), "state store open");
    let config = WorkerConfig {
        base_dir: opts.base_dir.clone(),
        base_name: opts.base_name.clone(),
        data_dir: opts.data_dir.clone(),
        options: opts.options,
    };
    let worker = worker::spawn(config.clone(), store.clone(), ranks);
    Ok(AppState {
        store,
        worker,
        config,
        api_key: opts.api_key.as_deref().map(Arc::from),
    })
}

/// Serves `state` on `listener` until the process ends.
pub fn serve_blocking(state: AppState, listener: TcpListener) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // Checkpoints whose time-to-live has passed are deleted once a minute
        // (and at start-up).
        let sweeper = state.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(60));
            loop {
                every.tick().await;
                let s = sweeper.clone();
                match tokio::task::spawn_blocking(move || checkpoints::sweep_expired(&s)).await {
                    Ok(Err(e)) => tracing::warn!(error = %e, "checkpoint expiry sweep failed"),
                    Err(e) => tracing::warn!(error = %e, "checkpoint expiry sweep panicked"),
                    Ok(Ok(_)) => {}
                }
            }
        });
        listener.set_nonblocking(true)?;
        let l = tokio::net::TcpListener::from_std(listener)?;
        axum::serve(l, router(state)).await?;
        Ok(())
    })
}
