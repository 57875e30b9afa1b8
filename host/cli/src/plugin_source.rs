//! `--plugin` values: local paths or `oci://` registry references, the
//! latter resolved through a lock file into verified files in the cache.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use skyrl_registry::{PluginRef, PluginResolver, RegistryClient};

/// Lock-file flags shared by commands that take `--plugin`.
#[derive(Args, Clone, Debug)]
pub struct LockArgs {
    /// Lock file pinning `oci://` plugins to digests (written when a new
    /// reference is resolved).
    #[arg(long, default_value = "skyrl.lock")]
    pub lock: PathBuf,
    /// Fail instead of resolving any `oci://` reference the lock file does not pin.
    #[arg(long)]
    pub locked: bool,
}

/// Local files for `specs` (paths are checked, registry references pulled).
pub fn resolve_plugin_files(specs: &[&str], lock: &LockArgs) -> anyhow::Result<Vec<PathBuf>> {
    let any_remote = specs.iter().any(|s| PluginRef::is_oci(s));
    let client = if any_remote {
        Some(RegistryClient::from_env()?)
    } else {
        None
    };
    let mut resolver = client
        .as_ref()
        .map(|c| PluginResolver::new(c, Some(lock.lock.clone()), lock.locked))
        .transpose()?;
    let mut files = Vec::with_capacity(specs.len());
    for spec in specs {
        match resolver.as_mut().filter(|_| PluginRef::is_oci(spec)) {
            Some(resolver) => {
                let pulled = resolver
                    .resolve(spec)
                    .with_context(|| format!("cannot fetch plugin {spec}"))?;
                tracing::info!(reference = %pulled.reference, path = %pulled.path.display(), cached = pulled.from_cache, "plugin resolved");
                files.push(pulled.path);
            }
            None => {
                let path = PathBuf::from(spec);
                if !path.is_file() {
                    bail!(
                        "plugin {spec} does not exist (build plugins with scripts/build-plugins, or use oci://host/ns/name:version)"
                    );
                }
                files.push(path);
            }
        }
    }
    if let Some(resolver) = resolver.as_mut() {
        if resolver.save()? {
            eprintln!("wrote lock file {}", lock.lock.display());
        }
    }
    Ok(files)
}
