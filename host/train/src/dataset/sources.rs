//! Where dataset files come from: each `data.train_data` / `data.val_data`
//! entry expanded into the files to read, in order.
//!
//! An entry is, in this order of precedence:
//! - `hf://datasets/org/name[@revision][/folder][:split]`: a Hugging Face data
//!   set in the local hub cache (see [`skyrl_model::hub`]);
//! - a glob pattern (`~/data/gsm8k/*.parquet`; any of `*?[`): the matches,
//!   sorted; a pattern matching nothing is an error;
//! - an existing directory: the `.parquet` and `.jsonl` files directly inside,
//!   sorted by name;
//! - an existing file;
//! - `org/name[@revision][:split]` that is not a local path (and does not end
//!   in `.parquet`/`.jsonl`/`.json`): a hub data set, as above;
//! - anything else is taken as a file path (and fails to open).
//!
//! A hub data set contributes every `.parquet` and `.jsonl` file of its
//! snapshot (or of `/folder` inside it), in any sub-folder, sorted by path.
//! With `:split`, only the files of that split: those whose path inside the
//! snapshot has a folder or a file name (without extension) that is the split
//! name, or starts with it followed by `-`, `_`, `.` or a digit
//! (`data/train-00000-of-00001.parquet`, `train.jsonl`, `train/0.parquet`).
//! Without `:split`, files of more than one well-known split (train, test,
//! validation, ...) are an error asking for one, so test rows never slip
//! into training unnoticed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use skyrl_model::expand_home;
use skyrl_model::hub::{self, HubId, RepoType};

/// Extensions of the files a directory or hub data set contributes.
const DATA_EXTENSIONS: [&str; 2] = ["parquet", "jsonl"];

/// Split names recognised without a `:split` (to refuse mixing them).
const KNOWN_SPLITS: [&str; 7] = ["train", "test", "validation", "valid", "val", "dev", "eval"];

/// Expands dataset entries against one Hugging Face cache.
#[derive(Debug, Clone)]
pub struct DataSources {
    hub_cache: PathBuf,
}

impl DataSources {
    /// Sources resolving hub names in this process's cache ([`hub::cache_dir`]).
    pub fn from_env() -> Self {
        Self::with_hub_cache(hub::cache_dir())
    }

    /// Sources resolving hub names in `hub_cache`.
    pub fn with_hub_cache(hub_cache: impl Into<PathBuf>) -> Self {
        Self {
            hub_cache: hub_cache.into(),
        }
    }

