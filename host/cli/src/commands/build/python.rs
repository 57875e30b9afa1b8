//! Python plugins: componentize-py over the author's module, the embedded
//! Python SDK (`sdk/python`) and the embedded WIT package.

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use super::manifest::{AlgorithmWorld, GuestWorld, Manifest};
use super::staging::{partial_path, publish, write};
use super::{toolchain, WIT};

/// The componentize-py release the SDK is tested with.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";

/// `sdk/python/skyrl_sdk`, embedded so an installed `skyrl` builds plugins
/// without a source checkout.
const SDK: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/__init__.py"),
    ),
    (
        "types.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/types.py"),
    ),
    (
        "plugin.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/plugin.py"),
    ),
    (
        "host.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/host.py"),
    ),
    (
        "gsm8k.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/gsm8k.py"),
    ),
    (
        "gym.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/gym.py"),
    ),
    (
        "_glue.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_glue.py"),
    ),
    (
        "_env_world.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_env_world.py"),
    ),
    (
        "_tool_world.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_tool_world.py"),
    ),
    (
        "_reward_world.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_reward_world.py"),
    ),
    (
        "_algorithm_glue.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_algorithm_glue.py"),
    ),
    (
        "_advantage_glue.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_advantage_glue.py"),
    ),
    (
        "_loss_glue.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_loss_glue.py"),
    ),
    (
        "_advantage_world.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_advantage_world.py"),
    ),
    (
        "_policy_loss_world.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_policy_loss_world.py"),
    ),
    (
        "_algorithm_world.py",
        include_str!("../../../../../sdk/python/skyrl_sdk/_algorithm_world.py"),
    ),
];

/// `sdk/python/skyrl_gym`: the skyrl-gym-compatible package bundled into
/// every Python plugin (paths relative to `skyrl_gym/`).
const GYM: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../../../sdk/python/skyrl_gym/__init__.py"),
    ),
    (
        "core.py",
        include_str!("../../../../../sdk/python/skyrl_gym/core.py"),
    ),
    (
        "error.py",
        include_str!("../../../../../sdk/python/skyrl_gym/error.py"),
    ),
    (
        "metrics.py",
        include_str!("../../../../../sdk/python/skyrl_gym/metrics.py"),
    ),
    (
        "envs/__init__.py",
        include_str!("../../../../../sdk/python/skyrl_gym/envs/__init__.py"),
    ),
    (
        "envs/base_text_env.py",
        include_str!("../../../../../sdk/python/skyrl_gym/envs/base_text_env.py"),
    ),
    (
        "envs/registration.py",
        include_str!("../../../../../sdk/python/skyrl_gym/envs/registration.py"),
    ),
    (
        "tools/__init__.py",
        include_str!("../../../../../sdk/python/skyrl_gym/tools/__init__.py"),
    ),
    (
        "tools/core.py",
        include_str!("../../../../../sdk/python/skyrl_gym/tools/core.py"),
    ),
];

/// The SDK module exporting each world.
fn glue_module(world: GuestWorld) -> &'static str {
    match world {
        GuestWorld::Environment => "_env_world",
        GuestWorld::Tool => "_tool_world",
        GuestWorld::Reward => "_reward_world",
    }
}

/// The SDK module exporting each algorithm world.
fn algorithm_glue_module(world: AlgorithmWorld) -> &'static str {
    match world {
        AlgorithmWorld::Advantage => "_advantage_world",
        AlgorithmWorld::PolicyLoss => "_policy_loss_world",
        AlgorithmWorld::Both => "_algorithm_world",
    }
}

/// Builds `dir` (with `manifest.entry`, e.g. `plugin.py`) into `output`.
pub fn build(dir: &Path, manifest: &Manifest, output: &Path) -> anyhow::Result<()> {
    let (world, glue, guest) = match manifest.algorithm {
        Some(a) => (a.wit_name(), algorithm_glue_module(a), None),
        None => {
            let guest = manifest.guest_world()?;
            (guest.wit_name(), glue_module(guest), Some(guest))
        }
    };
    let module = Path::new(&manifest.entry)
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .with_context(|| format!("entry `{}` is not a Python module file", manifest.entry))?
        .to_string();
    let staging = tempfile::tempdir().context("cannot create a staging folder")?;
    let root = staging.path();
    write(&root.join("wit/plugin.wit"), WIT)?;
    for (name, text) in SDK {
        write(&root.join("sdk/skyrl_sdk").join(name), text)?;
    }
    for (name, text) in GYM {
        write(&root.join("sdk/skyrl_gym").join(name), text)?;
    }
    // componentize-py looks up the world's exports in `app` and resource
    // classes in a module named after their interface.
    let registers = match &manifest.gym {
        None => format!("import {module}  # registers the plugin\n"),
        Some(gym) => {
            stage_gym_package(dir, &root.join("sdk"), &gym.package)?;
            let name = manifest.artifact_name(dir);
            // JSON string literals are Python string literals.
            let description = format!("skyrl-gym {} ({}.{module})", gym.class, gym.package);
            format!(
                "from skyrl_sdk.gym import {exporter}\n\
                 import {package}.{module} as _entry\n\
                 {exporter}(_entry.{class}, name={name}, version=\"0.1.0\", \
                 description={description})\n",
                exporter = gym.kind.exporter(),
                package = gym.package,
                class = gym.class,
                name = serde_json::Value::from(name),
                description = serde_json::Value::from(description),
            )
        }
    };
    write(
        &root.join("app/app.py"),
        &format!("{registers}from skyrl_sdk.{glue} import *  # noqa: F401,F403\n"),
    )?;
    if guest == Some(GuestWorld::Environment) {
        write(
            &root.join("app/environment.py"),
            "from skyrl_sdk._env_world import Env  # noqa: F401\n",
        )?;
    }
    let tool = toolchain::find(
        "SKYRL_COMPONENTIZE_PY",
        "componentize-py",
        &format!(
            "pip install componentize-py=={COMPONENTIZE_PY_VERSION} (scripts/setup installs it)"
        ),
    )?;
    let partial = partial_path(output);
    let mut command = Command::new(&tool);
    command
        .arg("-d")
        .arg(root.join("wit"))
        .args(["-w", world, "componentize", "app"])
        .arg("-p")
        .arg(root.join("app"))
        .arg("-p")
        .arg(dir)
        .arg("-p")
        .arg(root.join("sdk"))
        .arg("-o")
        .arg(&partial);
    toolchain::run(&mut command, "componentize-py")?;
    publish(&partial, output)
}

/// Copies `dir`'s Python files to where `package` (e.g.
/// `skyrl_gym.envs.gsm8k`) lives under `sdk`, with `__init__.py` files on
/// the way below `skyrl_gym.envs` / `skyrl_gym.tools` so the staged folder
/// is a package.
fn stage_gym_package(dir: &Path, sdk: &Path, package: &str) -> anyhow::Result<()> {
    let parts: Vec<&str> = package.split('.').collect();
    let target = parts.iter().fold(sdk.to_path_buf(), |p, part| p.join(part));
    std::fs::create_dir_all(&target)
        .with_context(|| format!("cannot create {}", target.display()))?;
    for depth in 3..=parts.len() {
        let init = parts[..depth]
            .iter()
            .fold(sdk.to_path_buf(), |p, part| p.join(part))
            .join("__init__.py");
        if !init.exists() {
            write(&init, "")?;
        }
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "py") {
            let name = path.file_name().expect("a file has a name");
            std::fs::copy(&path, target.join(name)).with_context(|| {
                format!("cannot stage {} into {}", path.display(), target.display())
            })?;
        }
    }
    Ok(())
}
