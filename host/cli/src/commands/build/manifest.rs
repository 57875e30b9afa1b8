//! `skyrl-plugin.toml`: what a plugin folder builds into.

use std::path::Path;

use super::gym::{self, GymClass, GymKind};
use anyhow::{bail, Context};
use serde::Deserialize;
use skyrl_runtime::PluginKind;

/// The manifest's file name.
pub const MANIFEST: &str = "skyrl-plugin.toml";

/// A guest language `skyrl plugin build` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    Rust,
    Python,
    Js,
    Go,
    C,
}

impl Language {
    /// The language's name in messages.
    pub fn label(self) -> &'static str {
        match self {
            Language::Rust => "Rust",
            Language::Python => "Python",
            Language::Js => "JavaScript",
            Language::Go => "Go",
            Language::C => "C",
        }
    }
}

/// A world the non-Rust SDKs build: every world but `generator-plugin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestWorld {
    Environment,
    Tool,
    Reward,
}

impl GuestWorld {
    /// The world's name in the WIT package.
    pub fn wit_name(self) -> &'static str {
        match self {
            GuestWorld::Environment => "environment-plugin",
            GuestWorld::Tool => "tool-plugin",
            GuestWorld::Reward => "reward-plugin",
        }
    }
}

/// An algorithm world (`kind = "advantage" | "policy-loss" | "algorithm"`),
/// built by the Python SDK (Rust crates use `export_algorithm!`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlgorithmWorld {
    Advantage,
    PolicyLoss,
    /// Both an advantage estimator and a policy loss.
    Both,
}

impl AlgorithmWorld {
    /// The world's name in the WIT package.
    pub fn wit_name(self) -> &'static str {
        match self {
            AlgorithmWorld::Advantage => "advantage-plugin",
            AlgorithmWorld::PolicyLoss => "policy-loss-plugin",
            AlgorithmWorld::Both => "algorithm-plugin",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    kind: String,
    language: Option<Language>,
    entry: Option<String>,
    name: Option<String>,
    /// Python code written for skyrl-gym: the package the folder is staged
    /// as (default `skyrl_gym.envs.<folder>`, tools `skyrl_gym.tools.<folder>`)
    /// and the `BaseTextEnv` / `ToolGroup` subclass.
    skyrl_gym_package: Option<String>,
    skyrl_gym_class: Option<String>,
}

/// A parsed plugin manifest with the language resolved.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// What the component implements (Rust crates without a manifest: read
    /// from the built component).
    pub kind: Option<PluginKind>,
    pub language: Language,
    /// The author's main source file (e.g. `plugin.py`).
    pub entry: String,
    /// Output file stem (default: the folder name).
    pub name: Option<String>,
    /// Which algorithm world, for `kind = "advantage" | "policy-loss" | "algorithm"`.
    pub algorithm: Option<AlgorithmWorld>,
    /// A Python env or tool group written for skyrl-gym.
    pub gym: Option<GymClass>,
}

