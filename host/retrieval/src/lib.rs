//! `skyrl-retrieval`: a BM25 retrieval server that speaks Search-R1's /
//! SkyRL's `/retrieve` protocol, so the `search` environment can run against
//! a small local corpus on loopback instead of SkyRL's e5/faiss GPU server
//! (docs/search.md).
//!
//! [`corpus`] reads the JSONL corpus, [`Index`] ranks its passages with
//! Okapi BM25 (the `bm25` crate, Pyserini's k1 = 0.9, b = 0.4), [`protocol`]
//! holds the request and response shapes, and [`router`] / [`serve`] /
//! [`BackgroundServer`] put it behind HTTP.

mod background;
pub mod corpus;
mod index;
pub mod protocol;
mod server;
pub mod tokenize;

pub use background::BackgroundServer;
pub use corpus::{CorpusError, Passage};
pub use index::{Hit, Index, B, K1};
pub use server::{router, serve, serve_blocking, MAX_BODY_BYTES};

/// What `skyrl retrieval-serve` writes to stderr before the address it
/// listens on (`127.0.0.1:8000`).
pub const LISTENING_PREFIX: &str = "skyrl retrieval-serve listening on http://";
