//! Custom rollout generators: plugins of the `generator-plugin` world.
//!
//! A generator drives rollouts itself through host imports: `llm`
//! (generate, tokenize, detokenize, chat template) and `envs` (open an
//! environment registered with the host by class and step it). The host side
//! of those imports is a [`GeneratorHost`] supplied by the trainer; envs a
//! generator opens run in their own sandboxes, as usual.

use std::sync::Arc;

use wasmtime::component::Resource;

use crate::bindings::generator_world::skyrl::plugin::{envs, llm};
use crate::bindings::generator_world::{exports, GeneratorPlugin};
use crate::bindings::types;
use crate::env::{from_wit, to_wit, EnvInstance};
use crate::error::Result;
use crate::metadata::World;
use crate::plugin::Plugin;
use crate::sandbox::Sandbox;
use crate::state::HostState;
use crate::Message;

/// An environment a generator opened (a host resource).
pub struct EnvHandle(EnvInstance);

/// Sampling settings of an `llm.generate` call.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmParams {
    pub max_tokens: u32,
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: i32,
    pub min_p: f32,
    pub stop: Vec<String>,
    pub seed: Option<u64>,
}

/// One completion returned to a generator.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCompletion {
    pub token_ids: Vec<u32>,
    pub logprobs: Vec<f32>,
    pub text: String,
    /// `stop` or `length`.
    pub stop_reason: String,
}

/// What the host offers a generator plugin.
pub trait GeneratorHost: Send + Sync {
    /// One completion per prompt, prompt `i` seeded with `seed + i` when a seed is given.
    fn generate(
        &self,
        prompts: Vec<Vec<u32>>,
        params: &LlmParams,
    ) -> std::result::Result<Vec<LlmCompletion>, String>;
    fn tokenize(&self, text: &str) -> Vec<u32>;
    fn detokenize(&self, ids: &[u32]) -> String;
    fn apply_chat_template(&self, messages: &[Message], add_generation_prompt: bool) -> Vec<u32>;
    /// A fresh environment of `env_class` for a row with these extras.
    fn open_env(
        &self,
        env_class: &str,
        extras_json: &str,
    ) -> std::result::Result<EnvInstance, String>;
}

/// One prompt handed to a generator.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratorPrompt {
    pub prompt: Vec<Message>,
    pub env_class: String,
    pub extras: serde_json::Value,
    pub trajectory_id: String,
}

/// One trajectory a generator returns (skyrl's GeneratorOutput fields).
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedTrajectory {
    pub prompt_token_ids: Vec<u32>,
    pub response_ids: Vec<u32>,
    pub loss_mask: Vec<u8>,
    pub rewards: Vec<f32>,
    pub rollout_logprobs: Vec<f32>,
    pub stop_reason: String,
}

/// A generator plugin instance in its own sandbox.
pub struct GeneratorInstance {
    sandbox: Sandbox,
    bindings: GeneratorPlugin,
}

impl Plugin {
    /// Instantiate this plugin as a rollout generator using `host` for its imports.
    pub fn create_generator(&self, host: Arc<dyn GeneratorHost>) -> Result<GeneratorInstance> {
        let pre = self
            .pres
            .generator
            .as_ref()
            .ok_or_else(|| self.wrong_world(World::GeneratorPlugin))?;
        let mut sandbox = self.sandbox()?;
        sandbox.store.data_mut().generator_host = Some(host);
        let bindings = sandbox.call("instantiate", |s| pre.instantiate(s))?;
        Ok(GeneratorInstance { sandbox, bindings })
    }
}

impl GeneratorInstance {
    /// Runs the generator on a batch of prompts with the sampling settings
    /// (a JSON object) and checks every trajectory's lengths line up.
    pub fn generate(
        &mut self,
        prompts: &[GeneratorPrompt],
        sampling: &serde_json::Value,
    ) -> Result<Vec<GeneratedTrajectory>> {
        let wit_prompts: Vec<exports::skyrl::plugin::generator::GeneratorPrompt> = prompts
            .iter()
            .map(|p| exports::skyrl::plugin::generator::GeneratorPrompt {
                prompt: p.prompt.iter().map(to_wit).collect(),
                env_class: p.env_class.clone(),
                extras_json: p.extras.to_string(),
                trajectory_id: p.trajectory_id.clone(),
            })
            .collect();
        let sampling = sampling.to_string();
        let bindings = &self.bindings;
        let out = self
            .sandbox
            .call("generate", |s| {
                bindings
                    .skyrl_plugin_generator()
                    .call_generate(s, &wit_prompts, &sampling)
            })?
            .map_err(|e| self.sandbox.guest_error("generate", e))?;
        if out.len() != prompts.len() {
            return Err(self.sandbox.invalid_output(
                "generate",
                format!("{} trajectories for {} prompts", out.len(), prompts.len()),
            ));
        }
        let mut trajectories = Vec::with_capacity(out.len());
        for (i, t) in out.into_iter().enumerate() {
            let n = t.response_ids.len();
            if t.loss_mask.len() != n || t.rewards.len() != n || t.rollout_logprobs.len() != n {
                return Err(self.sandbox.invalid_output(
                    "generate",
                    format!(
                        "trajectory {i}: {n} response ids but {} loss-mask, {} rewards, {} logprobs",
                        t.loss_mask.len(),
                        t.rewards.len(),
                        t.rollout_logprobs.len()
                    ),
                ));
            }
            if t.prompt_token_ids.is_empty() {
                return Err(self
                    .sandbox
                    .invalid_output("generate", format!("trajectory {i} has an empty prompt")));
            }
            trajectories.push(GeneratedTrajectory {
                prompt_token_ids: t.prompt_token_ids,
                response_ids: t.response_ids,
                loss_mask: t.loss_mask,
                rewards: t.rewards,
                rollout_logprobs: t.rollout_logprobs,
                stop_reason: t.stop_reason,
            });
        }
        Ok(trajectories)
    }
}

