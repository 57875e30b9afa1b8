//! `skyrl train`: GRPO/PPO training with environment plugins; and `skyrl
//! eval`, the evaluation alone (skyrl-train's main_generate), with the same
//! plugins and config.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;
use skyrl_rollout::sandbox::{wants_fuel, wire_tools, SandboxSettings};
use skyrl_rollout::PluginSet;
use skyrl_runtime::{EngineOptions, Plugin, PluginEngine, ToolRouter};
use skyrl_train::config::{load_config, SkyrlConfig, TrainingMode};
use skyrl_train::trainer::{evaluate_only, train, TrainOptions};

use crate::plugin_source::{resolve_plugin_files, LockArgs};

/// What `skyrl train` and `skyrl eval` share: plugins, config, overrides.
#[derive(Args)]
pub struct RunArgs {
    /// Environment plugin: `ENV_CLASS=SOURCE`, or a plain SOURCE used for
    /// `environment.env_class`; SOURCE is a .wasm path or a registry reference
    /// `oci://host/ns/name:1.2.0` (also `:^1.2`, `@sha256:...`). Repeatable.
    #[arg(long = "plugin", required = true)]
    plugins: Vec<String>,
    /// Reward plugin for `environment.reward_rubric`: `NAME=SOURCE` (a .wasm
    /// path or an `oci://` reference). Repeatable.
    #[arg(long = "reward")]
    rewards: Vec<String>,
    /// Rollout generator plugin (the `generator-plugin` world) replacing the
    /// built-in multi-turn loop; its options go in generator.custom_generator.config.
    #[arg(long)]
    generator: Option<String>,
    /// Tool plugin whose tools the env, reward and generator plugins may call
    /// (e.g. plugins/python for sandboxed code execution); a .wasm path or an
    /// `oci://` reference. Repeatable.
    #[arg(long = "tool")]
    tools: Vec<String>,
    /// Algorithm plugin (advantage estimator and/or policy loss):
    /// `NAME=SOURCE` (a .wasm path or an `oci://` reference), selected with
    /// trainer.algorithm.advantage_estimator=plugin:NAME or
    /// trainer.algorithm.policy_loss_type=plugin:NAME. Repeatable.
    #[arg(long = "algorithm")]
    algorithms: Vec<String>,
    #[command(flatten)]
    lock: LockArgs,
    /// YAML config (see docs/config.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Dotted overrides `key.sub=value`; a first argument without `=` is the config file.
    overrides: Vec<String>,
}

#[derive(Args)]
pub struct TrainArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Resume from the latest checkpoint under trainer.ckpt_path
    /// (sets trainer.resume_mode=latest).
    #[arg(long)]
    resume: bool,
    /// Stop after this many steps (the run can be resumed later).
    #[arg(long)]
    max_steps: Option<u64>,
}

#[derive(Args)]
pub struct EvalArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Evaluate this checkpoint (`.../global_step_N`) instead of the configured
    /// model (sets trainer.resume_mode=from_path and trainer.resume_path).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
}

/// Splits `--plugin` values into (env_class or None, source).
fn parse_plugin(spec: &str) -> (Option<&str>, &str) {
    match spec.split_once('=') {
        Some((name, source)) if !name.is_empty() && !name.contains('/') => (Some(name), source),
        _ => (None, spec),
    }
}

/// Every plugin source of a run, by role, resolved in one pass (one lock
/// file update, one registry client) and loaded into one [`PluginSet`].
struct PluginSources<'a> {
    tools: Vec<&'a str>,
    /// `(env class or None for environment.env_class, source)`.
    envs: Vec<(Option<&'a str>, &'a str)>,
    /// `(rubric name, source)`.
    rewards: Vec<(&'a str, &'a str)>,
    generator: Option<&'a str>,
    /// `(algorithm name, source)`.
    algorithms: Vec<(&'a str, &'a str)>,
}

