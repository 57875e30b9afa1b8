//! `skyrl plugin build DIR`: turn a plugin folder into a component, in
//! whichever language it is written (detected from its files).

mod c;
mod componentize;
mod go;
mod gym;
mod js;
mod manifest;
mod python;
mod rust;
mod staging;
mod toolchain;

/// The WIT package, embedded so an installed `skyrl` builds plugins without
/// a source checkout.
pub(crate) const WIT: &str = include_str!("../../../../../wit/plugin.wit");

use std::path::{Path, PathBuf};

use anyhow::Context;
use skyrl_runtime::{Plugin, PluginEngine, PluginKind};

pub use manifest::{Language, Manifest};

/// Builds the plugin in `dir` into `output` (default `DIR/<name>.wasm`) and
/// checks that the result loads as the declared kind. A build that fails
/// either step leaves any earlier `output` untouched. Returns the path.
pub fn build(dir: &Path, output: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("plugin folder {} not found", dir.display()))?;
    let manifest = Manifest::load(&dir)?;
    let default_output = dir.join(format!("{}.wasm", manifest.artifact_name(&dir)));
    let output = output.map(Path::to_path_buf).unwrap_or(default_output);
    tracing::info!(
        language = ?manifest.language,
        kind = ?manifest.kind,
        "building {} -> {}",
        dir.display(),
        output.display()
    );
    let unverified = output.with_extension("wasm.unverified");
    let built = match manifest.language {
        Language::Rust => rust::build(&dir, &unverified),
        Language::Python => python::build(&dir, &manifest, &unverified),
        Language::Js => js::build(&dir, &manifest, &unverified),
        Language::Go => go::build(&dir, &manifest, &unverified),
        Language::C => c::build(&dir, &manifest, &unverified),
    }
    .and_then(|()| verify(&unverified, manifest.kind));
    if let Err(err) = built {
        let _ = std::fs::remove_file(&unverified);
        return Err(err);
    }
    staging::publish(&unverified, &output)?;
    Ok(output)
}

/// The built component must load and describe itself as `kind`.
fn verify(path: &Path, kind: Option<PluginKind>) -> anyhow::Result<()> {
    let plugin = Plugin::load(&PluginEngine::shared()?, path)
        .with_context(|| format!("the built component {} does not load", path.display()))?;
    let info = &plugin.metadata().info;
    anyhow::ensure!(
        kind.is_none_or(|kind| info.kind == kind),
        "{} describes itself as a {:?} plugin, but skyrl-plugin.toml says {:?}",
        path.display(),
        info.kind,
        kind.expect("checked above")
    );
    Ok(())
}
