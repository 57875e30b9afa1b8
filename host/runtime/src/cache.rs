//! Compiled-component cache: in memory per process, and on disk keyed by the
//! component's content hash and the engine's compatibility hash.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::error::{PluginError, Result};

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Already compiled in this process.
    Memory,
    /// Deserialised from the disk cache.
    Disk,
    /// Compiled now (and written to the disk cache when enabled).
    Compiled,
}

/// Caches compiled components.
pub struct ComponentCache {
    dir: Option<PathBuf>,
    engine_key: String,
    memory: Mutex<HashMap<String, Component>>,
}

impl ComponentCache {
    /// `$SKYRL_CACHE_DIR/components`, else the user cache dir.
    pub fn default_dir() -> Option<PathBuf> {
        let base = std::env::var_os("SKYRL_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| dirs::cache_dir().map(|d| d.join("skyrl")))?;
        Some(base.join("components"))
    }

    pub(crate) fn new(dir: Option<PathBuf>, engine: &Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// The on-disk cache directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Compile `bytes` (or fetch the cached compilation). `origin` names the
    /// plugin in errors.
    pub fn load(
        &self,
        engine: &Engine,
        bytes: &[u8],
        origin: &str,
    ) -> Result<(Component, CacheOutcome)> {
        let digest = hex::encode(Sha256::digest(bytes));
        if let Some(component) = self.memory.lock().expect("cache lock").get(&digest) {
            return Ok((component.clone(), CacheOutcome::Memory));
        }
        let (component, outcome) = match self.read_disk(engine, &digest) {
            Some(component) => (component, CacheOutcome::Disk),
            None => {
                let compiled = compile(engine, bytes, origin)?;
                self.write_disk(&digest, &compiled);
                (compiled, CacheOutcome::Compiled)
            }
        };
        self.memory
            .lock()
            .expect("cache lock")
            .insert(digest, component.clone());
        Ok((component, outcome))
    }

    fn entry_path(&self, digest: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{digest}-{}.cwasm", self.engine_key)))
    }

    fn read_disk(&self, engine: &Engine, digest: &str) -> Option<Component> {
        let path = self.entry_path(digest)?;
        if !path.exists() {
            return None;
        }
        // SAFETY: the file was written by `write_disk` from `Component::serialize`
        // for an engine with the same compatibility hash (part of the name), and
        // is only ever replaced atomically. wasmtime re-validates the header.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(component) => Some(component),
            Err(err) => {
                tracing::warn!(path = %path.display(), "ignoring unusable cache entry: {err:#}");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    fn write_disk(&self, digest: &str, component: &Component) {
        let Some(path) = self.entry_path(digest) else {
            return;
        };
        let result = (|| -> anyhow::Result<()> {
            let dir = path.parent().expect("cache entry has a parent");
            std::fs::create_dir_all(dir)?;
            let bytes = component.serialize()?;
            let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
            tmp.write_all(&bytes)?;
            tmp.persist(&path)?;
            Ok(())
        })();
        if let Err(err) = result {
            tracing::warn!(path = %path.display(), "cannot write component cache: {err:#}");
        }
    }
}

fn compile(engine: &Engine, bytes: &[u8], origin: &str) -> Result<Component> {
    if !is_component(bytes) {
        let reason = if bytes.starts_with(b"\0asm") {
            "it is a core WebAssembly module, not a component (wrap it with `wasm-tools component new`)".to_string()
        } else {
            "missing the `\\0asm` component header".to_string()
        };
        return Err(PluginError::Malformed {
            origin: origin.to_string(),
            reason,
        });
    }
    Component::new(engine, bytes).map_err(|e| PluginError::Malformed {
        origin: origin.to_string(),
        reason: format!("{e:#}"),
    })
}

/// Components carry layer 1 in the header (`\0asm` + `0d 00 01 00`).
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes.starts_with(b"\0asm") && bytes[6..8] == [1, 0]
}
