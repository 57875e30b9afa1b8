//! Registry credentials from the usual docker config (`DOCKER_CONFIG` or
//! `~/.docker/config.json`, including credential helpers), or
//! `SKYRL_REGISTRY_USERNAME`/`SKYRL_REGISTRY_PASSWORD` for CI.

use docker_credential::{CredentialRetrievalError, DockerCredential};
use oci_client::secrets::RegistryAuth;

use crate::error::{RegistryError, Result};

/// The credentials to use for `registry` (`host[:port]`); anonymous when none are configured.
pub fn registry_auth(registry: &str) -> Result<RegistryAuth> {
    if let (Ok(user), Ok(password)) = (
        std::env::var("SKYRL_REGISTRY_USERNAME"),
        std::env::var("SKYRL_REGISTRY_PASSWORD"),
    ) {
        return Ok(RegistryAuth::Basic(user, password));
    }
    let config = std::env::var_os("DOCKER_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| dirs::home_dir().map(|h| h.join(".docker")))
        .map(|d| d.join("config.json"));
    if !config.as_deref().is_some_and(std::path::Path::is_file) {
        return Ok(RegistryAuth::Anonymous);
    }
    match docker_credential::get_credential(registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(RegistryAuth::Basic(user, password))
        }
        Ok(DockerCredential::IdentityToken(token)) => Ok(RegistryAuth::Bearer(token)),
        Err(CredentialRetrievalError::ConfigNotFound)
        | Err(CredentialRetrievalError::NoCredentialConfigured) => Ok(RegistryAuth::Anonymous),
        Err(e) => Err(RegistryError::Credentials {
            registry: registry.to_string(),
            detail: e.to_string(),
        }),
    }
}
