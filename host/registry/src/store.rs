//! The local content-addressed cache: blobs and manifests named by their digests.
//!
//! Layout under the root: `blobs/sha256/<hex>` (component bytes),
//! `manifests/sha256/<hex>.json` (raw manifests) and `tmp/` (downloads in
//! progress). Everything enters through a temp file that is verified, then
//! renamed, so a failed or interrupted download never leaves a half-written
//! entry, and a cached entry is re-verified before use.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tempfile::NamedTempFile;

use crate::error::{RegistryError, Result};

/// A digest-addressed directory of plugin blobs and manifests.
#[derive(Debug, Clone)]
pub struct PluginStore {
    root: PathBuf,
}

/// `sha256:<hex>` of some bytes.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

impl PluginStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `$SKYRL_CACHE_DIR/oci`, else `<user cache dir>/skyrl/oci`.
    pub fn default_root() -> PathBuf {
        std::env::var_os("SKYRL_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| dirs::cache_dir().map(|d| d.join("skyrl")))
            .unwrap_or_else(|| std::env::temp_dir().join("skyrl-cache"))
            .join("oci")
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn hex(digest: &str) -> Result<&str> {
        crate::reference::validate_digest(digest).map_err(|reason| {
            RegistryError::InvalidReference {
                reference: digest.to_string(),
                reason,
            }
        })?;
        Ok(&digest["sha256:".len()..])
    }

    fn blob_path(&self, digest: &str) -> Result<PathBuf> {
        Ok(self.root.join("blobs/sha256").join(Self::hex(digest)?))
    }

    fn manifest_path(&self, digest: &str) -> Result<PathBuf> {
        Ok(self
            .root
            .join("manifests/sha256")
            .join(format!("{}.json", Self::hex(digest)?)))
    }

    /// The cached blob for `digest`, if present and intact. A corrupt entry is
    /// removed (and reported as absent) so the next pull replaces it.
    pub fn blob(&self, digest: &str) -> Result<Option<PathBuf>> {
        let path = self.blob_path(digest)?;
        Ok(self.read_verified(&path, digest)?.map(|_| path))
    }

    /// The cached raw manifest for `digest`, if present and intact.
    pub fn manifest(&self, digest: &str) -> Result<Option<Vec<u8>>> {
        let path = self.manifest_path(digest)?;
        self.read_verified(&path, digest)
    }

    fn read_verified(&self, path: &Path, digest: &str) -> Result<Option<Vec<u8>>> {
        match std::fs::read(path) {
            Ok(bytes) if sha256_digest(&bytes) == digest => Ok(Some(bytes)),
            Ok(_) => {
                tracing::warn!(path = %path.display(), "cached entry is corrupt; removing it");
                std::fs::remove_file(path)
                    .map_err(|e| RegistryError::io("removing corrupt cache entry", path, e))?;
                Ok(None)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(RegistryError::io("reading cache entry", path, e)),
        }
    }

    /// A temp file inside the store for a download in progress (deleted on drop).
    pub fn begin_download(&self) -> Result<NamedTempFile> {
        let tmp = self.root.join("tmp");
        std::fs::create_dir_all(&tmp)
            .map_err(|e| RegistryError::io("creating cache directory", &tmp, e))?;
        NamedTempFile::new_in(&tmp)
            .map_err(|e| RegistryError::io("creating download file in", &tmp, e))
    }

    /// Verifies a finished download against `digest` (and `size` if known) and
    /// moves it into place; on any mismatch the temp file is deleted.
    pub fn commit_blob(
        &self,
        download: NamedTempFile,
        digest: &str,
        size: Option<u64>,
    ) -> Result<PathBuf> {
        let bytes = std::fs::read(download.path())
            .map_err(|e| RegistryError::io("reading download", download.path(), e))?;
        let actual = sha256_digest(&bytes);
        if actual != digest {
            return Err(RegistryError::DigestMismatch {
                what: "component layer".into(),
                expected: digest.to_string(),
                actual,
            });
        }
        if let Some(size) = size.filter(|s| *s != bytes.len() as u64) {
            return Err(RegistryError::DigestMismatch {
                what: format!("component layer size (expected {size} bytes)"),
                expected: digest.to_string(),
                actual: format!("{} bytes", bytes.len()),
            });
        }
        let path = self.blob_path(digest)?;
        persist(download, &path)?;
        Ok(path)
    }

    /// Stores raw manifest bytes under their digest, which must equal `digest`.
    pub fn put_manifest(&self, digest: &str, bytes: &[u8]) -> Result<()> {
        let actual = sha256_digest(bytes);
        if actual != digest {
            return Err(RegistryError::DigestMismatch {
                what: "manifest".into(),
                expected: digest.to_string(),
                actual,
            });
        }
        let mut tmp = self.begin_download()?;
        tmp.write_all(bytes)
            .map_err(|e| RegistryError::io("writing", tmp.path().to_path_buf(), e))?;
        persist(tmp, &self.manifest_path(digest)?)
    }

    /// Stores bytes as a blob under their own digest (used by push to seed the cache).
    pub fn put_blob(&self, bytes: &[u8]) -> Result<PathBuf> {
        let mut tmp = self.begin_download()?;
        tmp.write_all(bytes)
            .map_err(|e| RegistryError::io("writing", tmp.path().to_path_buf(), e))?;
        self.commit_blob(tmp, &sha256_digest(bytes), Some(bytes.len() as u64))
    }
}

fn persist(file: NamedTempFile, path: &Path) -> Result<()> {
    let dir = path.parent().expect("store paths have parents");
    std::fs::create_dir_all(dir)
        .map_err(|e| RegistryError::io("creating cache directory", dir, e))?;
    file.as_file()
        .sync_all()
        .map_err(|e| RegistryError::io("syncing", path, e))?;
    file.persist(path)
        .map_err(|e| RegistryError::io("moving download into", path, e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_only_verified_content_and_heals_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let store = PluginStore::new(dir.path());
        let path = store.put_blob(b"component").unwrap();
        let digest = sha256_digest(b"component");
        assert_eq!(store.blob(&digest).unwrap(), Some(path.clone()));

        let mut bad = store.begin_download().unwrap();
        bad.write_all(b"tampered").unwrap();
        let other = sha256_digest(b"other");
        assert!(matches!(
            store.commit_blob(bad, &other, None),
            Err(RegistryError::DigestMismatch { .. })
        ));
        assert_eq!(store.blob(&other).unwrap(), None);
        assert_eq!(
            std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
            0
        );

        std::fs::write(&path, b"bit rot").unwrap();
        assert_eq!(store.blob(&digest).unwrap(), None);
        assert!(!path.exists());
    }

    #[test]
    fn manifests_must_match_their_digest() {
        let dir = tempfile::tempdir().unwrap();
        let store = PluginStore::new(dir.path());
        let digest = sha256_digest(b"{}");
        store.put_manifest(&digest, b"{}").unwrap();
        assert_eq!(
            store.manifest(&digest).unwrap().as_deref(),
            Some(&b"{}"[..])
        );
        assert!(store.put_manifest(&digest, b"[]").is_err());
    }
}
