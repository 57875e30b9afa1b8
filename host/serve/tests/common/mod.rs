//! Helpers shared by `skyrl serve`'s integration tests: a runtime, a router
//! on a free loopback port, and the server state of a model directory.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use skyrl_model::{CausalLm, InferenceEngine, LoadOptions, Tokenizer};
use skyrl_serve::server::AppState;
use skyrl_serve::EngineWorker;

/// CPU fp32 options (tests are deterministic on the CPU).
pub fn cpu() -> LoadOptions {
    LoadOptions {
        device: tch::Device::Cpu,
        kind: tch::Kind::Float,
    }
}

/// A two-thread runtime.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs an axum router on a free loopback port in a background runtime;
/// returns its url.
pub fn spawn_router(app: axum::Router) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        rt().block_on(async move {
            listener.set_nonblocking(true).unwrap();
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(l, app).await.unwrap();
        });
    });
    url
}

/// The in-process engine for the model in `dir`.
pub fn local_engine(dir: &Path) -> InferenceEngine {
    InferenceEngine::new(
        CausalLm::from_pretrained(dir, &cpu()).unwrap(),
        Some(Tokenizer::from_dir(dir).unwrap()),
    )
}

/// Server state for the model in `dir`, served as `tiny`, without keys,
/// limits or a weights root (add them with `AppState::with_*`).
pub fn tiny_state(dir: &Path) -> AppState {
    AppState::new(
        EngineWorker::spawn(local_engine(dir)),
        Tokenizer::from_dir(dir).unwrap(),
        "tiny".into(),
    )
}

/// The Python interpreter with the `openai` package: `$SKYRL_PYTHON`, else the
/// project venv (scripts/setup).
pub fn python() -> PathBuf {
    let p = std::env::var_os("SKYRL_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.deps/venv/bin/python")
        });
    assert!(
        p.exists(),
        "the OpenAI client tests need Python with `openai` (scripts/setup): set SKYRL_PYTHON (tried {})",
        p.display()
    );
    p
}
