//! The built-in multi-turn loop with skyrl's `SkyRLGymGenerator` semantics.
//!
//! For every prompt (already expanded to `n_samples_per_prompt` copies):
//! `env.init`, chat-template the prompt with the generation prompt, then loop:
//! stop with `"length"` when the sequence exceeds `max_input_length`; generate
//! one turn (token in / token out, batched over all active trajectories);
//! `env.step(decoded text)`; append the chat-templated observation tokens with
//! loss mask 0 and logprob 0. Response tokens have loss mask 1; the reward of a
//! step sits on the last token of that turn. Env calls of a turn run
//! concurrently on tokio's blocking threads, so the async side stays free.
//! With a custom rollout chat template the loop keeps messages instead of
//! tokens and re-tokenizes every turn ([`crate::retokenize`]).

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::{json, Value};
use skyrl_inference::RolloutEngine;
use skyrl_model::{ChatMessage, ChatTemplate, Completion, SampleStream, Tokenizer};
use skyrl_runtime::{EnvInstance, Message};
use tracing::warn;

use crate::blocking::on_blocking_pool;
use crate::output::{GeneratorOutput, GeneratorRequest, RolloutParams, ENV_ERROR};
use crate::plugin_set::PluginSet;
use crate::retokenize::{mask_runs, ChatHistory};

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
    /// The conversation, when a custom template re-tokenizes it every turn.
    chat: Option<ChatHistory>,
}

impl Trajectory {
    fn new(env_class: &str) -> Self {
        Self {
            env: None,
            env_class: env_class.to_string(),
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
            chat: None,
        }
    }

    /// Appends a generated turn (loss mask 1) sampled by policy `version`;
    /// a final `strip_eos` token is left out (the assistant message goes on).
    fn add_generated(&mut self, c: &Completion, version: u64, strip_eos: Option<i64>) {
        self.version = Some(self.version.map_or(version, |v| v.min(version)));
        let mut n = c.token_ids.len();
        if strip_eos.is_some() && c.token_ids.last() == strip_eos.as_ref() {
            n -= 1;
        }
        let start = self.response_ids.len();
        self.response_ids.extend_from_slice(&c.token_ids[..n]);
        self.spans.push((start, self.response_ids.len()));
        self.loss_mask.extend(std::iter::repeat_n(1.0, n));
        self.logprobs
            .extend_from_slice(&c.logprobs[..n.min(c.logprobs.len())]);
        self.rewards.extend(std::iter::repeat_n(0.0, n));
        self.turns += 1;
    }

    /// `use_conversation_multi_turn=false`: a trajectory that ends other than
    /// by length gets the EOS closing its one assistant message, trained on
    /// (loss mask 1, log-prob 0), as skyrl-train does.
    fn close_single_message(&mut self, eos: i64) {
        if self.response_ids.last() == Some(&eos) {
            return;
        }
        self.response_ids.push(eos);
        self.loss_mask.push(1.0);
        self.logprobs.push(0.0);
        self.rewards.push(0.0);
    }

    /// Appends observation tokens (loss mask 0, logprob 0).
    fn add_observation(&mut self, obs: &[i64]) {
        self.response_ids.extend_from_slice(obs);
        self.loss_mask.extend(std::iter::repeat_n(0.0, obs.len()));
        self.logprobs.extend(std::iter::repeat_n(0.0, obs.len()));
        self.rewards.extend(std::iter::repeat_n(0.0, obs.len()));
    }

