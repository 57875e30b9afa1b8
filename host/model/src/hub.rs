//! Hugging Face hub names (`org/name`, `org/name@revision`) resolved offline
//! through the local hub cache, the layout `huggingface-cli download` (or
//! `hf download`) writes, as `HF_HUB_OFFLINE=1` would: nothing is fetched.
//!
//! The cache is `$HF_HUB_CACHE`, else the legacy `$HUGGINGFACE_HUB_CACHE`,
//! else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`, else
//! `~/.cache/huggingface/hub`. A repository `org/name` lives in
//! `models--org--name/` (`datasets--org--name/` for a data set):
//! `refs/<revision>` (default `main`) holds a commit hash and
//! `snapshots/<hash>/` the files; a revision that is a full commit hash goes
//! straight to `snapshots/<hash>/`.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use crate::expand_home;

/// The kind of a hub repository (models and data sets live in separate folders).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoType {
    /// A model repository (`models--org--name`).
    Model,
    /// A data set repository (`datasets--org--name`).
    Dataset,
}

impl RepoType {
    fn folder_prefix(self) -> &'static str {
        match self {
            RepoType::Model => "models",
            RepoType::Dataset => "datasets",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            RepoType::Model => "model",
            RepoType::Dataset => "dataset",
        }
    }
}

/// A hub repository name with an optional revision (branch, tag or commit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubId {
    /// `org/name`.
    pub repo: String,
    /// What follows `@`; `None` means `main`.
    pub revision: Option<String>,
}

impl HubId {
    /// Parses `org/name` or `org/name@revision`; `None` when `text` is not
    /// shaped like one (each part letters, digits, `-`, `_`, `.`, not starting
    /// with `.` or `-`; a revision has no `..` component and no leading `/`).
    pub fn parse(text: &str) -> Option<Self> {
        let (repo, revision) = match text.split_once('@') {
            Some((repo, rev)) => (repo, Some(rev)),
            None => (text, None),
        };
        let (org, name) = repo.split_once('/')?;
        if !valid_part(org) || !valid_part(name) {
            return None;
        }
        if let Some(rev) = revision {
            let bad = rev.is_empty()
                || rev.starts_with('/')
                || rev.chars().any(char::is_whitespace)
                || Path::new(rev)
                    .components()
                    .any(|c| !matches!(c, Component::Normal(_)));
            if bad {
                return None;
            }
        }
        Some(Self {
            repo: repo.to_string(),
            revision: revision.map(str::to_string),
        })
    }

    /// The revision asked for (`main` by default).
    pub fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or("main")
    }

    /// The repository's folder in the cache: `models--org--name`.
    pub fn folder(&self, kind: RepoType) -> String {
        format!("{}--{}", kind.folder_prefix(), self.repo.replace('/', "--"))
    }

    /// The command that downloads this repository into the cache.
    pub fn download_command(&self, kind: RepoType) -> String {
        let mut cmd = String::from("huggingface-cli download");
        if kind == RepoType::Dataset {
            cmd.push_str(" --repo-type dataset");
        }
        cmd.push(' ');
        cmd.push_str(&self.repo);
        if let Some(rev) = &self.revision {
            cmd.push_str(" --revision ");
            cmd.push_str(rev);
        }
        cmd
    }
}

impl std::fmt::Display for HubId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.revision {
            Some(rev) => write!(f, "{}@{rev}", self.repo),
            None => f.write_str(&self.repo),
        }
    }
}

fn valid_part(part: &str) -> bool {
    !part.is_empty()
        && part.len() <= 96
        && !part.starts_with(['.', '-'])
        && !part.contains("--")
        && !part.contains("..")
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Why a name could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The repository (or its revision) is not in the cache.
    #[error(
        "{noun} `{id}` is not a local path, and the Hugging Face cache {cache_dir} does not hold it \
         ({missing_path} does not exist). Fetch it with `{download}` (or `hf {hf}`); the cache \
         is $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub",
        noun = .kind.noun(),
        cache_dir = .cache.display(),
        missing_path = .missing.display(),
        hf = .download.trim_start_matches("huggingface-cli ")
    )]
    NotCached {
        /// Model or data set.
        kind: RepoType,
        /// The name asked for.
        id: HubId,
        /// The cache directory searched.
        cache: PathBuf,
        /// The first folder or file of the layout that is missing.
        missing: PathBuf,
        /// The command that fetches it.
        download: String,
    },
    /// Neither an existing path nor a hub name.
    #[error(
        "{noun} path {shown} does not exist (and `{text}` is not a Hugging Face name org/name)",
        noun = .kind.noun(),
        shown = .path.display()
    )]
    NotFound {
        /// Model or data set.
        kind: RepoType,
        /// What was given.
        text: String,
        /// The path it was taken as.
        path: PathBuf,
    },
    /// A `refs/<revision>` file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// The hub cache directory of this process's environment (see the module doc).
pub fn cache_dir() -> PathBuf {
    cache_dir_with(|name| std::env::var_os(name))
}