impl Manifest {
    /// Reads `DIR/skyrl-plugin.toml`. A Rust crate needs none: its kind is
    /// whatever the built component says.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join(MANIFEST);
        let detected = detect(dir);
        if !path.exists() {
            if detected == Some(Language::Rust) {
                return Ok(Self {
                    kind: None,
                    language: Language::Rust,
                    entry: default_entry(Language::Rust).into(),
                    name: None,
                    algorithm: None,
                    gym: None,
                });
            }
            if detected.is_none() {
                if let Some((entry, gym_kind)) = gym::find_entry(dir)? {
                    let gym = gym::resolve(dir, &entry, gym_kind, None, None)?;
                    let kind = match gym_kind {
                        GymKind::Env => PluginKind::Environment,
                        GymKind::Tools => PluginKind::Tool,
                    };
                    return Ok(Self {
                        kind: Some(kind),
                        language: Language::Python,
                        entry,
                        name: None,
                        algorithm: None,
                        gym,
                    });
                }
            }
            bail!(
                "{} has no {MANIFEST}; a plugin folder needs one, e.g.\n  kind = \"environment\"\n  language = \"python\"",
                dir.display()
            );
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let raw: RawManifest =
            toml::from_str(&text).with_context(|| format!("{} is not valid", path.display()))?;
        let kind = parse_kind(&raw.kind).with_context(|| format!("in {}", path.display()))?;
        let algorithm = algorithm_world(&raw.kind);
        let language = match (raw.language, detected) {
            (Some(language), _) => language,
            (None, Some(language)) => language,
            (None, None) => bail!(
                "cannot tell the language of {}: add `language = \"rust\" | \"python\" | \"js\" | \"go\" | \"c\"` to {MANIFEST}",
                dir.display()
            ),
        };
        let entry = raw
            .entry
            .unwrap_or_else(|| default_entry(language).to_string());
        if language != Language::Rust && !dir.join(&entry).is_file() {
            bail!("{} has no entry file {entry}", dir.display());
        }
        let asks_gym = raw.skyrl_gym_package.is_some() || raw.skyrl_gym_class.is_some();
        let gym_kind = match (language, kind) {
            (Language::Python, PluginKind::Environment) => Some(GymKind::Env),
            (Language::Python, PluginKind::Tool) => Some(GymKind::Tools),
            _ => None,
        };
        let gym = match gym_kind {
            Some(gym_kind) => gym::resolve(
                dir,
                &entry,
                gym_kind,
                raw.skyrl_gym_package,
                raw.skyrl_gym_class,
            )
            .with_context(|| format!("in {}", path.display()))?,
            None if asks_gym => bail!(
                "{}: skyrl_gym_package / skyrl_gym_class are for Python environments and tools",
                path.display()
            ),
            None => None,
        };
        Ok(Self {
            kind: Some(kind),
            language,
            entry,
            name: raw.name,
            algorithm,
            gym,
        })
    }

    /// The world a non-Rust plugin builds: its `kind`, which the manifest
    /// must set and which cannot be a generator.
    pub fn guest_world(&self) -> anyhow::Result<GuestWorld> {
        let language = self.language.label();
        let kind = self
            .kind
            .with_context(|| format!("a {language} plugin's manifest must set `kind`"))?;
        Ok(match kind {
            PluginKind::Environment => GuestWorld::Environment,
            PluginKind::Tool => GuestWorld::Tool,
            PluginKind::Reward => GuestWorld::Reward,
            PluginKind::Generator => {
                bail!("generator plugins are not supported in {language} yet (write them in Rust)")
            }
            PluginKind::Algorithm => {
                bail!("algorithm plugins are not supported in {language} yet (write them in Rust or Python)")
            }
        })
    }

    /// The output file stem: `name`, else the folder's name.
    pub fn artifact_name(&self, dir: &Path) -> String {
        self.name.clone().unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "plugin".into())
        })
    }
}

fn parse_kind(kind: &str) -> anyhow::Result<PluginKind> {
    Ok(match kind {
        "environment" | "env" => PluginKind::Environment,
        "tool" => PluginKind::Tool,
        "reward" => PluginKind::Reward,
        "generator" => PluginKind::Generator,
        "advantage" | "policy-loss" | "algorithm" => PluginKind::Algorithm,
        other => bail!(
            "kind `{other}` is not one of environment, tool, reward, generator, advantage, policy-loss, algorithm"
        ),
    })
}

fn algorithm_world(kind: &str) -> Option<AlgorithmWorld> {
    match kind {
        "advantage" => Some(AlgorithmWorld::Advantage),
        "policy-loss" => Some(AlgorithmWorld::PolicyLoss),
        "algorithm" => Some(AlgorithmWorld::Both),
        _ => None,
    }
}

fn default_entry(language: Language) -> &'static str {
    match language {
        Language::Rust => "src/lib.rs",
        Language::Python => "plugin.py",
        Language::Js => "plugin.js",
        Language::Go => "plugin.go",
        Language::C => "plugin.c",
    }
}

/// The language a folder's files are written in.
fn detect(dir: &Path) -> Option<Language> {
    if dir.join("Cargo.toml").is_file() {
        Some(Language::Rust)
    } else if dir.join("plugin.py").is_file() || dir.join("pyproject.toml").is_file() {
        Some(Language::Python)
    } else if dir.join("plugin.js").is_file() || dir.join("package.json").is_file() {
        Some(Language::Js)
    } else if dir.join("go.mod").is_file() || dir.join("plugin.go").is_file() {
        Some(Language::Go)
    } else if dir.join("plugin.c").is_file() {
        Some(Language::C)
    } else {
        None
    }
}
