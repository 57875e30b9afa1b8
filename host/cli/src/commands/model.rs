//! `skyrl model init`: write a randomly initialised tiny model (Hugging Face layout).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use skyrl_model::{init_tiny_model, Arch, TinySize};

#[derive(Subcommand)]
pub enum ModelCommand {
    /// Write a random-init model with the built-in character tokenizer and ChatML template.
    Init(InitArgs),
}

#[derive(Args)]
pub struct InitArgs {
    /// Architecture: qwen2, llama or qwen3.
    #[arg(long, default_value = "qwen2")]
    arch: String,
    /// Preset size: tiny or small.
    #[arg(long, default_value = "tiny")]
    size: String,
    /// Output directory (replaced atomically).
    #[arg(long)]
    out: PathBuf,
    /// Seed of the weight init.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub fn run(cmd: ModelCommand) -> anyhow::Result<()> {
    let ModelCommand::Init(args) = cmd;
    let arch = Arch::parse(&args.arch)?;
    let size = TinySize::parse(&args.size)?;
    init_tiny_model(arch, size, &args.out, args.seed)?;
    println!("wrote {} ({} {})", args.out.display(), args.arch, args.size);
    Ok(())
}
