//! Multi-turn rollout generator with skyrl's `SkyRLGymGenerator` semantics.
//!
//! For every prompt (already expanded to `n_samples_per_prompt` copies):
//! `env.init`, chat-template the prompt with the generation prompt, then loop:
//! stop with `"length"` when the sequence exceeds `max_input_length`; generate
//! one turn (token in / token out, batched over all active trajectories);
//! `env.step(decoded text)`; append the chat-templated observation tokens with
//! loss mask 0 and logprob 0. Response tokens have loss mask 1; the reward of a
//! step sits on the last token of that turn. Env calls of a turn run
//! concurrently on tokio's blocking threads, so the async side stays free.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};
use skyrl_model::{ChatMessage, SampleStream, SamplingParams, Tokenizer};
use skyrl_runtime::{EnvInstance, Message, Plugin};
use tracing::warn;

use crate::config::GeneratorConfig;
use crate::custom_generator::CustomGenerator;
use crate::dataset::PromptRow;
use crate::inference::RolloutEngine;
use crate::rubric::{Rubric, ScoreJob};

/// Stop reason of a trajectory whose environment failed (trap, bad output, ...).
pub const ENV_ERROR: &str = "env_error";

/// Environment plugins by env class name.
#[derive(Clone, Default)]
pub struct EnvRegistry {
    plugins: BTreeMap<String, Plugin>,
    configs: BTreeMap<String, Value>,
    rewards: BTreeMap<String, Plugin>,
    generator: Option<Plugin>,
}

impl EnvRegistry {
    /// Registers `plugin` for `env_class` with its env config (`environment.skyrl_gym.<env_class>`).
    pub fn insert(&mut self, env_class: &str, plugin: Plugin, config: Value) {
        self.plugins.insert(env_class.to_string(), plugin);
        self.configs.insert(env_class.to_string(), config);
    }

    /// Registers a reward plugin under `name` (for `environment.reward_rubric`).
    pub fn insert_reward(&mut self, name: &str, plugin: Plugin) {
        self.rewards.insert(name.to_string(), plugin);
    }

    /// Registers the rollout generator plugin (`skyrl train --generator`).
    pub fn set_generator(&mut self, plugin: Plugin) {
        self.generator = Some(plugin);
    }

    /// The registered generator plugin, if any.
    pub fn generator(&self) -> Option<&Plugin> {
        self.generator.as_ref()
    }

    /// The registered reward plugins.
    pub fn rewards(&self) -> &BTreeMap<String, Plugin> {
        &self.rewards
    }

    /// The registered env classes.
    pub fn classes(&self) -> Vec<String> {
        self.plugins.keys().cloned().collect()
    }

    /// The plugin and env config of `env_class`.
    pub fn get(&self, env_class: &str) -> Result<(&Plugin, Value)> {
        let plugin = self.plugins.get(env_class).with_context(|| {
            format!(
                "no plugin for env class `{env_class}` (registered: {:?}); pass --plugin {env_class}=PATH",
                self.classes()
            )
        })?;
        let config = self
            .configs
            .get(env_class)
            .cloned()
            .unwrap_or_else(|| json!({}));
        Ok((plugin, config))
    }
}

/// One trajectory request.
#[derive(Debug, Clone)]
pub struct GeneratorRequest {
    pub prompt: Vec<Message>,
    pub env_class: String,
    pub extras: Map<String, Value>,
}

impl GeneratorRequest {
    /// From a dataset row, falling back to `default_env_class`.
    pub fn from_row(row: &PromptRow, default_env_class: &str) -> Self {
        Self {
            prompt: row
                .prompt
                .iter()
                .map(|m| Message::new(m.role.clone(), m.content.clone()))
                .collect(),
            env_class: row
                .env_class
                .clone()
                .unwrap_or_else(|| default_env_class.to_string()),
            extras: row.extras.clone(),
        }
    }
}

