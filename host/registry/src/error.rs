//! Errors of registry operations, each naming what went wrong and what to do.

use std::path::PathBuf;

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The reference string does not parse.
    #[error("invalid plugin reference `{reference}`: {reason}")]
    InvalidReference { reference: String, reason: String },
    /// The registry could not be reached (down, wrong port, DNS, TLS).
    #[error("registry {registry} is unreachable: {detail}")]
    Unreachable { registry: String, detail: String },
    /// The registry answered but has no such repository, tag or digest.
    #[error("{reference} was not found in the registry{hint}")]
    NotFound { reference: String, hint: String },
    /// No tag satisfies a semver requirement.
    #[error("no version of {repository} matches `{requirement}` (available: {available})")]
    NoMatchingVersion {
        repository: String,
        requirement: String,
        available: String,
    },
    /// Downloaded or cached content does not hash to the digest that names it.
    #[error("digest mismatch for {what}: expected {expected}, got {actual}")]
    DigestMismatch {
        what: String,
        expected: String,
        actual: String,
    },
    /// The artifact is not a single-layer Wasm component artifact.
    #[error("{reference} is not a Wasm plugin artifact: {detail}")]
    NotAWasmArtifact { reference: String, detail: String },
    /// The registry refused our credentials (or demanded some).
    #[error("registry {registry} refused authentication: {detail} (credentials come from the docker config: DOCKER_CONFIG or ~/.docker/config.json, `docker login`)")]
    Unauthorized { registry: String, detail: String },
    /// Reading docker credentials failed.
    #[error("cannot read registry credentials for {registry}: {detail}")]
    Credentials { registry: String, detail: String },
    /// A lock file problem.
    #[error("lock file {path}: {detail}")]
    Lock { path: PathBuf, detail: String },
    /// A local file problem.
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The registry answered something we cannot interpret.
    #[error("registry {registry}: {detail}")]
    Protocol { registry: String, detail: String },
}

/// Result alias for registry operations.
pub type Result<T, E = RegistryError> = std::result::Result<T, E>;

impl RegistryError {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