impl HostState {
    fn generator_host(&self) -> std::result::Result<Arc<dyn GeneratorHost>, String> {
        self.generator_host
            .clone()
            .ok_or_else(|| "llm and envs imports are only available to generator plugins".into())
    }
}

fn params(p: llm::SamplingParams) -> LlmParams {
    LlmParams {
        max_tokens: p.max_tokens,
        temperature: p.temperature,
        top_p: p.top_p,
        top_k: p.top_k,
        min_p: p.min_p,
        stop: p.stop,
        seed: p.seed,
    }
}

fn completion(c: LlmCompletion) -> llm::Completion {
    llm::Completion {
        token_ids: c.token_ids,
        logprobs: c.logprobs,
        text: c.text,
        stop_reason: c.stop_reason,
    }
}

impl llm::Host for HostState {
    fn generate(
        &mut self,
        prompt_ids: Vec<u32>,
        p: llm::SamplingParams,
    ) -> std::result::Result<llm::Completion, String> {
        let host = self.generator_host()?;
        let mut out = host.generate(vec![prompt_ids], &params(p))?;
        out.pop()
            .map(completion)
            .ok_or_else(|| "the engine returned no completion".into())
    }

    fn generate_batch(
        &mut self,
        prompts: Vec<Vec<u32>>,
        p: llm::SamplingParams,
    ) -> std::result::Result<Vec<llm::Completion>, String> {
        let host = self.generator_host()?;
        Ok(host
            .generate(prompts, &params(p))?
            .into_iter()
            .map(completion)
            .collect())
    }

    fn tokenize(&mut self, text: String) -> Vec<u32> {
        self.generator_host()
            .map(|h| h.tokenize(&text))
            .unwrap_or_default()
    }

    fn detokenize(&mut self, ids: Vec<u32>) -> String {
        self.generator_host()
            .map(|h| h.detokenize(&ids))
            .unwrap_or_default()
    }

    fn apply_chat_template(
        &mut self,
        messages: Vec<types::Message>,
        add_generation_prompt: bool,
    ) -> Vec<u32> {
        let messages: Vec<Message> = messages.into_iter().map(from_wit).collect();
        self.generator_host()
            .map(|h| h.apply_chat_template(&messages, add_generation_prompt))
            .unwrap_or_default()
    }
}

impl envs::Host for HostState {}

impl envs::HostEnvHandle for HostState {
    fn open(
        &mut self,
        env_class: String,
        extras_json: String,
    ) -> std::result::Result<Resource<EnvHandle>, String> {
        let env = self.generator_host()?.open_env(&env_class, &extras_json)?;
        self.table
            .push(EnvHandle(env))
            .map_err(|e| format!("cannot hold another environment: {e}"))
    }

    fn init(
        &mut self,
        handle: Resource<EnvHandle>,
        prompt: Vec<types::Message>,
    ) -> std::result::Result<envs::EnvInit, String> {
        let env = self
            .table
            .get_mut(&handle)
            .map_err(|e| format!("bad environment handle: {e}"))?;
        let prompt: Vec<Message> = prompt.into_iter().map(from_wit).collect();
        let out = env.0.init(&prompt).map_err(|e| e.to_string())?;
        Ok(envs::EnvInit {
            prompt: out.prompt.iter().map(to_wit).collect(),
            metadata_json: out.metadata.to_string(),
        })
    }

    fn step(
        &mut self,
        handle: Resource<EnvHandle>,
        action: String,
    ) -> std::result::Result<envs::EnvStep, String> {
        let env = self
            .table
            .get_mut(&handle)
            .map_err(|e| format!("bad environment handle: {e}"))?;
        let out = env.0.step(&action).map_err(|e| e.to_string())?;
        Ok(envs::EnvStep {
            observations: out.observations.iter().map(to_wit).collect(),
            reward: out.reward,
            done: out.done,
            metadata_json: out.metadata.to_string(),
        })
    }

    fn drop(&mut self, handle: Resource<EnvHandle>) -> wasmtime::Result<()> {
        let mut env = self.table.delete(handle)?;
        if let Err(e) = env.0.close() {
            tracing::warn!("closing a generator's environment failed: {e}");
        }
        Ok(())
    }
}