/// skyrl's `GeneratorOutput`, in input order.
#[derive(Debug, Clone, Default)]
pub struct GeneratorOutput {
    pub prompt_token_ids: Vec<Vec<i64>>,
    pub response_ids: Vec<Vec<i64>>,
    /// Per-token rewards (reward of each turn at its last generated token).
    pub rewards: Vec<Vec<f32>>,
    pub loss_masks: Vec<Vec<f32>>,
    pub stop_reasons: Vec<String>,
    pub rollout_logprobs: Vec<Vec<f32>>,
    /// Means over trajectories of numeric/bool env metrics, keyed `<env_class>/<name>`.
    pub env_metrics: BTreeMap<String, f64>,
    /// Number of turns per trajectory.
    pub num_turns: Vec<usize>,
    /// Oldest policy version that generated a token of each trajectory.
    pub policy_versions: Vec<u64>,
    /// `[start, end)` of every generated turn in each trajectory's `response_ids`.
    pub turn_spans: Vec<Vec<(usize, usize)>>,
    /// Means over trajectories of the reward rubric's parts (`env`, each component).
    pub reward_metrics: BTreeMap<String, f64>,
}

/// Trajectory-weighted mean of two sets of means over `n` and `m` trajectories.
fn merge_means(
    a: &BTreeMap<String, f64>,
    n: f64,
    b: &BTreeMap<String, f64>,
    m: f64,
) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (map, w) in [(a, n), (b, m)] {
        for (k, v) in map {
            let e = sums.entry(k.clone()).or_default();
            e.0 += v * w;
            e.1 += w;
        }
    }
    sums.into_iter()
        .map(|(k, (s, w))| (k, s / w.max(1.0)))
        .collect()
}

impl GeneratorOutput {
    /// Number of trajectories.
    pub fn len(&self) -> usize {
        self.response_ids.len()
    }

    /// True when there are no trajectories.
    pub fn is_empty(&self) -> bool {
        self.response_ids.is_empty()
    }

    /// Appends `other`'s trajectories; env metrics become the
    /// trajectory-weighted means of both.
    pub fn append(&mut self, other: GeneratorOutput) {
        let (n, m) = (self.len() as f64, other.len() as f64);
        self.env_metrics = merge_means(&self.env_metrics, n, &other.env_metrics, m);
        self.reward_metrics = merge_means(&self.reward_metrics, n, &other.reward_metrics, m);
        self.prompt_token_ids.extend(other.prompt_token_ids);
        self.response_ids.extend(other.response_ids);
        self.rewards.extend(other.rewards);
        self.loss_masks.extend(other.loss_masks);
        self.stop_reasons.extend(other.stop_reasons);
        self.rollout_logprobs.extend(other.rollout_logprobs);
        self.num_turns.extend(other.num_turns);
        self.policy_versions.extend(other.policy_versions);
        self.turn_spans.extend(other.turn_spans);
    }

    /// Sum of the per-token rewards of each trajectory.
    pub fn sequence_rewards(&self) -> Vec<f64> {
        self.rewards
            .iter()
            .map(|r| r.iter().map(|&x| x as f64).sum())
            .collect()
    }
}

/// One unit of rollout work for [`Generator::run_jobs`].
pub struct RolloutJob<T> {
    pub tag: T,
    pub requests: Vec<GeneratorRequest>,
    pub params: RolloutParams,
}

/// Generation limits of one call.
#[derive(Debug, Clone)]
pub struct RolloutParams {
    pub sampling: SamplingParams,
    pub max_turns: usize,
    pub max_input_length: usize,
}

impl RolloutParams {
    /// Sampling params for the model engine from a `generator.*sampling_params` section.
    pub fn from_config(
        g: &GeneratorConfig,
        sp: &crate::config::SamplingParams,
        seed: Option<u64>,
    ) -> Self {
        let sampling = SamplingParams {
            temperature: sp.temperature,
            top_p: sp.top_p,
            top_k: sp.top_k,
            min_p: sp.min_p,
            max_tokens: sp.max_generate_length,
            stop: sp.stop.clone().unwrap_or_default(),
            seed,
            ..SamplingParams::default()
        };
        Self {
            sampling,
            max_turns: g.max_turns.max(1),
            max_input_length: g.max_input_length.unwrap_or(512),
        }
    }
}

