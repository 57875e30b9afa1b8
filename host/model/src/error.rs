//! Error type of the crate.

use std::path::Path;

/// Everything that can go wrong loading, running or saving a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `config.json` is missing a field, has a bad value or an unsupported feature.
    #[error("model config: {0}")]
    Config(String),
    /// Weights do not match the config (missing tensor, wrong shape, ...).
    #[error("weights: {0}")]
    Weights(String),
    /// Tokenizer or chat template problem.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// Bad arguments to a model call (empty prompt, id out of range, ...).
    #[error("invalid input: {0}")]
    Input(String),
    /// A LoRA spec or adapter is unusable (bad rank, a target that matches nothing, ...).
    #[error("LoRA: {0}")]
    Lora(String),
    /// libtorch reported an error.
    #[error("torch: {0}")]
    Torch(#[from] tch::TchError),
}

impl ModelError {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        ModelError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Result alias of the crate.
pub type Result<T, E = ModelError> = std::result::Result<T, E>;