    /// The files of every entry, in order.
    pub fn expand_all(&self, entries: &[String]) -> Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        for e in entries {
            files.extend(self.expand(e)?);
        }
        Ok(files)
    }

    /// The files of one entry (see the module doc for the rules).
    pub fn expand(&self, entry: &str) -> Result<Vec<PathBuf>> {
        if let Some(rest) = entry.strip_prefix("hf://datasets/") {
            let hub = HubDataset::parse(rest, true).with_context(|| {
                format!("`{entry}` is not hf://datasets/org/name[@revision][/folder][:split]")
            })?;
            return self.hub_files(entry, &hub);
        }
        if entry.contains(['*', '?', '[']) {
            return glob_files(entry);
        }
        let path = expand_home(entry);
        if path.is_dir() {
            return dir_files(&path);
        }
        if path.exists() || has_data_extension(&path) || entry.ends_with(".json") {
            return Ok(vec![path]);
        }
        match HubDataset::parse(entry, false) {
            Some(hub) => self.hub_files(entry, &hub),
            None => Ok(vec![path]),
        }
    }

    /// The files of split `split` of `entry`, as `datasets.load_dataset`
    /// picks a split: in a hub data set or a folder by the file and folder
    /// names (files naming no known split are all `train`); a single file or
    /// a glob is one `train` split. An entry naming another split is an error.
    pub fn expand_split(&self, entry: &str, split: &str) -> Result<Vec<PathBuf>> {
        let only_train = || -> Result<()> {
            if split != "train" {
                bail!(
                    "`{entry}` is a file or glob, whose only split is `train` (as in \
                     `datasets`), not `{split}`"
                );
            }
            Ok(())
        };
        let with_split = |mut hub: HubDataset| -> Result<HubDataset> {
            match &hub.split {
                Some(s) if s != split => {
                    bail!("`{entry}` names split `{s}`, but split `{split}` is asked for")
                }
                _ => hub.split = Some(split.to_string()),
            }
            Ok(hub)
        };
        if let Some(rest) = entry.strip_prefix("hf://datasets/") {
            let hub = HubDataset::parse(rest, true).with_context(|| {
                format!("`{entry}` is not hf://datasets/org/name[@revision][/folder][:split]")
            })?;
            return self.hub_files(entry, &with_split(hub)?);
        }
        if entry.contains(['*', '?', '[']) {
            only_train()?;
            return glob_files(entry);
        }
        let path = expand_home(entry);
        if path.is_dir() {
            let files = dir_files(&path)?;
            return pick_split(entry, &path, &files, Some(split));
        }
        if path.exists() || has_data_extension(&path) || entry.ends_with(".json") {
            only_train()?;
            return Ok(vec![path]);
        }
        match HubDataset::parse(entry, false) {
            Some(hub) => self.hub_files(entry, &with_split(hub)?),
            None => {
                only_train()?;
                Ok(vec![path])
            }
        }
    }

    fn hub_files(&self, entry: &str, hub: &HubDataset) -> Result<Vec<PathBuf>> {
        let snapshot = hub::resolve_in(&self.hub_cache, RepoType::Dataset, &hub.id)?;
        let root = snapshot.join(&hub.folder);
        if root.is_file() {
            return Ok(vec![root]);
        }
        if !root.is_dir() {
            bail!(
                "{entry}: {} does not exist in the cached data set",
                root.display()
            );
        }
        let mut files = Vec::new();
        walk(&root, &mut files).with_context(|| format!("cannot list {}", root.display()))?;
        files.sort();
        if files.is_empty() {
            bail!("{entry}: no .parquet or .jsonl file in {}", root.display());
        }
        let picked = pick_split(entry, &root, &files, hub.split.as_deref())?;
        tracing::info!(entry, files = picked.len(), dir = %root.display(), "resolved a Hugging Face data set");
        Ok(picked)
    }
}

/// `org/name[@revision][/folder][:split]` (the folder only in the `hf://` form).
#[derive(Debug, PartialEq)]
struct HubDataset {
    id: HubId,
    folder: PathBuf,
    split: Option<String>,
}

impl HubDataset {
    fn parse(text: &str, allow_folder: bool) -> Option<Self> {
        let (text, split) = match text.rsplit_once(':') {
            Some((head, split))
                if !split.is_empty()
                    && split
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
            {
                (head, Some(split.to_string()))
            }
            Some(_) => return None,
            None => (text, None),
        };
        let mut parts = text.splitn(3, '/');
        let (org, name_rev) = (parts.next()?, parts.next()?);
        let folder = PathBuf::from(parts.next().unwrap_or(""));
        if !allow_folder && !folder.as_os_str().is_empty() {
            return None;
        }
        if folder
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
        {
            return None;
        }
        let id = HubId::parse(&format!("{org}/{name_rev}"))?;
        Some(Self { id, folder, split })
    }
}

/// The files of `split` among `files` (under `root`); without a split, all of
/// them unless they name two or more well-known splits. Files that name no
/// well-known split are all `train` (as `datasets` does).
fn pick_split(
    entry: &str,
    root: &Path,
    files: &[PathBuf],
    split: Option<&str>,
) -> Result<Vec<PathBuf>> {
    let rel = |f: &Path| f.strip_prefix(root).unwrap_or(f).to_path_buf();
    let seen: Vec<&str> = KNOWN_SPLITS
        .into_iter()
        .filter(|s| files.iter().any(|f| in_split(&rel(f.as_path()), s)))
        .collect();
    let picked: Vec<PathBuf> = match split {
        Some("train") if seen.is_empty() => files.to_vec(),
        Some(split) => files
            .iter()
            .filter(|f| in_split(&rel(f.as_path()), split))
            .cloned()
            .collect(),
        None => {
            if seen.len() > 1 {
                bail!(
                    "{entry}: the data set has the splits {}; name one, e.g. `{entry}:{}`",
                    seen.join(", "),
                    seen[0]
                );
            }
            files.to_vec()
        }
    };
    if picked.is_empty() {
        let names: Vec<String> = files
            .iter()
            .map(|f| rel(f.as_path()).display().to_string())
            .collect();
        bail!(
            "{entry}: no file of split `{}` in {} (a split's files have a folder or file \
             name that is the split or starts with it then `-`, `_`, `.` or a digit); \
             files: {}",
            split.unwrap_or_default(),
            root.display(),
            names.join(", ")
        );
    }
    Ok(picked)
}

