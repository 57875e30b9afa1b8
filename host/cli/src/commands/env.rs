//! `skyrl env run`: drive an environment plugin with scripted actions.

use std::sync::Arc;

use crate::plugin_source::{resolve_plugin_files, LockArgs};
use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use skyrl_runtime::{
    Message, NetworkPolicy, Plugin, PluginEngine, ReadOnlyDir, SandboxPolicy, ToolRouter,
};

#[derive(Subcommand)]
pub enum EnvCommand {
    /// Run one episode: init with the prompt, then step with each action in
    /// order (stopping early when the env says done). Prints one JSON object
    /// per line: the init output, each step output, then the metrics.
    Run(RunArgs),
}

#[derive(Args)]
pub struct RunArgs {
    /// The environment component: a .wasm path or `oci://host/ns/name:version`.
    #[arg(long)]
    plugin: String,
    /// The user prompt (a single user message).
    #[arg(long)]
    prompt: String,
    /// A model action; repeat for several turns.
    #[arg(long = "action", required = true)]
    actions: Vec<String>,
    /// Env config as a JSON object.
    #[arg(long, default_value = "{}")]
    config: String,
    /// Dataset extras as a JSON object (e.g. '{"reward_spec":{"ground_truth":"42"}}').
    #[arg(long, default_value = "{}")]
    extras: String,
    /// Tool plugins the env may call (paths or `oci://` references); repeatable.
    #[arg(long = "tool")]
    tools: Vec<String>,
    #[command(flatten)]
    lock: LockArgs,
    /// Grant the env and its tools a host directory read-only as
    /// HOST:GUEST; repeatable.
    #[arg(long = "allow-read")]
    allow_read: Vec<String>,
    /// Let the env and its tools reach an HTTP origin, e.g.
    /// http://127.0.0.1:8000 or https://*.example.com; repeatable. Without
    /// it: no network.
    #[arg(long = "allow-host")]
    allow_host: Vec<String>,
}

pub fn run(cmd: EnvCommand) -> anyhow::Result<()> {
    let EnvCommand::Run(args) = cmd;
    let config = parse_object(&args.config, "--config")?;
    let extras = parse_object(&args.extras, "--extras")?;
    let engine = PluginEngine::shared()?;
    let specs: Vec<&str> = std::iter::once(args.plugin.as_str())
        .chain(args.tools.iter().map(String::as_str))
        .collect();
    let files = resolve_plugin_files(&specs, &args.lock)?;
    let policy = parse_policy(&args.allow_read, &args.allow_host)?;
    let mut plugin = Plugin::load(&engine, &files[0])?.with_policy(policy.clone())?;
    if !args.tools.is_empty() {
        let tools = files[1..]
            .iter()
            .map(|path| Plugin::load(&engine, path)?.with_policy(policy.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        plugin = plugin.with_tools(Arc::new(ToolRouter::new(tools)?))?;
    }
    let mut env = plugin.create_env(&config, &extras)?;
    let init = env.init(&[Message::user(args.prompt)])?;
    println!("{}", json!({ "init": init }));
    for action in &args.actions {
        let step = env.step(action)?;
        let done = step.done;
        println!("{}", json!({ "action": action, "step": step }));
        if done {
            break;
        }
    }
    println!("{}", json!({ "metrics": env.metrics()? }));
    env.close()?;
    Ok(())
}

fn parse_object(text: &str, flag: &str) -> anyhow::Result<Value> {
    let value: Value =
        serde_json::from_str(text).with_context(|| format!("{flag} is not valid JSON"))?;
    anyhow::ensure!(
        value.is_object(),
        "{flag} must be a JSON object, got {value}"
    );
    Ok(value)
}

fn parse_policy(grants: &[String], hosts: &[String]) -> anyhow::Result<SandboxPolicy> {
    let read_only_dirs = grants
        .iter()
        .map(|grant| {
            let (host, guest) = grant
                .split_once(':')
                .with_context(|| format!("--allow-read expects HOST:GUEST, got {grant:?}"))?;
            Ok(ReadOnlyDir {
                host: host.into(),
                guest: guest.to_string(),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(SandboxPolicy {
        read_only_dirs,
        network: NetworkPolicy {
            allowed_hosts: hosts.to_vec(),
            ..NetworkPolicy::default()
        },
    })
}
