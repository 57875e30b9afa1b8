//! Loading: a YAML file, then dotted command-line overrides (`key.sub=value`,
//! values parsed as YAML scalars; a leading `+` is accepted and ignored), then
//! defaults that depend on other keys, then validation.

use std::path::{Path, PathBuf};

use serde_norway::{Mapping, Value};
use thiserror::Error;

use super::types::SkyrlConfig;

/// Why a configuration could not be loaded.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: invalid YAML: {message}")]
    Yaml { origin: String, message: String },
    #[error("override `{arg}`: {message}")]
    Override { arg: String, message: String },
    #[error("config key `{path}`{origin}: {message}")]
    Key {
        path: String,
        origin: String,
        message: String,
    },
    #[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
    Invalid(Vec<String>),
}

/// Loads `path` (YAML) and applies `overrides`; validates the result.
pub fn load_config(path: Option<&Path>, overrides: &[String]) -> Result<SkyrlConfig, ConfigError> {
    let (text, origin) = read_config_file(path)?;
    load_config_str(&text, &origin, overrides)
}

/// Like [`load_config`] from YAML text; `origin` names it in errors.
pub fn load_config_str(
    yaml: &str,
    origin: &str,
    overrides: &[String],
) -> Result<SkyrlConfig, ConfigError> {
    let mut tree = parse_tree(yaml, origin, overrides)?;
    super::legacy::migrate(&mut tree.root)?;
    let mut cfg: SkyrlConfig = tree.deserialize()?;
    cfg.resolve_defaults();
    cfg.validate().map_err(ConfigError::Invalid)?;
    Ok(cfg)
}

/// Reads a config file's text (`None`: no file), with the origin its errors name.
pub fn read_config_file(path: Option<&Path>) -> Result<(String, String), ConfigError> {
    Ok(match path {
        Some(p) => (
            std::fs::read_to_string(p).map_err(|source| ConfigError::Io {
                path: p.to_path_buf(),
                source,
            })?,
            p.display().to_string(),
        ),
        None => (String::new(), "<defaults>".to_string()),
    })
}

/// A config as a YAML tree with the command-line overrides applied, before
/// it is turned into a typed config; remembers which override set which key
/// so that errors can name it.
pub struct ConfigTree {
    /// The merged tree (a mapping).
    pub root: Value,
    origin: String,
    /// `(dotted key, override argument)` in the order applied.
    applied: Vec<(String, String)>,
}

impl ConfigTree {
    /// Where `path` (dotted) was set: ` (from override `...`)` or ` (in FILE)`.
    pub fn origin_of(&self, path: &str) -> String {
        self.applied
            .iter()
            .rev()
            .find(|(k, _)| {
                path == *k
                    || path.starts_with(&format!("{k}."))
                    || k.starts_with(&format!("{path}."))
            })
            .map(|(_, a)| format!(" (from override `{a}`)"))
            .unwrap_or_else(|| format!(" (in {})", self.origin))
    }

    /// Deserializes the tree; an unknown or malformed key is an error naming
    /// its full path and where it was set.
    pub fn deserialize<T: serde::de::DeserializeOwned>(&self) -> Result<T, ConfigError> {
        serde_path_to_error::deserialize(self.root.clone()).map_err(|e| {
            let path = e.path().to_string();
            ConfigError::Key {
                origin: self.origin_of(&path),
                path,
                message: e.into_inner().to_string(),
            }
        })
    }
}

/// Parses `yaml` (a mapping, or empty) and applies `overrides` in order.
pub fn parse_tree(
    yaml: &str,
    origin: &str,
    overrides: &[String],
) -> Result<ConfigTree, ConfigError> {
    let mut root: Value = if yaml.trim().is_empty() {
        Value::Mapping(Mapping::new())
    } else {
        serde_norway::from_str(yaml).map_err(|e| ConfigError::Yaml {
            origin: origin.to_string(),
            message: e.to_string(),
        })?
    };
    if root.is_null() {
        root = Value::Mapping(Mapping::new());
    }
    if !root.is_mapping() {
        return Err(ConfigError::Yaml {
            origin: origin.to_string(),
            message: "the top level must be a mapping of config keys".into(),
        });
    }
    let mut applied: Vec<(String, String)> = Vec::new();
    for arg in overrides {
        let key = apply_override(&mut root, arg)?;
        applied.push((key, arg.clone()));
    }
    Ok(ConfigTree {
        root,
        origin: origin.to_string(),
        applied,
    })
}

/// Sets `key.sub=value` in `root`, creating mappings on the way; returns the key.
fn apply_override(root: &mut Value, arg: &str) -> Result<String, ConfigError> {
    let err = |message: String| ConfigError::Override {
        arg: arg.to_string(),
        message,
    };
    let body = arg.strip_prefix('+').unwrap_or(arg);
    let (key, raw) = body
        .split_once('=')
        .ok_or_else(|| err("expected `key.sub=value`".into()))?;
    let key = key.trim();
    let parts: Vec<&str> = key.split('.').collect();
    if key.is_empty() || parts.iter().any(|p| p.is_empty()) {
        return Err(err(format!("malformed key `{key}`")));
    }
    let value: Value = if raw.trim().is_empty() {
        Value::Null
    } else {
        serde_norway::from_str(raw).map_err(|e| err(format!("value is not valid YAML: {e}")))?
    };
    let mut node = root;
    for (i, part) in parts.iter().enumerate() {
        if node.is_null() {
            *node = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(map) = node else {
            return Err(err(format!(
                "`{}` is not a mapping, cannot set `{part}` inside it",
                parts[..i].join(".")
            )));
        };
        let k = Value::String((*part).to_string());
        if i == parts.len() - 1 {
            map.insert(k, value);
            break;
        }
        node = map.entry(k).or_insert(Value::Null);
    }
    Ok(key.to_string())
}
