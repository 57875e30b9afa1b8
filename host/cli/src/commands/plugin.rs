//! `skyrl plugin ...`

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use skyrl_runtime::{Plugin, PluginEngine};

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Print a plugin's metadata (name, version, kind, worlds, imports, exports) as JSON.
    Inspect {
        /// The component file.
        file: PathBuf,
    },
}

pub fn run(cmd: PluginCommand) -> anyhow::Result<()> {
    match cmd {
        PluginCommand::Inspect { file } => {
            let engine = PluginEngine::shared()?;
            let plugin = Plugin::load(&engine, &file)?;
            let text =
                serde_json::to_string_pretty(plugin.metadata()).context("encoding metadata")?;
            println!("{text}");
            Ok(())
        }
    }
}
