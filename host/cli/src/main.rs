//! `skyrl`: RL post-training with sandboxed WebAssembly plugins.

mod commands;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

/// RL post-training for LLMs with sandboxed WebAssembly environments.
#[derive(Parser)]
#[command(name = "skyrl", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect plugin components.
    #[command(subcommand)]
    Plugin(commands::plugin::PluginCommand),
    /// Run environments by hand.
    #[command(subcommand)]
    Env(commands::env::EnvCommand),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("SKYRL_LOG").unwrap_or_else(|_| EnvFilter::new("warn")))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plugin(cmd) => commands::plugin::run(cmd),
        Command::Env(cmd) => commands::env::run(cmd),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