/// Per-trajectory state during a rollout.
struct Trajectory {
    env: Option<EnvInstance>,
    env_class: String,
    prompt_ids: Vec<i64>,
    response_ids: Vec<i64>,
    loss_mask: Vec<f32>,
    logprobs: Vec<f32>,
    rewards: Vec<f32>,
    stop_reason: Option<String>,
    turns: usize,
    metrics: Option<Value>,
    /// Oldest policy version used so far.
    version: Option<u64>,
    /// Generated turns as `[start, end)` in `response_ids`.
    spans: Vec<(usize, usize)>,
}

impl Trajectory {
    fn fail(&mut self, err: &anyhow::Error) {
        warn!(env_class = %self.env_class, "environment error, trajectory gets reward 0: {err:#}");
        self.rewards.iter_mut().for_each(|r| *r = 0.0);
        self.stop_reason = Some(ENV_ERROR.to_string());
        self.env = None;
    }
}

/// Plugin messages as chat-template messages.
pub(crate) fn to_chat(messages: &[Message]) -> Vec<ChatMessage> {
    messages
        .iter()
        .map(|m| ChatMessage::new(m.role.clone(), m.content.clone()))
        .collect()
}

/// Token ids of `observations` as they continue a conversation: the chat template
/// of `base + observations` (with the generation prompt) minus that of `base`,
/// as skyrl does for `use_conversation_multi_turn`.
fn observation_ids(tokenizer: &Tokenizer, observations: &[Message]) -> Result<Vec<i64>> {
    let base = vec![
        ChatMessage::new("system", "You are a helpful assistant."),
        ChatMessage::new("user", "I am a user."),
    ];
    let base_ids = tokenizer.encode_chat(&base, false)?;
    let mut all = base.clone();
    all.extend(to_chat(observations));
    let ids = tokenizer.encode_chat(&all, true)?;
    Ok(ids[base_ids.len().min(ids.len())..].to_vec())
}

/// Runs `f` on every item concurrently on tokio's blocking pool and collects the results.
async fn on_blocking_pool<T, R, F>(items: Vec<T>, f: F) -> Vec<R>
where
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(T) -> R + Send + Sync + 'static,
{
    let f = Arc::new(f);
    let handles: Vec<_> = items
        .into_iter()
        .map(|item| {
            let f = f.clone();
            tokio::task::spawn_blocking(move || f(item))
        })
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("env task panicked"));
    }
    out
}

/// The rollout generator: an inference engine, a tokenizer and the env plugins.
pub struct Generator {
    pub envs: EnvRegistry,
    rubric: Option<Rubric>,
    custom: Option<CustomGenerator>,
    runtime: tokio::runtime::Runtime,
    /// Numbers calls, to name trajectories (`<call>-<index>`) for sticky routing.
    calls: AtomicU64,
}

