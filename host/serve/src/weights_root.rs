//! Where `skyrl serve` may load weights from disk: only directories under
//! `--weights-root`, after resolving `..` and symbolic links, so a caller
//! cannot point the server at any path it can read. Errors name the path of
//! the request, never the server's own layout.

use std::path::{Path, PathBuf};

use crate::server::{bad, ApiError};

/// The resolved root, checked at start-up.
#[derive(Debug, Clone)]
pub struct WeightsRoot(PathBuf);

impl WeightsRoot {
    /// Resolves `dir` (it must exist).
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        Ok(WeightsRoot(dir.canonicalize()?))
    }

    /// `requested`, resolved, when it lies under the root.
    pub fn confine(&self, requested: &Path) -> Result<PathBuf, ApiError> {
        let shown = requested.display();
        let resolved = requested.canonicalize().map_err(|_| {
            bad(format!(
                "weights path `{shown}` does not exist on the server"
            ))
        })?;
        if !resolved.starts_with(&self.0) || !resolved.is_dir() {
            return Err(bad(format!(
                "weights path `{shown}` is not a directory under the server's --weights-root"
            )));
        }
        Ok(resolved)
    }
}

/// The path to load from, or why not: loads from disk need a root.
pub(crate) fn confine(root: Option<&WeightsRoot>, requested: &Path) -> Result<PathBuf, ApiError> {
    match root {
        Some(r) => r.confine(requested),
        None => Err(bad(
            "loading weights from disk is off: start skyrl serve with --weights-root DIR \
             (the directory weight syncs write under)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_under_the_root_pass() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("step1")).unwrap();
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        let r = WeightsRoot::new(&root).unwrap();
        assert!(r.confine(&root.join("step1")).is_ok());
        assert!(r.confine(&root.join("step1/../../outside")).is_err());
        assert!(r.confine(&tmp.path().join("outside")).is_err());
        assert!(r.confine(&root.join("missing")).is_err());
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(tmp.path().join("outside"), root.join("link")).unwrap();
            let err = r.confine(&root.join("link")).unwrap_err();
            assert!(
                err.1.contains("link") && !err.1.contains("outside"),
                "{}",
                err.1
            );
        }
        assert!(confine(None, &root).is_err());
    }
}