impl<'a> PluginSources<'a> {
    fn from_args(args: &'a RunArgs) -> anyhow::Result<Self> {
        let rewards = args
            .rewards
            .iter()
            .map(|spec| match parse_plugin(spec) {
                (Some(name), source) => Ok((name, source)),
                (None, _) => Err(anyhow::anyhow!(
                    "--reward `{spec}` must be NAME=SOURCE (the name used in environment.reward_rubric)"
                )),
            })
            .collect::<anyhow::Result<_>>()?;
        let algorithms = args
            .algorithms
            .iter()
            .map(|spec| match parse_plugin(spec) {
                (Some(name), source) => Ok((name, source)),
                (None, _) => Err(anyhow::anyhow!(
                    "--algorithm `{spec}` must be NAME=SOURCE (selected as plugin:NAME)"
                )),
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self {
            tools: args.tools.iter().map(String::as_str).collect(),
            envs: args.plugins.iter().map(|s| parse_plugin(s)).collect(),
            rewards,
            generator: args.generator.as_deref(),
            algorithms,
        })
    }

    /// Resolves every source to a local file (pulling `oci://` references),
    /// applies `environment.sandbox`, wires tools and loads the plugins.
    fn load(&self, cfg: &SkyrlConfig, lock: &LockArgs) -> anyhow::Result<PluginSet> {
        let mut all: Vec<&str> = self.tools.clone();
        all.extend(self.envs.iter().map(|(_, s)| *s));
        all.extend(self.rewards.iter().map(|(_, s)| *s));
        all.extend(self.generator);
        all.extend(self.algorithms.iter().map(|(_, s)| *s));
        let mut files = resolve_plugin_files(&all, lock)?.into_iter();
        let mut next = || files.next().expect("one file per source");
        // Fuel is compiled into plugins: only runs that ask for it pay for it.
        let engine = PluginEngine::new(EngineOptions::for_live_instances(
            live_sandboxes(cfg),
            wants_fuel(&cfg.environment.sandbox),
        ))?;
        let mut sandbox = SandboxSettings::new(&cfg.environment.sandbox);
        let load = |source: &str, path: &std::path::Path, what: &str| {
            Plugin::load(&engine, path)
                .with_context(|| format!("cannot load {what} plugin {source}"))
        };
        let mut tool_plugins = Vec::new();
        for source in &self.tools {
            tool_plugins.push(sandbox.apply(load(source, &next(), "tool")?, None)?);
        }
        let tools = Arc::new(ToolRouter::new(tool_plugins)?);
        let mut set = PluginSet::default();
        for (name, source) in &self.envs {
            let class = name.unwrap_or(&cfg.environment.env_class).to_string();
            let plugin = load(source, &next(), "environment")?;
            let plugin = wire_tools(sandbox.apply(plugin, Some(&class))?, &tools)?;
            let env_cfg = cfg
                .environment
                .skyrl_gym
                .envs
                .get(&class)
                .cloned()
                .unwrap_or_else(|| serde_json::json!({}));
            set.insert(&class, plugin, env_cfg);
        }
        for (name, source) in &self.rewards {
            let plugin = load(source, &next(), "reward")?;
            set.insert_reward(
                name,
                wire_tools(sandbox.apply(plugin, Some(name))?, &tools)?,
            );
        }
        if let Some(source) = self.generator {
            let plugin = load(source, &next(), "generator")?;
            set.set_generator(wire_tools(sandbox.apply(plugin, None)?, &tools)?);
        }
        for (name, source) in &self.algorithms {
            let plugin = load(source, &next(), "algorithm")?;
            set.insert_algorithm(name, sandbox.apply(plugin, None)?);
        }
        sandbox.check_all_used()?;
        Ok(set)
    }
}

/// The config (file, overrides, then `extra` overrides) and the plugins of a run.
fn load_run(args: &RunArgs, extra: &[String]) -> anyhow::Result<(SkyrlConfig, PluginSet)> {
    let mut overrides = args.overrides.clone();
    let mut config = args.config.clone();
    if config.is_none() && overrides.first().is_some_and(|a| !a.contains('=')) {
        config = Some(PathBuf::from(overrides.remove(0)));
    }
    if let Some(bad) = overrides.iter().find(|a| !a.contains('=')) {
        bail!("override `{bad}` is not `key.sub=value`");
    }
    overrides.extend_from_slice(extra);
    let cfg = load_config(config.as_deref(), &overrides)?;
    let envs = PluginSources::from_args(args)?.load(&cfg, &args.lock)?;
    Ok((cfg, envs))
}

/// `skyrl eval`: evaluates the configured model (or `--checkpoint`) on
/// `data.val_data`, prints the metrics as JSON and, with
/// `trainer.dump_eval_results`, writes every trajectory under
/// `export_path/dumped_evals/eval_only`.
pub fn run_eval(args: EvalArgs) -> anyhow::Result<()> {
    let mut extra = Vec::new();
    if let Some(dir) = &args.checkpoint {
        if !dir.join("trainer_state.json").is_file() {
            bail!(
                "--checkpoint {}: not a checkpoint directory (no trainer_state.json)",
                dir.display()
            );
        }
        extra.push("trainer.resume_mode=from_path".into());
        extra.push(format!("trainer.resume_path={}", dir.display()));
    }
    let (cfg, envs) = load_run(&args.run, &extra)?;
    let opts = TrainOptions {
        progress: !args.run.quiet,
        max_steps: None,
        engine_program: std::env::current_exe().ok(),
        eval_only: true,
    };
    let (rank, metrics) = evaluate_only(cfg, envs, &opts)?;
    if rank == 0 {
        println!("{}", serde_json::to_string_pretty(&metrics)?);
    }
    Ok(())
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let extra: Vec<String> = match args.resume {
        true => vec!["trainer.resume_mode=latest".into()],
        false => Vec::new(),
    };
    let (cfg, envs) = load_run(&args.run, &extra)?;
    let summary = train(
        cfg,
        envs,
        &TrainOptions {
            progress: !args.run.quiet,
            max_steps: args.max_steps,
            engine_program: std::env::current_exe().ok(),
            eval_only: false,
        },
    )?;
    if summary.rank != 0 {
        // Rank 0 reports the run (and wrote its files).
        return Ok(());
    }
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

/// Sandboxes a run may hold at once: an env per trajectory in flight (a
/// whole generation batch is live together; the pipelined modes may run an
/// evaluation batch beside their rollouts, and fully_async generates
/// `num_parallel_generation_workers` groups at a time), plus the tool and
/// reward calls the env workers make, each in a fresh instance.
fn live_sandboxes(cfg: &SkyrlConfig) -> usize {
    let samples = cfg
        .generator
        .n_samples_per_prompt
        .max(cfg.generator.eval_n_samples_per_prompt);
    let (train, eval) = (cfg.trainer.train_batch_size, cfg.trainer.eval_batch_size);
    let groups = match cfg.trainer.training_mode {
        TrainingMode::Sync => train.max(eval),
        TrainingMode::OneStepOff => train + eval,
        TrainingMode::FullyAsync => cfg.trainer.fully_async.num_parallel_generation_workers + eval,
    };
    let calls = 2 * cfg.environment.skyrl_gym.max_env_workers;
    groups
        .max(1)
        .saturating_mul(samples.max(1))
        .saturating_add(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_pool_holds_a_whole_batch_of_episodes() {
        let mut cfg = SkyrlConfig::default();
        cfg.trainer.train_batch_size = 1024;
        cfg.trainer.eval_batch_size = 64;
        cfg.generator.n_samples_per_prompt = 5;
        cfg.generator.eval_n_samples_per_prompt = 1;
        cfg.environment.skyrl_gym.max_env_workers = 32;
        // SkyRL's usual GRPO batch: 5120 episodes live together, plus calls.
        assert_eq!(live_sandboxes(&cfg), 1024 * 5 + 64);
        cfg.trainer.training_mode = TrainingMode::OneStepOff;
        assert_eq!(live_sandboxes(&cfg), (1024 + 64) * 5 + 64);
        cfg.trainer.training_mode = TrainingMode::FullyAsync;
        cfg.trainer.fully_async.num_parallel_generation_workers = 8;
        assert_eq!(live_sandboxes(&cfg), (8 + 64) * 5 + 64);
        let options = EngineOptions::for_live_instances(live_sandboxes(&cfg), false);
        assert!(options.pool_size as usize >= live_sandboxes(&cfg));
    }
}