impl Generator {
    /// `env_workers` bounds the blocking threads running env calls.
    pub fn new(envs: EnvRegistry, env_workers: usize) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(env_workers.max(1))
            .enable_all()
            .build()
            .context("cannot start the tokio runtime for env workers")?;
        Ok(Self {
            envs,
            rubric: None,
            custom: None,
            runtime,
            calls: AtomicU64::new(0),
        })
    }

    /// Generates one trajectory per request (in order).
    pub fn generate(
        &self,
        engine: &RolloutEngine,
        tokenizer: &Tokenizer,
        requests: &[GeneratorRequest],
        params: &RolloutParams,
    ) -> Result<GeneratorOutput> {
        self.runtime
            .block_on(self.generate_async(engine, tokenizer, requests, params))
    }

    /// Generates rollouts with a generator plugin instead of the built-in loop.
    pub fn set_custom(&mut self, custom: CustomGenerator) {
        self.custom = Some(custom);
    }

    /// Composes every trajectory's reward with `rubric`.
    pub fn set_rubric(&mut self, rubric: Rubric) {
        self.rubric = Some(rubric);
    }

    /// A handle to the generator's runtime (for engine calls outside rollouts).
    pub fn runtime(&self) -> tokio::runtime::Handle {
        self.runtime.handle().clone()
    }

    /// Generates the jobs arriving on `jobs` (each a list of requests with
    /// its params, tagged) concurrently, at most `parallel` at a time, calling
    /// `done(tag, output, seconds)` as each finishes (completion order). Returns when
    /// the sender side is dropped and every admitted job has finished.
    pub fn run_jobs<T>(
        &self,
        engine: &RolloutEngine,
        tokenizer: &Tokenizer,
        parallel: usize,
        jobs: tokio::sync::mpsc::UnboundedReceiver<RolloutJob<T>>,
        mut done: impl FnMut(T, Result<GeneratorOutput>, f64),
    ) {
        use futures::stream::{self, StreamExt};
        let jobs = stream::unfold(jobs, |mut rx| async move {
            rx.recv().await.map(|job| (job, rx))
        });
        self.runtime.block_on(
            jobs.map(|job| async move {
                let start = std::time::Instant::now();
                let out = self
                    .generate_async(engine, tokenizer, &job.requests, &job.params)
                    .await;
                (job.tag, out, start.elapsed().as_secs_f64())
            })
            .buffer_unordered(parallel.max(1))
            .for_each(|(tag, out, secs)| {
                done(tag, out, secs);
                async {}
            }),
        );
    }

    async fn generate_async(
        &self,
        engine: &RolloutEngine,
        tokenizer: &Tokenizer,
        requests: &[GeneratorRequest],
        params: &RolloutParams,
    ) -> Result<GeneratorOutput> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let out = match &self.custom {
            Some(custom) => custom.generate(call, &self.envs, requests, params).await,
            None => {
                self.agent_loop(call, engine, tokenizer, requests, params)
                    .await
            }
        };
        engine.end_sessions(&format!("{call}-"));
        let mut out = out?;
        if let Some(rubric) = &self.rubric {
            self.apply_rubric(rubric, &mut out, requests, tokenizer)
                .await?;
        }
        Ok(out)
    }

    /// The built-in multi-turn loop (see the module docs).
    async fn agent_loop(
        &self,
        call: u64,
        engine: &RolloutEngine,
        tokenizer: &Tokenizer,
        requests: &[GeneratorRequest],
        params: &RolloutParams,
    ) -> Result<GeneratorOutput> {
        // Create + init every env on the blocking pool.
        let mut jobs = Vec::with_capacity(requests.len());
        for r in requests {
            let (plugin, config) = self.envs.get(&r.env_class)?;
            let mut extras = r.extras.clone();
            extras.insert("max_turns".into(), json!(params.max_turns));
            jobs.push((
                plugin.clone(),
                config,
                Value::Object(extras),
                r.prompt.clone(),
            ));
        }
        let inits = on_blocking_pool(jobs, |(plugin, config, extras, prompt)| {
            let mut env = plugin.create_env(&config, &extras)?;
            let init = env.init(&prompt)?;
            Ok::<_, skyrl_runtime::PluginError>((env, init))
        })
        .await;
        let mut trajs = Vec::with_capacity(requests.len());
        for (r, init) in requests.iter().zip(inits) {
            let mut t = Trajectory {
                env: None,
                env_class: r.env_class.clone(),
                prompt_ids: Vec::new(),
                response_ids: Vec::new(),
                loss_mask: Vec::new(),
                logprobs: Vec::new(),
                rewards: Vec::new(),
                stop_reason: None,
                turns: 0,
                metrics: None,
                version: None,
                spans: Vec::new(),
            };
            match init {
                Ok((env, init)) => {
                    t.prompt_ids = tokenizer.encode_chat(&to_chat(&init.prompt), true)?;
                    t.env = Some(env);
                }
                Err(e) => {
                    // Keep a non-empty prompt so the batch stays rectangular.
                    t.prompt_ids = tokenizer.encode_chat(&to_chat(&r.prompt), true)?;
                    t.fail(&anyhow::Error::new(e));
                }
            }
            trajs.push(t);
        }

        loop {
            let mut active: Vec<usize> = Vec::new();
            for (i, t) in trajs.iter_mut().enumerate() {
                if t.stop_reason.is_some() {
                    continue;
                }
                if t.prompt_ids.len() + t.response_ids.len() > params.max_input_length {
                    t.stop_reason = Some("length".into());
                    continue;
                }
                active.push(i);
            }
            if active.is_empty() {
                break;
            }
            let inputs: Vec<Vec<i64>> = active
                .iter()
                .map(|&i| {
                    let t = &trajs[i];
                    let mut ids = t.prompt_ids.clone();
                    ids.extend_from_slice(&t.response_ids);
                    ids
                })
                .collect();
            // Trajectory `i` samples from stream `i` of a per-turn seed:
            // reproducible for the same inputs, whoever else is still active.
            let turn = trajs[active[0]].turns as u64;
            let turn_seed = match params.sampling.seed {
                Some(seed) => seed.wrapping_mul(31).wrapping_add(turn),
                None => rand::random(),
            };
            let streams: Vec<SampleStream> = active
                .iter()
                .map(|&i| SampleStream {
                    seed: turn_seed,
                    index: i as u64,
                })
                .collect();
            let sessions: Vec<String> = active.iter().map(|&i| format!("{call}-{i}")).collect();
            let (completions, version) = engine
                .generate(&inputs, &streams, &params.sampling, &sessions)
                .await?;
            let mut step_jobs = Vec::with_capacity(active.len());
            let mut gen_reasons = Vec::with_capacity(active.len());
            for (&i, c) in active.iter().zip(&completions) {
                let t = &mut trajs[i];
                t.version = Some(t.version.map_or(version, |v| v.min(version)));
                let text = tokenizer.decode(&c.token_ids, true)?;
                let start = t.response_ids.len();
                t.response_ids.extend_from_slice(&c.token_ids);
                t.spans.push((start, t.response_ids.len()));
                t.loss_mask
                    .extend(std::iter::repeat_n(1.0, c.token_ids.len()));
                t.logprobs.extend_from_slice(&c.logprobs);
                t.rewards
                    .extend(std::iter::repeat_n(0.0, c.token_ids.len()));
                t.turns += 1;
                gen_reasons.push(c.stop_reason.as_str().to_string());
                let env = t.env.take().expect("active trajectories hold their env");
                step_jobs.push((env, text));
            }
            let results = on_blocking_pool(step_jobs, |(mut env, text)| {
                let out = env.step(&text);
                let metrics = match &out {
                    Ok(s) if s.done => Some(env.metrics()),
                    _ => None,
                };
                (env, out, metrics)
            })
            .await;
            let mut finished = Vec::new();
            for ((&i, (env, out, metrics)), reason) in active.iter().zip(results).zip(gen_reasons) {
                let t = &mut trajs[i];
                let step = match out {
                    Ok(s) => s,
                    Err(e) => {
                        t.fail(&anyhow::Error::new(e));
                        continue;
                    }
                };
                if let Some(last) = t.rewards.last_mut() {
                    *last += step.reward as f32;
                }
                let done = step.done || t.turns >= params.max_turns;
                if done {
                    t.metrics = match metrics {
                        Some(Ok(m)) => Some(m),
                        Some(Err(e)) => {
                            warn!("env metrics failed: {e}");
                            None
                        }
                        None => None,
                    };
                    t.stop_reason = Some(reason);
                    finished.push(env);
                    continue;
                }
                let obs = observation_ids(tokenizer, &step.observations)?;
                t.response_ids.extend_from_slice(&obs);
                t.loss_mask.extend(std::iter::repeat_n(0.0, obs.len()));
                t.logprobs.extend(std::iter::repeat_n(0.0, obs.len()));
                t.rewards.extend(std::iter::repeat_n(0.0, obs.len()));
                t.env = Some(env);
            }
            // Guest code runs off the async threads: WASI host calls (files,
            // clocks) block on tokio and must not run inside a worker.
            on_blocking_pool(finished, |mut env| {
                if let Err(e) = env.close() {
                    warn!("env close failed: {e}");
                }
            })
            .await;
        }

        let max_total = params.max_input_length + params.sampling.max_tokens;
        let mut out = GeneratorOutput::default();
        let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        for mut t in trajs {
            // Truncate the response to the total budget (skyrl's max_response_tokens).
            let budget = max_total.saturating_sub(t.prompt_ids.len());
            if t.response_ids.len() > budget {
                let dropped: f32 = t.rewards[budget..].iter().sum();
                t.response_ids.truncate(budget);
                t.loss_mask.truncate(budget);
                t.logprobs.truncate(budget);
                t.rewards.truncate(budget);
                if let Some(last) = t.rewards.last_mut() {
                    *last += dropped;
                }
                t.spans = t
                    .spans
                    .iter()
                    .map(|&(a, b)| (a, b.min(budget)))
                    .filter(|&(a, b)| a < b)
                    .collect();
            }
            if let Some(Value::Object(m)) = &t.metrics {
                for (k, v) in m {
                    let x = match v {
                        Value::Number(n) => n.as_f64(),
                        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
                        _ => None,
                    };
                    if let Some(x) = x {
                        let e = sums.entry(format!("{}/{k}", t.env_class)).or_default();
                        e.0 += x;
                        e.1 += 1;
                    }
                }
            }
            out.prompt_token_ids.push(t.prompt_ids);
            out.response_ids.push(t.response_ids);
            out.loss_masks.push(t.loss_mask);
            out.rollout_logprobs.push(t.logprobs);
            out.rewards.push(t.rewards);
            out.stop_reasons
                .push(t.stop_reason.unwrap_or_else(|| "length".into()));
            out.num_turns.push(t.turns);
            out.turn_spans.push(t.spans);
            out.policy_versions
                .push(t.version.unwrap_or_else(|| engine.version()));
        }
        out.env_metrics = sums
            .into_iter()
            .map(|(k, (s, n))| (k, s / n as f64))
            .collect();
        Ok(out)
    }

    /// Scores every trajectory with the rubric's reward plugins (concurrently
    /// on the blocking pool) and rewrites its rewards.
    async fn apply_rubric(
        &self,
        rubric: &Rubric,
        out: &mut GeneratorOutput,
        requests: &[GeneratorRequest],
        tokenizer: &Tokenizer,
    ) -> Result<()> {
        let mut jobs = Vec::with_capacity(out.len());
        for (i, r) in requests.iter().enumerate() {
            let generated: Vec<i64> = out.response_ids[i]
                .iter()
                .zip(&out.loss_masks[i])
                .filter(|(_, &m)| m > 0.0)
                .map(|(&t, _)| t)
                .collect();
            jobs.push(ScoreJob {
                prompt: r.prompt.clone(),
                response: tokenizer.decode(&generated, true)?,
                extras: r.extras.clone(),
            });
        }
        let scorer = rubric.clone();
        let scores = on_blocking_pool(jobs, move |job| scorer.score(&job)).await;
        let n = out.len().max(1) as f64;
        let mut sums: BTreeMap<String, f64> = BTreeMap::new();
        for (i, parts) in scores.iter().enumerate() {
            let env: f32 = out.rewards[i].iter().sum();
            *sums.entry("env".into()).or_default() += env as f64;
            let w = rubric.env_weight() as f32;
            out.rewards[i].iter_mut().for_each(|x| *x *= w);
            if let Some(last) = out.rewards[i].last_mut() {
                *last += rubric.bonus(parts) as f32;
            }
            for (name, score, failed) in parts {
                *sums.entry(name.clone()).or_default() += score;
                *sums.entry(format!("{name}/errors")).or_default() += f64::from(*failed as u8);
            }
        }
        out.reward_metrics = sums.into_iter().map(|(k, v)| (k, v / n)).collect();
        Ok(())
    }
}
