//! The rollout generator: turns trajectory requests into a
//! [`GeneratorOutput`] with the built-in multi-turn loop ([`crate::agent_loop`])
//! or a generator plugin ([`crate::custom_generator`]), then composes rewards
//! with the rubric. One call at a time ([`Generator::generate`]) or a stream
//! of concurrent jobs ([`Generator::run_jobs`], the pipelined training modes).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use skyrl_inference::RolloutEngine;
use skyrl_model::{ChatTemplate, Tokenizer};

use crate::agent_loop::{agent_loop, AgentCall};
use crate::blocking::on_blocking_pool;
use crate::custom_generator::CustomGenerator;
use crate::output::{GeneratorOutput, GeneratorRequest, RolloutJob, RolloutParams};
use crate::plugin_set::PluginSet;
use crate::rubric::{Rubric, ScoreJob};

/// The rollout generator: an inference engine, a tokenizer and the env plugins.
pub struct Generator {
    pub envs: PluginSet,
    rubric: Option<Rubric>,
    custom: Option<CustomGenerator>,
    /// `generator.chat_template`'s custom rollout template, compiled.
    chat_template: Option<Arc<ChatTemplate>>,
    runtime: tokio::runtime::Runtime,
    /// Numbers calls, to name trajectories (`<call>-<index>`) for sticky routing.
    calls: AtomicU64,
}

impl Generator {
    /// `env_workers` bounds the blocking threads running env calls.
    pub fn new(envs: PluginSet, env_workers: usize) -> Result<Self> {
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
            chat_template: None,
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
    pub fn set_custom(&mut self, custom: CustomGenerator) -> Result<()> {
        if self.chat_template.is_some() {
            anyhow::bail!(
                "generator.chat_template.name_or_path: a generator plugin renders its own chats; \
                 a custom rollout template applies to the built-in loop only"
            );
        }
        self.custom = Some(custom);
        Ok(())
    }

    /// Renders rollouts with a custom chat template (skyrl-train's
    /// re-tokenizing path, see [`crate::retokenize`]) instead of the
    /// model's own; not available with a generator plugin.
    pub fn set_chat_template(&mut self, template: ChatTemplate) -> Result<()> {
        if self.custom.is_some() {
            anyhow::bail!(
                "generator.chat_template.name_or_path: a generator plugin renders its own chats; \
                 a custom rollout template applies to the built-in loop only"
            );
        }
        self.chat_template = Some(Arc::new(template));
        Ok(())
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
                let call = AgentCall {
                    call,
                    envs: &self.envs,
                    engine,
                    tokenizer,
                    requests,
                    params,
                    chat_template: self.chat_template.as_deref(),
                };
                agent_loop(&call).await
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
