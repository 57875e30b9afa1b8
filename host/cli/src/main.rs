//! `skyrl`: RL post-training with sandboxed WebAssembly plugins.

mod commands;
mod plugin_source;

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
    /// Train a policy with RL (GRPO by default) on environment plugins.
    Train(commands::train::TrainArgs),
    /// Supervised fine-tuning on chat data (an SFT config; docs/config.md).
    Sft(commands::sft::SftArgs),
    /// Evaluate a model or checkpoint on data.val_data (no training).
    Eval(commands::train::EvalArgs),
    /// Serve a model over an OpenAI-compatible HTTP API with weight-control endpoints.
    Serve(commands::serve::ServeArgs),
    /// Serve the Tinker API (the `tinker` Python client) for LoRA training and sampling of one base model.
    TinkerServe(commands::tinker_serve::TinkerServeArgs),
    /// Serve BM25 retrieval over a JSONL corpus with Search-R1's `/retrieve` protocol (for the search env).
    RetrievalServe(commands::retrieval_serve::RetrievalServeArgs),
    /// Create models.
    #[command(subcommand)]
    Model(commands::model::ModelCommand),
    /// Check datasets as the trainer loads them.
    #[command(subcommand)]
    Data(commands::data::DataCommand),
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("SKYRL_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Plugin(cmd) => commands::plugin::run(cmd),
        Command::Env(cmd) => commands::env::run(cmd),
        Command::Train(args) => commands::train::run(args),
        Command::Sft(args) => commands::sft::run(args),
        Command::Eval(args) => commands::train::run_eval(args),
        Command::Model(cmd) => commands::model::run(cmd),
        Command::Serve(args) => commands::serve::run(args),
        Command::TinkerServe(args) => commands::tinker_serve::run(args),
        Command::RetrievalServe(args) => commands::retrieval_serve::run(args),
        Command::Data(cmd) => commands::data::run(cmd),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
