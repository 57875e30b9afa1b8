//! A Tinker-compatible training service (`skyrl tinker-serve`): the official
//! `tinker` Python client (0.38) creates LoRA models of the served base
//! model, runs `forward_backward` / `optim_step` on the project's model and
//! AdamW, saves weights for sampling and samples them with the built-in
//! engine. Sessions, models, futures and checkpoints live in SQLite, so a
//! restarted server still answers every finished future.

pub mod error;
pub mod loss;
pub mod proto;
pub mod routes;
pub mod sampler;
pub mod store;
pub mod training;
pub mod worker;

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use skyrl_model::LoadOptions;

pub use routes::{router, AppState};
pub use store::Store;
pub use worker::WorkerConfig;

/// What `skyrl tinker-serve` needs to start.
pub struct ServeOptions {
    /// The base model's directory and the name clients ask for.
    pub base_dir: PathBuf,
    pub base_name: String,
    /// `sqlite:///PATH` (or a bare path); default `DATA_DIR/tinker.sqlite`.
    pub db: Option<String>,
    /// Where checkpoints are written.
    pub data_dir: PathBuf,
    pub options: LoadOptions,
}

/// The SQLite file a `--db` URL names; other databases are refused by name.
pub fn sqlite_path(db: Option<&str>, data_dir: &std::path::Path) -> Result<PathBuf> {
    match db {
        None => Ok(data_dir.join("tinker.sqlite")),
        Some(url) => match url
            .strip_prefix("sqlite:///")
            .or_else(|| url.strip_prefix("sqlite://"))
        {
            Some(path) if !path.is_empty() => Ok(PathBuf::from(if url.starts_with("sqlite:///") {
                format!("/{path}")
            } else {
                path.to_string()
            })),
            _ if !url.contains("://") => Ok(PathBuf::from(url)),
            _ => bail!("--db `{url}`: only sqlite:///PATH databases are supported"),
        },
    }
}

/// Opens the store, starts the model thread and returns the router's state.
pub fn start(opts: &ServeOptions) -> Result<AppState> {
    std::fs::create_dir_all(&opts.data_dir)
        .with_context(|| format!("cannot create {}", opts.data_dir.display()))?;
    let db = sqlite_path(opts.db.as_deref(), &opts.data_dir)?;
    let store = Arc::new(
        Store::open(&db)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {}", db.display(), e.detail))?,
    );
    let config = WorkerConfig {
        base_dir: opts.base_dir.clone(),
        base_name: opts.base_name.clone(),
        data_dir: opts.data_dir.clone(),
        options: opts.options,
    };
    let worker = worker::spawn(config.clone(), store.clone());
    Ok(AppState {
        store,
        worker,
        config,
    })
}

/// Serves `state` on `listener` until the process ends.
pub fn serve_blocking(state: AppState, listener: TcpListener) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        listener.set_nonblocking(true)?;
        let l = tokio::net::TcpListener::from_std(listener)?;
        axum::serve(l, router(state)).await?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn db_urls_name_sqlite_files_and_refuse_other_databases() {
        let data = Path::new("/data");
        assert_eq!(sqlite_path(None, data).unwrap(), data.join("tinker.sqlite"));
        assert_eq!(
            sqlite_path(Some("sqlite:///var/t.db"), data).unwrap(),
            PathBuf::from("/var/t.db")
        );
        assert_eq!(
            sqlite_path(Some("sqlite://rel.db"), data).unwrap(),
            PathBuf::from("rel.db")
        );
        assert_eq!(
            sqlite_path(Some("plain.db"), data).unwrap(),
            PathBuf::from("plain.db")
        );
        let e = sqlite_path(Some("postgres://h/db"), data)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--db") && e.contains("postgres://h/db"), "{e}");
    }
}
