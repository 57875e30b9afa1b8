//! The error type plugin code returns.

use crate::bindings::skyrl::plugin::types::PluginError;

/// An error reported by a plugin; the host receives it as a typed
/// `plugin-error` (it is not a trap, the instance stays usable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The JSON config or extras were unusable.
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// The call's input was unusable (bad action, bad arguments).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Anything else that went wrong inside the plugin.
    #[error("{0}")]
    Failed(String),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::InvalidConfig`] from any message.
    pub fn config(message: impl std::fmt::Display) -> Self {
        Self::InvalidConfig(message.to_string())
    }

    /// An [`Error::InvalidInput`] from any message.
    pub fn input(message: impl std::fmt::Display) -> Self {
        Self::InvalidInput(message.to_string())
    }

    /// An [`Error::Failed`] from any message.
    pub fn failed(message: impl std::fmt::Display) -> Self {
        Self::Failed(message.to_string())
    }
}

impl From<Error> for PluginError {
    fn from(error: Error) -> Self {
        match error {
            Error::InvalidConfig(m) => PluginError::InvalidConfig(m),
            Error::InvalidInput(m) => PluginError::InvalidInput(m),
            Error::Failed(m) => PluginError::Failed(m),
        }
    }
}
