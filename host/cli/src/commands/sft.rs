//! `skyrl sft`: supervised fine-tuning on chat data (skyrl 0.3.0's
//! `python -m skyrl.train.main_sft`), configured by an SFT config file and
//! dotted overrides (docs/config.md, "SFT").

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use skyrl_train::sft::{load_sft_config, train_sft, SftOptions};

#[derive(Args)]
pub struct SftArgs {
    /// YAML SFT config (see docs/config.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Stop after this many steps (the run can be resumed with resume_from=latest).
    #[arg(long)]
    max_steps: Option<u64>,
    /// Dotted overrides `key.sub=value`; a first argument without `=` is the config file.
    overrides: Vec<String>,
}

pub fn run(args: SftArgs) -> anyhow::Result<()> {
    let mut overrides = args.overrides;
    let mut config = args.config;
    if config.is_none() && overrides.first().is_some_and(|a| !a.contains('=')) {
        config = Some(PathBuf::from(overrides.remove(0)));
    }
    if let Some(bad) = overrides.iter().find(|a| !a.contains('=')) {
        bail!("override `{bad}` is not `key.sub=value`");
    }
    let cfg = load_sft_config(config.as_deref(), &overrides)?;
    let summary = train_sft(
        cfg,
        &SftOptions {
            max_steps: args.max_steps,
        },
    )?;
    if summary.rank != 0 {
        return Ok(());
    }
    println!(
        "trained steps {}..{} in {:.1}s",
        summary.start_step, summary.final_step, summary.wall_seconds
    );
    let losses = summary.losses();
    if let (Some(a), Some(b)) = (losses.first(), losses.last()) {
        println!("train/loss: first step {a:.4}, last step {b:.4}");
    }
    if let (Some((s0, e0)), Some((s1, e1))) = (summary.evals.first(), summary.evals.last()) {
        println!("eval/eval_loss: step {s0} {e0:.4}, step {s1} {e1:.4}");
    }
    println!("metrics: {}", summary.metrics_path.display());
    if let Some(p) = &summary.last_checkpoint {
        println!("checkpoint: {}", p.display());
    }
    if let Some(p) = &summary.last_export {
        println!("model: {}", p.display());
    }
    Ok(())
}