    /// Cuts the response to `budget` tokens; the rewards of cut tokens move
    /// to the new last token.
    fn truncate(&mut self, budget: usize) {
        if self.response_ids.len() <= budget {
            return;
        }
        let dropped: f32 = self.rewards[budget..].iter().sum();
        self.response_ids.truncate(budget);
        self.loss_mask.truncate(budget);
        self.logprobs.truncate(budget);
        self.rewards.truncate(budget);
        if let Some(last) = self.rewards.last_mut() {
            *last += dropped;
        }
        self.spans = self
            .spans
            .iter()
            .map(|&(a, b)| (a, b.min(budget)))
            .filter(|&(a, b)| a < b)
            .collect();
    }

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
fn observation_ids(
    tokenizer: &Tokenizer,
    observations: &[Message],
    params: &RolloutParams,
) -> Result<Vec<i64>> {
    let base = vec![
        ChatMessage::new("system", "You are a helpful assistant."),
        ChatMessage::new("user", "I am a user."),
    ];
    let kwargs = Some(&params.chat_template_kwargs);
    let base_ids = tokenizer.encode_chat_with(&base, false, kwargs)?;
    let mut all = base.clone();
    all.extend(to_chat(observations));
    let ids = tokenizer.encode_chat_with(&all, true, kwargs)?;
    Ok(ids[base_ids.len().min(ids.len())..].to_vec())
}

/// `use_conversation_multi_turn=false`: observations continue the one
/// assistant message, each one's content encoded as is (no chat template, no
/// generation prompt), as skyrl-train does.
fn raw_observation_ids(tokenizer: &Tokenizer, observations: &[Message]) -> Result<Vec<i64>> {
    let mut ids = Vec::new();
    for m in observations {
        ids.extend(tokenizer.encode(&m.content, false)?);
    }
    Ok(ids)
}

/// One turn's trajectories (indices into the call's trajectories) and
/// their input token ids.
struct Turn {
    active: Vec<usize>,
    inputs: Vec<Vec<i64>>,
}

/// One generator call: its number (sessions are `<call>-<index>`), the env
/// plugins, the engine, the tokenizer, the requests and their limits.
pub(crate) struct AgentCall<'a> {
    pub call: u64,
    pub envs: &'a PluginSet,
    pub engine: &'a RolloutEngine,
    pub tokenizer: &'a Tokenizer,
    pub requests: &'a [GeneratorRequest],
    pub params: &'a RolloutParams,
    /// `generator.chat_template`'s custom template (retokenizing path).
    pub chat_template: Option<&'a ChatTemplate>,
}

/// The built-in multi-turn loop (see the module docs).
pub(crate) async fn agent_loop(c: &AgentCall<'_>) -> Result<GeneratorOutput> {
    let mut trajs = start_envs(c).await?;
    while let Some(turn) = next_turn(c, &mut trajs)? {
        run_turn(c, &mut trajs, turn).await?;
    }
    if let Some(template) = c.chat_template {
        retokenize_responses(c, template, &mut trajs)?;
    }
    Ok(collect_output(trajs, c.params, c.engine.version()))
}

/// Creates and initialises every env on the blocking pool; a failed init
/// fails its trajectory only.
async fn start_envs(c: &AgentCall<'_>) -> Result<Vec<Trajectory>> {
    let (envs, tokenizer, requests, params) = (c.envs, c.tokenizer, c.requests, c.params);
    let kwargs = Some(&params.chat_template_kwargs);
    // The prompt's tokens: with a custom template, without the generation
    // prompt (each turn re-renders the history with it), as skyrl-train.
    let prompt_ids = |messages: &[Message]| -> Result<Vec<i64>> {
        let chat = to_chat(messages);
        Ok(match c.chat_template {
            Some(t) => tokenizer.encode_chat_using(t, &chat, false, kwargs)?,
            None => tokenizer.encode_chat_with(&chat, true, kwargs)?,
        })
    };
    let mut jobs = Vec::with_capacity(requests.len());
    for r in requests {
        let (plugin, config) = envs.get(&r.env_class)?;
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
        let mut t = Trajectory::new(&r.env_class);
        match init {
            Ok((env, init)) => {
                t.prompt_ids = prompt_ids(&init.prompt)?;
                t.chat = c
                    .chat_template
                    .map(|_| ChatHistory::new(to_chat(&init.prompt)));
                t.env = Some(env);
            }
            Err(e) => {
                // Keep a non-empty prompt so the batch stays rectangular.
                t.prompt_ids = prompt_ids(&r.prompt)?;
                t.chat = c
                    .chat_template
                    .map(|_| ChatHistory::new(to_chat(&r.prompt)));
                t.fail(&anyhow::Error::new(e));
            }
        }
        trajs.push(t);
    }
    Ok(trajs)
}