/// The hub cache directory given a variable lookup (empty values count as unset).
pub fn cache_dir_with(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let get = |name: &str| {
        var(name)
            .filter(|v| !v.is_empty())
            .map(|v| expand_home(&v.to_string_lossy()))
    };
    if let Some(dir) = get("HF_HUB_CACHE").or_else(|| get("HUGGINGFACE_HUB_CACHE")) {
        return dir;
    }
    if let Some(home) = get("HF_HOME") {
        return home.join("hub");
    }
    let base = get("XDG_CACHE_HOME").unwrap_or_else(|| match var("HOME") {
        Some(h) if !h.is_empty() => PathBuf::from(h).join(".cache"),
        _ => PathBuf::from(".cache"),
    });
    base.join("huggingface").join("hub")
}

/// The snapshot folder of `id` in the cache `cache`.
pub fn resolve_in(cache: &Path, kind: RepoType, id: &HubId) -> Result<PathBuf, HubError> {
    let repo_dir = cache.join(id.folder(kind));
    let not_cached = |missing: PathBuf| HubError::NotCached {
        kind,
        id: id.clone(),
        cache: cache.to_path_buf(),
        missing,
        download: id.download_command(kind),
    };
    if !repo_dir.is_dir() {
        return Err(not_cached(repo_dir));
    }
    let rev = id.revision();
    let commit = if is_commit_hash(rev) {
        rev.to_string()
    } else {
        let ref_file = repo_dir.join("refs").join(rev);
        if !ref_file.is_file() {
            return Err(not_cached(ref_file));
        }
        std::fs::read_to_string(&ref_file)
            .map_err(|source| HubError::Io {
                path: ref_file.clone(),
                source,
            })?
            .trim()
            .to_string()
    };
    let snapshot = repo_dir.join("snapshots").join(&commit);
    if !snapshot.is_dir() || !is_commit_hash(&commit) {
        return Err(not_cached(snapshot));
    }
    Ok(snapshot)
}

/// `text` as a local path when it exists (a leading `~/` expanded), else as a
/// hub name (an optional `hf://` prefix dropped) resolved in `cache`.
pub fn resolve_path_or_id_in(
    cache: &Path,
    kind: RepoType,
    text: &str,
) -> Result<PathBuf, HubError> {
    let local = expand_home(text);
    if local.exists() {
        return Ok(local);
    }
    match HubId::parse(text.strip_prefix("hf://").unwrap_or(text)) {
        Some(id) => {
            let dir = resolve_in(cache, kind, &id)?;
            tracing::info!(%id, dir = %dir.display(), "resolved a Hugging Face {}", kind.noun());
            Ok(dir)
        }
        None => Err(HubError::NotFound {
            kind,
            text: text.to_string(),
            path: local,
        }),
    }
}

/// A model directory from a local path or a hub name (`Qwen/Qwen2.5-0.5B-Instruct`,
/// optionally `@revision`), looked up in [`cache_dir`].
pub fn resolve_model(text: &str) -> Result<PathBuf, HubError> {
    resolve_path_or_id_in(&cache_dir(), RepoType::Model, text)
}

/// Whether `text` names a model on the hub rather than a local path: it does
/// not exist locally and parses as a hub name.
pub fn is_hub_name(text: &str) -> bool {
    !expand_home(text).exists()
        && HubId::parse(text.strip_prefix("hf://").unwrap_or(text)).is_some()
}

fn is_commit_hash(rev: &str) -> bool {
    rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_with_revisions_and_reject_paths() {
        let id = HubId::parse("Qwen/Qwen2.5-0.5B-Instruct").unwrap();
        assert_eq!(id.repo, "Qwen/Qwen2.5-0.5B-Instruct");
        assert_eq!(id.revision(), "main");
        assert_eq!(
            id.folder(RepoType::Model),
            "models--Qwen--Qwen2.5-0.5B-Instruct"
        );
        let id = HubId::parse("org/name@refs/pr/1").unwrap();
        assert_eq!(id.revision(), "refs/pr/1");
        assert_eq!(
            id.download_command(RepoType::Dataset),
            "huggingface-cli download --repo-type dataset org/name --revision refs/pr/1"
        );
        for bad in [
            "/abs/path",
            "./rel",
            "a/b/c",
            "name",
            "org/",
            "../x",
            "org/na me",
            "org/name@",
            "org/name@../../etc",
            "org/a--b",
        ] {
            assert_eq!(HubId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn cache_dir_follows_huggingface_hub_precedence() {
        fn env(
            pairs: &'static [(&'static str, &'static str)],
        ) -> impl Fn(&str) -> Option<OsString> {
            move |k| {
                pairs
                    .iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| OsString::from(v))
            }
        }
        let all = &[
            ("HF_HUB_CACHE", "/a"),
            ("HUGGINGFACE_HUB_CACHE", "/b"),
            ("HF_HOME", "/c"),
            ("XDG_CACHE_HOME", "/d"),
            ("HOME", "/e"),
        ];
        assert_eq!(cache_dir_with(env(all)), PathBuf::from("/a"));
        assert_eq!(cache_dir_with(env(&all[1..])), PathBuf::from("/b"));
        assert_eq!(cache_dir_with(env(&all[2..])), PathBuf::from("/c/hub"));
        assert_eq!(
            cache_dir_with(env(&all[3..])),
            PathBuf::from("/d/huggingface/hub")
        );
        assert_eq!(
            cache_dir_with(env(&all[4..])),
            PathBuf::from("/e/.cache/huggingface/hub")
        );
        assert_eq!(
            cache_dir_with(env(&[("HF_HUB_CACHE", ""), ("HF_HOME", "/c")])),
            PathBuf::from("/c/hub")
        );
    }
}
