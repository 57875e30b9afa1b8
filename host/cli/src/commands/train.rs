//! `skyrl train`: GRPO/PPO training with environment plugins.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use skyrl_runtime::{Plugin, PluginEngine};
use skyrl_train::config::load_config;
use skyrl_train::generator::EnvRegistry;
use skyrl_train::trainer::{train, TrainOptions};

#[derive(Args)]
pub struct TrainArgs {
    /// Environment plugin: `ENV_CLASS=PATH`, or a plain PATH used for
    /// `environment.env_class`. Repeatable.
    #[arg(long = "plugin", required = true)]
    plugins: Vec<String>,
    /// YAML config (see docs/config.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Resume from the latest checkpoint under trainer.ckpt_path
    /// (sets trainer.resume_mode=latest).
    #[arg(long)]
    resume: bool,
    /// Stop after this many steps (the run can be resumed later).
    #[arg(long)]
    max_steps: Option<u64>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Dotted overrides `key.sub=value`; a first argument without `=` is the config file.
    overrides: Vec<String>,
}

/// Splits `--plugin` values into (env_class or None, path).
fn parse_plugin(spec: &str) -> (Option<&str>, &Path) {
    match spec.split_once('=') {
        Some((name, path)) if !name.is_empty() && !name.contains('/') => {
            (Some(name), Path::new(path))
        }
        _ => (None, Path::new(spec)),
    }
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let mut overrides = args.overrides;
    let mut config = args.config;
    if config.is_none() && overrides.first().is_some_and(|a| !a.contains('=')) {
        config = Some(PathBuf::from(overrides.remove(0)));
    }
    if let Some(bad) = overrides.iter().find(|a| !a.contains('=')) {
        bail!("override `{bad}` is not `key.sub=value`");
    }
    if args.resume {
        overrides.push("trainer.resume_mode=latest".into());
    }
    let cfg = load_config(config.as_deref(), &overrides)?;
    let engine = PluginEngine::shared()?;
    let mut envs = EnvRegistry::default();
    for spec in &args.plugins {
        let (name, path) = parse_plugin(spec);
        let class = name.unwrap_or(&cfg.environment.env_class).to_string();
        if !path.is_file() {
            bail!(
                "--plugin {spec}: {} does not exist (build the plugins with scripts/build-plugins)",
                path.display()
            );
        }
        let plugin = Plugin::load(&engine, path)
            .with_context(|| format!("cannot load plugin {}", path.display()))?;
        let env_cfg = cfg
            .environment
            .skyrl_gym
            .envs
            .get(&class)
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}));
        envs.insert(&class, plugin, env_cfg);
    }
    let summary = train(
        cfg,
        envs,
        &TrainOptions {
            progress: !args.quiet,
            max_steps: args.max_steps,
        },
    )?;
    let first = summary.steps.first().and_then(|m| m.get("reward/mean"));
    let last = summary.steps.last().and_then(|m| m.get("reward/mean"));
    println!(
        "trained steps {}..{} in {:.1}s",
        summary.start_step, summary.final_step, summary.wall_seconds
    );
    if let (Some(a), Some(b)) = (first, last) {
        println!("train reward: first step {a:.3}, last step {b:.3}");
    }
    if let (Some((s0, e0)), Some((s1, e1))) = (summary.evals.first(), summary.evals.last()) {
        println!(
            "eval reward: step {s0} {:.3}, step {s1} {:.3}",
            e0["eval/reward_mean"], e1["eval/reward_mean"]
        );
    }
    println!("metrics: {}", summary.metrics_path.display());
    if let Some(p) = &summary.plot_path {
        println!("reward curve: {}", p.display());
    }
    if let Some(p) = &summary.last_checkpoint {
        println!("checkpoint: {}", p.display());
    }
    Ok(())
}