/// The trajectories that take another turn and their inputs (stopping with
/// `"length"` those over `max_input_length`); `None` when all are done.
fn next_turn(c: &AgentCall<'_>, trajs: &mut [Trajectory]) -> Result<Option<Turn>> {
    let (mut active, mut inputs) = (Vec::new(), Vec::new());
    for (i, t) in trajs.iter_mut().enumerate() {
        if t.stop_reason.is_some() {
            continue;
        }
        let input = match (&t.chat, c.chat_template) {
            (Some(chat), Some(template)) => {
                chat.input_ids(c.tokenizer, template, &c.params.chat_template_kwargs)?
            }
            _ => [t.prompt_ids.as_slice(), &t.response_ids].concat(),
        };
        if input.len() > c.params.max_input_length {
            t.stop_reason = Some("length".into());
            continue;
        }
        active.push(i);
        inputs.push(input);
    }
    Ok((!active.is_empty()).then_some(Turn { active, inputs }))
}

/// One turn: generate for every active trajectory as one batch, step their
/// envs concurrently, append observations, close the envs that finished.
async fn run_turn(ctx: &AgentCall<'_>, trajs: &mut [Trajectory], turn: Turn) -> Result<()> {
    let Turn { active, inputs } = turn;
    // Trajectory `i` samples from stream `i` (its row in the whole batch when
    // given) of a per-turn seed: reproducible for the same inputs, whoever
    // else is still active.
    let turn = trajs[active[0]].turns as u64;
    let turn_seed = match ctx.params.sampling.seed {
        Some(seed) => seed.wrapping_mul(31).wrapping_add(turn),
        None => rand::random(),
    };
    let streams: Vec<SampleStream> = active
        .iter()
        .map(|&i| SampleStream {
            seed: turn_seed,
            index: ctx.requests[i].stream.unwrap_or(i as u64),
        })
        .collect();
    let call = ctx.call;
    let sessions: Vec<String> = active.iter().map(|&i| format!("{call}-{i}")).collect();
    let (completions, version) = ctx
        .engine
        .generate(&inputs, &streams, &ctx.params.sampling, &sessions)
        .await?;
    let mut step_jobs = Vec::with_capacity(active.len());
    let mut generated = Vec::with_capacity(active.len());
    for (&i, c) in active.iter().zip(&completions) {
        let t = &mut trajs[i];
        let text = ctx.tokenizer.decode(&c.token_ids, true)?;
        let single = !ctx.params.conversation_multi_turn;
        t.add_generated(c, version, ctx.tokenizer.eos_token_id().filter(|_| single));
        if let Some(eos) = eos_after_stop_str(ctx, c, &text).filter(|_| t.chat.is_none()) {
            t.add_observation(&[eos]);
        }
        let env = t.env.take().expect("active trajectories hold their env");
        step_jobs.push((env, text.clone()));
        generated.push(Generated {
            stop_reason: c.stop_reason.as_str().to_string(),
            text,
        });
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
    let finished = apply_steps(ctx, trajs, &active, results, generated)?;
    // Guest code runs off the async threads: WASI host calls (files,
    // clocks) block on tokio and must not run inside a worker.
    on_blocking_pool(finished, |mut env| {
        if let Err(e) = env.close() {
            warn!("env close failed: {e}");
        }
    })
    .await;
    Ok(())
}

/// The EOS token to append after a turn that ended on a stop string
/// (`append_eos_token_after_stop_str_in_multi_turn`, as skyrl-train: the
/// chat template closes an assistant turn with EOS, a stop string does not).
fn eos_after_stop_str(ctx: &AgentCall<'_>, c: &Completion, text: &str) -> Option<i64> {
    let p = ctx.params;
    if !p.append_eos_after_stop_str || p.sampling.stop.is_empty() {
        return None;
    }
    let eos = ctx.tokenizer.eos_token_id()?;
    let on_stop_str = p.sampling.stop.iter().any(|s| text.ends_with(s.as_str()));
    (on_stop_str && c.token_ids.last() != Some(&eos)).then_some(eos)
}

/// One turn's generation, as the env step needs it.
struct Generated {
    stop_reason: String,
    text: String,
}

/// What stepping one env returned: the env, the step, and its metrics when done.
type StepResult = (
    EnvInstance,
    skyrl_runtime::Result<skyrl_runtime::StepOutput>,
    Option<skyrl_runtime::Result<Value>>,
);

/// Applies the env steps of a turn: rewards on the turn's last token,
/// observations appended, finished trajectories stopped with the reason
/// their generation ended. Returns the envs to close.
fn apply_steps(
    ctx: &AgentCall<'_>,
    trajs: &mut [Trajectory],
    active: &[usize],
    results: Vec<StepResult>,
    generated: Vec<Generated>,
) -> Result<Vec<EnvInstance>> {
    let mut finished = Vec::new();
    for ((&i, (env, out, metrics)), gen) in active.iter().zip(results).zip(generated) {
        let reason = gen.stop_reason;
        let t = &mut trajs[i];
        let step = match out {
            Ok(s) => s,
            Err(e) => {
                if let Some(chat) = &mut t.chat {
                    // the turn was generated: it stays in the response
                    chat.add_turn(&gen.text, ctx.tokenizer.eos_token(), Vec::new(), 0.0);
                }
                t.fail(&anyhow::Error::new(e));
                continue;
            }
        };
        // On the turn's last generated token (an appended EOS is not generated).
        if let Some(last) = t.spans.last().and_then(|s| s.1.checked_sub(1)) {
            t.rewards[last] += step.reward as f32;
        }
        if step.done || t.turns >= ctx.params.max_turns {
            t.metrics = match metrics {
                Some(Ok(m)) => Some(m),
                Some(Err(e)) => {
                    warn!("env metrics failed: {e}");
                    None
                }
                None => None,
            };
            let single = !ctx.params.conversation_multi_turn;
            if let (true, Some(eos)) = (single && reason != "length", ctx.tokenizer.eos_token_id())
            {
                t.close_single_message(eos);
            }
            t.stop_reason = Some(reason);
            if let Some(chat) = &mut t.chat {
                chat.add_turn(
                    &gen.text,
                    ctx.tokenizer.eos_token(),
                    Vec::new(),
                    step.reward as f32,
                );
            }
            finished.push(env);
            continue;
        }
        if let Some(chat) = &mut t.chat {
            let eos = ctx.tokenizer.eos_token();
            chat.add_turn(
                &gen.text,
                eos,
                to_chat(&step.observations),
                step.reward as f32,
            );
            t.env = Some(env);
            continue;
        }
        let obs = match ctx.params.conversation_multi_turn {
            true => observation_ids(ctx.tokenizer, &step.observations, ctx.params)?,
            false => raw_observation_ids(ctx.tokenizer, &step.observations)?,
        };
        t.add_observation(&obs);
        t.env = Some(env);
    }
    Ok(finished)
}

/// The retokenizing path's responses: each trajectory's conversation after
/// the prompt rendered by the custom template, the loss mask from its
/// generation blocks, the last step's reward on the last token (0 for a
/// failed env), zero log-probs, turns as the mask's runs.
fn retokenize_responses(
    c: &AgentCall<'_>,
    template: &ChatTemplate,
    trajs: &mut [Trajectory],
) -> Result<()> {
    for t in trajs.iter_mut() {
        let Some(chat) = &t.chat else { continue };
        let (ids, mask) = chat.response(c.tokenizer, template, &c.params.chat_template_kwargs)?;
        let n = ids.len();
        let failed = t.stop_reason.as_deref() == Some(ENV_ERROR);
        t.rewards = vec![0.0; n];
        if let (Some(last), false) = (t.rewards.last_mut(), failed) {
            *last = chat.last_reward;
        }
        t.spans = mask_runs(&mask);
        t.response_ids = ids;
        t.loss_mask = mask;
        t.logprobs = vec![0.0; n];
    }
    Ok(())
}

/// The call's output in request order: responses truncated to the total
/// budget, env metrics averaged per `<env_class>/<name>`.
fn collect_output(
    trajs: Vec<Trajectory>,
    params: &RolloutParams,
    engine_version: u64,
) -> GeneratorOutput {
    let max_total = params.max_input_length + params.sampling.max_tokens;
    let mut out = GeneratorOutput::default();
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for mut t in trajs {
        // Truncate the response to the total budget (skyrl's max_response_tokens).
        t.truncate(max_total.saturating_sub(t.prompt_ids.len()));
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
            .push(t.version.unwrap_or(engine_version));
    }
    out.env_metrics = sums
        .into_iter()
        .map(|(k, (s, n))| (k, s / n as f64))
        .collect();
    out
}
