//! `skyrl plugin ...`: inspect components and share them through OCI registries.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Subcommand;
use serde_json::json;
use skyrl_registry::{annotations, PluginRef, PluginResolver, RegistryClient, Selector};
use skyrl_runtime::{Plugin, PluginEngine};

use crate::plugin_source::{resolve_plugin_files, LockArgs};

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Build a plugin folder into a component. The language is detected
    /// (Cargo.toml: Rust; plugin.py: Python; plugin.js or package.json:
    /// JavaScript; go.mod or plugin.go: Go; plugin.c: C) or set in
    /// skyrl-plugin.toml.
    Build {
        /// The plugin folder.
        dir: PathBuf,
        /// Output .wasm (default: DIR/<folder name>.wasm).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Print a plugin's metadata (name, version, kind, worlds, imports, exports) as JSON.
    Inspect {
        /// A component file or `oci://` reference.
        source: String,
        #[command(flatten)]
        lock: LockArgs,
    },
    /// Push a component to a registry as a Wasm OCI artifact.
    Push {
        /// The component file (validated as a skyrl plugin first).
        file: PathBuf,
        /// Target `host[:port]/ns/name:version` (`oci://` optional).
        target: String,
        /// Extra manifest annotation `key=value`; repeatable.
        #[arg(long = "annotation")]
        annotations: Vec<String>,
    },
    /// Download and verify a plugin into the local cache; prints its path and digests as JSON.
    Pull {
        /// `host/ns/name:version`, `...:^1.2`, `...@sha256:...` (`oci://` optional).
        reference: String,
        /// Also copy the component here.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Record the resolution in this lock file (honoring existing pins).
        #[arg(long)]
        lock: Option<PathBuf>,
    },
    /// List a repository's tags, newest version first.
    List {
        /// `host/ns/name`.
        repository: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Search a registry's catalog: repositories whose name contains QUERY,
    /// with their newest version, kind and description.
    Search {
        /// `host[:port]`.
        registry: String,
        /// Substring of the repository name (all when omitted).
        query: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: PluginCommand) -> anyhow::Result<()> {
    match cmd {
        PluginCommand::Build { dir, output } => {
            let path = super::build::build(&dir, output.as_deref())?;
            println!("{}", path.display());
            Ok(())
        }
        PluginCommand::Inspect { source, lock } => {
            let file = resolve_plugin_files(&[source.as_str()], &lock)?.remove(0);
            let plugin = Plugin::load(&PluginEngine::shared()?, &file)?;
            let text =
                serde_json::to_string_pretty(plugin.metadata()).context("encoding metadata")?;
            println!("{text}");
            Ok(())
        }
        PluginCommand::Push {
            file,
            target,
            annotations,
        } => push(&file, &target, &annotations),
        PluginCommand::Pull {
            reference,
            output,
            lock,
        } => pull(&reference, output, lock),
        PluginCommand::List { repository, json } => list(&repository, json),
        PluginCommand::Search {
            registry,
            query,
            json,
        } => search(&registry, query.as_deref().unwrap_or(""), json),
    }
}

fn push(file: &std::path::Path, target: &str, extra: &[String]) -> anyhow::Result<()> {
    let target = PluginRef::parse(target)?;
    let Selector::Tag(tag) = &target.selector else {
        bail!(
            "push needs an exact tag, e.g. {}:1.0.0",
            target.repository_url()
        );
    };
    let plugin = Plugin::load(&PluginEngine::shared()?, file)
        .with_context(|| format!("{} is not a loadable skyrl plugin", file.display()))?;
    let meta = plugin.metadata();
    let mut ann = BTreeMap::from([
        (annotations::TITLE.to_string(), meta.info.name.clone()),
        (annotations::VERSION.to_string(), tag.clone()),
        (
            annotations::DESCRIPTION.to_string(),
            meta.info.description.clone(),
        ),
        (
            annotations::KIND.to_string(),
            serde_json::to_value(meta.info.kind)?
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ),
        (
            annotations::WORLDS.to_string(),
            meta.worlds
                .iter()
                .map(|w| w.name())
                .collect::<Vec<_>>()
                .join(","),
        ),
    ]);
    for kv in extra {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--annotation `{kv}` is not key=value"))?;
        ann.insert(k.to_string(), v.to_string());
    }
    let report = RegistryClient::from_env()?.push(file, &target, ann)?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn pull(reference: &str, output: Option<PathBuf>, lock: Option<PathBuf>) -> anyhow::Result<()> {
    let client = RegistryClient::from_env()?;
    let mut resolver = PluginResolver::new(&client, lock, false)?;
    let pulled = resolver.resolve(reference)?;
    resolver.save()?;
    if let Some(out) = &output {
        std::fs::copy(&pulled.path, out)
            .with_context(|| format!("copying the component to {}", out.display()))?;
    }
    println!("{}", serde_json::to_string_pretty(&pulled)?);
    Ok(())
}

fn list(repository: &str, as_json: bool) -> anyhow::Result<()> {
    let reference = PluginRef::parse(repository)?;
    let tags = RegistryClient::from_env()?.tag_infos(&reference)?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&tags)?);
    } else if tags.is_empty() {
        println!("{} has no tags", reference.repository_url());
    } else {
        for t in tags {
            println!("{}:{}", reference.repository_url(), t.tag);
        }
    }
    Ok(())
}

fn search(registry: &str, query: &str, as_json: bool) -> anyhow::Result<()> {
    let registry = registry
        .strip_prefix(skyrl_registry::OCI_SCHEME)
        .unwrap_or(registry);
    let client = RegistryClient::from_env()?;
    let mut rows = Vec::new();
    for repo in client.catalog(registry)? {
        if !repo.contains(query) {
            continue;
        }
        let reference = PluginRef::parse(&format!("{registry}/{repo}"))?;
        // Repositories that are not plugins (or have no versions) are listed plainly.
        let (version, ann) = match client.describe(&reference) {
            Ok((exact, ann)) => (exact.tag().map(str::to_string), ann),
            Err(e) => {
                tracing::debug!(%repo, error = %e, "not describing");
                (None, BTreeMap::new())
            }
        };
        rows.push(json!({
            "repository": format!("{registry}/{repo}"),
            "newest": version,
            "kind": ann.get(annotations::KIND),
            "description": ann.get(annotations::DESCRIPTION),
        }));
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    if rows.is_empty() {
        println!("no repositories in {registry} match `{query}`");
    }
    for row in rows {
        let s = |k: &str| row[k].as_str().unwrap_or("-").to_string();
        println!(
            "{}  {}  {}  {}",
            s("repository"),
            s("newest"),
            s("kind"),
            s("description")
        );
    }
    Ok(())
}
