//! Unmodified skyrl-gym environments: a Python folder whose module defines a
//! `BaseTextEnv` subclass (and exports nothing through the SDK) builds with
//! the bundled `skyrl_gym` compatibility package and `skyrl_sdk.gym`'s
//! adapter. The folder is staged as a subpackage of `skyrl_gym.envs`, so
//! skyrl-gym's own imports (`from skyrl_gym.envs.gsm8k import utils`) work.

use std::path::Path;

use anyhow::{bail, Context};

/// Where a skyrl-gym env lives once staged, and which class it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GymEnv {
    /// The package the folder is staged as, e.g. `skyrl_gym.envs.gsm8k`.
    pub package: String,
    /// The env class in the entry module, e.g. `GSM8kEnv`.
    pub class: String,
}

/// Names of the classes `source` defines at top level with `BaseTextEnv`
/// among their bases.
pub fn env_classes(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("class ")?;
            let (name, rest) = rest.split_once('(')?;
            let bases = rest.split_once(')')?.0;
            let is_env = bases
                .split(',')
                .any(|b| b.trim().rsplit('.').next() == Some("BaseTextEnv"));
            is_env.then(|| name.trim().to_string())
        })
        .collect()
}

/// Whether `source` exports through the SDK itself (then it is an SDK plugin).
fn exports_itself(source: &str) -> bool {
    source.contains("export_env(") || source.contains("export_gym_env(")
}

/// The single `.py` file of `dir` that defines exactly one `BaseTextEnv`
/// subclass, for folders without a manifest; `None` when there is none.
pub fn find_entry(dir: &Path) -> anyhow::Result<Option<String>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "py") {
            let source = std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            for class in env_classes(&source) {
                let file = path.file_name().unwrap_or_default().to_string_lossy();
                found.push((file.into_owned(), class));
            }
        }
    }
    found.sort();
    match found.len() {
        0 => Ok(None),
        1 => Ok(Some(found.remove(0).0)),
        _ => bail!(
            "{} defines several skyrl-gym envs ({}): add a skyrl-plugin.toml naming one, e.g.\n  \
             kind = \"environment\"\n  language = \"python\"\n  entry = \"{}\"\n  skyrl_gym_env = \"{}\"",
            dir.display(),
            found
                .iter()
                .map(|(f, c)| format!("{f}: {c}"))
                .collect::<Vec<_>>()
                .join(", "),
            found[0].0,
            found[0].1
        ),
    }
}

/// The skyrl-gym env of `dir`'s `entry` module, or `None` for an SDK plugin.
/// `package` and `class` are the manifest's `skyrl_gym_package` and
/// `skyrl_gym_env`; setting either asks for a skyrl-gym env.
pub fn resolve(
    dir: &Path,
    entry: &str,
    package: Option<String>,
    class: Option<String>,
) -> anyhow::Result<Option<GymEnv>> {
    let path = dir.join(entry);
    let source = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let asked = package.is_some() || class.is_some();
    let classes = env_classes(&source);
    if !asked && (classes.is_empty() || exports_itself(&source)) {
        return Ok(None);
    }
    let class = match class {
        Some(class) if classes.contains(&class) => class,
        Some(class) => {
            bail!("{entry} defines no BaseTextEnv subclass `{class}` (found: {classes:?})")
        }
        None => match classes.as_slice() {
            [one] => one.clone(),
            [] => bail!("{entry} defines no BaseTextEnv subclass"),
            _ => bail!(
                "{entry} defines several BaseTextEnv subclasses {classes:?}: set skyrl_gym_env"
            ),
        },
    };
    let package = match package {
        Some(package) => package,
        None => {
            let folder = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("skyrl_gym.envs.{folder}")
        }
    };
    let valid = package.starts_with("skyrl_gym.envs.")
        && package.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_alphanumeric() || c == '_')
        });
    if !valid {
        bail!(
            "`{package}` cannot hold the env: skyrl_gym_package must be a Python package under \
             skyrl_gym.envs (e.g. skyrl_gym.envs.my_env; a folder name that is not an identifier \
             needs it set)"
        );
    }
    Ok(Some(GymEnv { package, class }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_classes_are_found_by_their_bases() {
        let source = "class A(BaseTextEnv):\n    pass\nclass B(x.BaseTextEnv, Mixin):\n    \
                      pass\nclass C(Env):\n    pass\n    class D(BaseTextEnv):\n        pass\n";
        assert_eq!(env_classes(source), vec!["A", "B"]);
    }

    #[test]
    fn packages_default_to_the_folder_and_must_be_identifiers() {
        let dir = tempfile::tempdir().unwrap();
        let env_dir = dir.path().join("my_env");
        std::fs::create_dir(&env_dir).unwrap();
        std::fs::write(env_dir.join("env.py"), "class E(BaseTextEnv):\n    pass\n").unwrap();
        let gym = resolve(&env_dir, "env.py", None, None).unwrap().unwrap();
        assert_eq!(gym.package, "skyrl_gym.envs.my_env");
        assert_eq!(gym.class, "E");
        let bad = resolve(&env_dir, "env.py", Some("my-env".into()), None).unwrap_err();
        assert!(bad.to_string().contains("skyrl_gym_package"), "{bad}");
        let missing = resolve(&env_dir, "env.py", None, Some("F".into())).unwrap_err();
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
