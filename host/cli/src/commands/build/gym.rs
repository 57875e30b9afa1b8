//! Unmodified skyrl-gym code: a Python folder whose module defines a
//! `BaseTextEnv` subclass (an environment) or a `ToolGroup` subclass (a tool
//! plugin), and exports nothing through the SDK, builds with the bundled
//! `skyrl_gym` compatibility package and `skyrl_sdk.gym`'s adapters. The
//! folder is staged as a subpackage of `skyrl_gym.envs` (tools:
//! `skyrl_gym.tools`), so skyrl-gym's own imports
//! (`from skyrl_gym.envs.gsm8k import utils`) work.

use std::path::Path;

use anyhow::{bail, Context};

/// What a skyrl-gym class becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GymKind {
    /// A `BaseTextEnv` subclass: an environment plugin.
    Env,
    /// A `ToolGroup` subclass: a tool plugin, one tool per `@tool` method.
    Tools,
}

impl GymKind {
    /// The base class that marks it.
    fn base(self) -> &'static str {
        match self {
            GymKind::Env => "BaseTextEnv",
            GymKind::Tools => "ToolGroup",
        }
    }

    /// The package its folder is staged under.
    fn parent_package(self) -> &'static str {
        match self {
            GymKind::Env => "skyrl_gym.envs",
            GymKind::Tools => "skyrl_gym.tools",
        }
    }

    /// The `skyrl_sdk.gym` function that exports it.
    pub fn exporter(self) -> &'static str {
        match self {
            GymKind::Env => "export_gym_env",
            GymKind::Tools => "export_gym_tools",
        }
    }
}

/// Where a skyrl-gym class lives once staged, and which class it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GymClass {
    pub kind: GymKind,
    /// The package the folder is staged as, e.g. `skyrl_gym.envs.gsm8k`.
    pub package: String,
    /// The class in the entry module, e.g. `GSM8kEnv`.
    pub class: String,
}

/// Names of the classes `source` defines at top level with `base` among
/// their bases.
fn classes(source: &str, base: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("class ")?;
            let (name, rest) = rest.split_once('(')?;
            let bases = rest.split_once(')')?.0;
            let is_env = bases
                .split(',')
                .any(|b| b.trim().rsplit('.').next() == Some(base));
            is_env.then(|| name.trim().to_string())
        })
        .collect()
}

/// Whether `source` exports through the SDK itself (then it is an SDK plugin).
fn exports_itself(source: &str) -> bool {
    source.contains("skyrl_sdk") && source.contains("export_")
}

/// For folders without a manifest: the single `.py` file of `dir` defining
/// exactly one `BaseTextEnv` subclass, else one `ToolGroup` subclass; `None`
/// when there is neither.
pub fn find_entry(dir: &Path) -> anyhow::Result<Option<(String, GymKind)>> {
    for kind in [GymKind::Env, GymKind::Tools] {
        if let Some(entry) = find_entry_of(dir, kind)? {
            return Ok(Some((entry, kind)));
        }
    }
    Ok(None)
}

fn find_entry_of(dir: &Path, kind: GymKind) -> anyhow::Result<Option<String>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "py") {
            let source = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            for class in classes(&source, kind.base()) {
                let file = path.file_name().unwrap_or_default().to_string_lossy();
                found.push((file.into_owned(), class));
            }
        }
    }
    found.sort();
    match found.len() {
        0 => Ok(None),
        1 => Ok(Some(found.remove(0).0)),
        _ => {
            bail!(
            "{} defines several {} subclasses ({}): add a skyrl-plugin.toml naming one, e.g.\n  \
             kind = \"{}\"\n  language = \"python\"\n  entry = \"{}\"\n  skyrl_gym_class = \"{}\"",
            dir.display(),
            kind.base(),
            found
                .iter()
                .map(|(f, c)| format!("{f}: {c}"))
                .collect::<Vec<_>>()
                .join(", "),
            if kind == GymKind::Env { "environment" } else { "tool" },
            found[0].0,
            found[0].1
        )
        }
    }
}

/// The skyrl-gym class of `dir`'s `entry` module, or `None` for an SDK
/// plugin. `package` and `class` are the manifest's `skyrl_gym_package` and
/// `skyrl_gym_class`; setting either asks for a skyrl-gym class.
pub fn resolve(
    dir: &Path,
    entry: &str,
    kind: GymKind,
    package: Option<String>,
    class: Option<String>,
) -> anyhow::Result<Option<GymClass>> {
    let base = kind.base();
    let path = dir.join(entry);
    let source = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let asked = package.is_some() || class.is_some();
    let classes = classes(&source, base);
    if !asked && (classes.is_empty() || exports_itself(&source)) {
        return Ok(None);
    }
    let class = match class {
        Some(class) if classes.contains(&class) => class,
        Some(class) => {
            bail!("{entry} defines no {base} subclass `{class}` (found: {classes:?})")
        }
        None => match classes.as_slice() {
            [one] => one.clone(),
            [] => bail!("{entry} defines no {base} subclass"),
            _ => {
                bail!("{entry} defines several {base} subclasses {classes:?}: set skyrl_gym_class")
            }
        },
    };
    let package = match package {
        Some(package) => package,
        None => {
            let folder = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("{}.{folder}", kind.parent_package())
        }
    };
    let parent = kind.parent_package();
    let valid = package
        .strip_prefix(parent)
        .is_some_and(|rest| rest.starts_with('.'))
        && package.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_alphanumeric() || c == '_')
        });
    if !valid {
        bail!(
            "`{package}` cannot hold the {base} subclass: skyrl_gym_package must be a Python \
             package under {parent} (e.g. {parent}.my_module; a folder name that is not an \
             identifier needs it set)"
        );
    }
    Ok(Some(GymClass {
        kind,
        package,
        class,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_classes_are_found_by_their_bases() {
        let source = "class A(BaseTextEnv):\n    pass\nclass B(x.BaseTextEnv, Mixin):\n    \
                      pass\nclass C(Env):\n    pass\n    class D(BaseTextEnv):\n        pass\n";
        assert_eq!(classes(source, "BaseTextEnv"), vec!["A", "B"]);
        assert_eq!(classes("class T(ToolGroup):\n", "ToolGroup"), vec!["T"]);
    }

    #[test]
    fn packages_default_to_the_folder_and_must_be_identifiers() {
        let dir = tempfile::tempdir().unwrap();
        let env_dir = dir.path().join("my_env");
        std::fs::create_dir(&env_dir).unwrap();
        std::fs::write(env_dir.join("env.py"), "class E(BaseTextEnv):\n    pass\n").unwrap();
        let gym = resolve(&env_dir, "env.py", GymKind::Env, None, None)
            .unwrap()
            .unwrap();
        assert_eq!(gym.package, "skyrl_gym.envs.my_env");
        assert_eq!(gym.class, "E");
        let bad = resolve(
            &env_dir,
            "env.py",
            GymKind::Env,
            Some("my-env".into()),
            None,
        )
        .unwrap_err();
        assert!(bad.to_string().contains("skyrl_gym_package"), "{bad}");
        let missing =
            resolve(&env_dir, "env.py", GymKind::Env, None, Some("F".into())).unwrap_err();
        assert!(missing.to_string().contains("`F`"), "{missing}");
        std::fs::write(
            env_dir.join("other.py"),
            "class G(BaseTextEnv):\n    pass\n",
        )
        .unwrap();
        let several = find_entry(&env_dir).unwrap_err();
        assert!(
            several.to_string().contains("env.py: E, other.py: G"),
            "{several}"
        );
    }
}