/// Whether `rel` (a path inside a data set) belongs to `split`.
fn in_split(rel: &Path, split: &str) -> bool {
    let stem = rel.with_extension("");
    stem.components().any(|c| {
        let part = c.as_os_str().to_string_lossy();
        match part.strip_prefix(split) {
            Some("") => true,
            Some(rest) => {
                rest.starts_with(['-', '_', '.']) || rest.starts_with(|c: char| c.is_ascii_digit())
            }
            None => false,
        }
    })
}

fn has_data_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| DATA_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Every data file under `dir` (following links, skipping hidden folders).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if path.is_dir() && !hidden {
            walk(&path, out)?;
        } else if path.is_file() && has_data_extension(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// The `.parquet` and `.jsonl` files directly in `dir`, sorted.
fn dir_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("cannot list {}", dir.display()))?
            .path();
        if path.is_file() && has_data_extension(&path) {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        bail!(
            "dataset directory {} has no .parquet or .jsonl file",
            dir.display()
        );
    }
    Ok(files)
}

/// The matches of a glob pattern (a leading `~/` expanded), sorted; folders
/// among them contribute their data files.
fn glob_files(pattern: &str) -> Result<Vec<PathBuf>> {
    let expanded = expand_home(pattern);
    let text = expanded.to_string_lossy();
    let mut matches = Vec::new();
    for m in glob::glob(&text).with_context(|| format!("bad dataset glob pattern `{pattern}`"))? {
        matches.push(m.with_context(|| format!("dataset glob `{pattern}`"))?);
    }
    matches.sort();
    if matches.is_empty() {
        bail!("dataset glob pattern `{pattern}` matches no file");
    }
    let mut files = Vec::new();
    for m in matches {
        if m.is_dir() {
            files.extend(dir_files(&m)?);
        } else {
            files.push(m);
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_dataset_names_parse_with_folder_revision_and_split() {
        let d = HubDataset::parse("openai/gsm8k@v1/main:train", true).unwrap();
        assert_eq!(d.id.repo, "openai/gsm8k");
        assert_eq!(d.id.revision.as_deref(), Some("v1"));
        assert_eq!(d.folder, PathBuf::from("main"));
        assert_eq!(d.split.as_deref(), Some("train"));
        let d = HubDataset::parse("org/name", false).unwrap();
        assert_eq!((d.folder, d.split), (PathBuf::new(), None));
        assert_eq!(HubDataset::parse("org/name/main", false), None);
        assert_eq!(HubDataset::parse("org/name/../x", true), None);
        assert_eq!(HubDataset::parse("org/name:", false), None);
    }

    #[test]
    fn split_membership_follows_folder_and_file_names() {
        for (path, split) in [
            ("data/train-00000-of-00001.parquet", "train"),
            ("train.jsonl", "train"),
            ("train/0000.parquet", "train"),
            ("main/test_0.parquet", "test"),
            ("validation.parquet", "validation"),
            ("train2.parquet", "train"),
        ] {
            assert!(in_split(Path::new(path), split), "{path} in {split}");
        }
        for (path, split) in [
            ("training.parquet", "train"),
            ("data/test-0.parquet", "train"),
            ("pretrain.jsonl", "train"),
        ] {
            assert!(!in_split(Path::new(path), split), "{path} not in {split}");
        }
    }
}
