//! Mixed lengths: one-sequence requests with their own `max_tokens`, served by
//! continuous batching against the old static-batch server.
//!
//! Three schedules of the same requests (arrival order, seeded):
//! - `continuous`: the paged engine's `submit` + `step` loop; a request joins
//!   the running batch at the next step and leaves as soon as it is done;
//! - `old server`: skyrl serve's worker before the paged engine (`gather` in
//!   host/serve/src/worker.rs): take the first queued request, add the requests
//!   queued behind it (or arriving within the coalescing window) while their
//!   settings `batches_with` its own and the batch has room, stop at the first
//!   that does not, run the batch to completion on the static engine, repeat.
//!   Settings differ in `max_tokens`, so most batches hold one request;
//! - `static, padded` (hypothetical, not what any server did): batches of up to
//!   `max_num_seqs` queued requests regardless of settings, each run to the
//!   longest `max_tokens` in it (extra tokens thrown away), so one long request
//!   holds the batch. The best a static engine could do here.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use rand::Rng;

use skyrl_model::{static_batch, CausalLm, InferenceEngine, SampleStream, SeqRequest};

use crate::clock::Stopwatch;
use crate::workload::{full_length, quantile, random_prompts, rng};
use crate::{grpo, Args, Sizes, Subject};

/// One request of the workload.
struct Request {
    /// Seconds after the start.
    arrival: f64,
    prompt: Vec<i64>,
    max_tokens: usize,
    stream: SampleStream,
}

/// One schedule's run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub schedule: String,
    /// From the start to the last completion.
    pub seconds: f64,
    /// Requested tokens (sum of max_tokens) per second.
    pub tokens_per_s: f64,
    /// Time per request, arrival to completion.
    pub p50_s: f64,
    pub p99_s: f64,
    pub mean_s: f64,
    /// Engine calls (static schedules) or steps (continuous).
    pub batches: usize,
    /// CPU seconds the process got / (wall seconds x threads).
    pub cpu_share: f64,
}

/// Results of the mixed workload on one model.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MixedResult {
    pub model: String,
    pub requests: usize,
    pub tokens: usize,
    pub arrival_rate: f64,
    pub outcomes: Vec<Outcome>,
}

fn requests(args: &Args, sizes: &Sizes, model: &CausalLm) -> Vec<Request> {
    let prompts = random_prompts(model, sizes.mixed_requests, sizes.prompt_len, args.seed + 1);
    let mut lengths = rng(args.seed, 1);
    let mut gaps = rng(args.seed, 2);
    let mut t = 0.0;
    prompts
        .into_iter()
        .enumerate()
        .map(|(i, prompt)| {
            if args.arrival_rate > 0.0 {
                t += -(1.0 - gaps.random::<f64>()).ln() / args.arrival_rate;
            }
            Request {
                arrival: t,
                prompt,
                max_tokens: lengths.random_range(sizes.mixed_min_tokens..=sizes.mixed_max_tokens),
                stream: SampleStream {
                    seed: args.seed,
                    index: i as u64,
                },
            }
        })
        .collect()
}

/// Sleeps until `t` seconds after `start`.
fn wait_until(start: Instant, t: f64) {
    let now = start.elapsed().as_secs_f64();
    if t > now {
        std::thread::sleep(Duration::from_secs_f64(t - now));
    }
}

fn outcome(schedule: &str, reqs: &[Request], finish: &[f64], batches: usize) -> Outcome {
    let latencies: Vec<f64> = reqs
        .iter()
        .zip(finish)
        .map(|(r, f)| f - r.arrival)
        .collect();
    let seconds = finish.iter().copied().fold(0.0, f64::max);
    let tokens: usize = reqs.iter().map(|r| r.max_tokens).sum();
    Outcome {
        schedule: schedule.into(),
        seconds,
        tokens_per_s: tokens as f64 / seconds,
        p50_s: quantile(&latencies, 0.5),
        p99_s: quantile(&latencies, 0.99),
        mean_s: latencies.iter().sum::<f64>() / latencies.len().max(1) as f64,
        batches,
        cpu_share: 0.0,
    }
}

/// Runs one schedule, recording the CPU share it got.
fn measured(
    args: &Args,
    device: tch::Device,
    schedule: impl FnOnce() -> Result<Outcome>,
) -> Result<Outcome> {
    let clock = Stopwatch::start(device);
    let mut outcome = schedule()?;
    outcome.cpu_share = clock.stop(args.threads).cpu_share;
    Ok(outcome)
}

fn continuous(engine: &InferenceEngine, reqs: &[Request]) -> Result<Outcome> {
    let mut ids = HashMap::new();
    let mut finish = vec![0.0; reqs.len()];
    let (mut next, mut done, mut steps) = (0, 0, 0);
    let start = Instant::now();
    while done < reqs.len() {
        let now = start.elapsed().as_secs_f64();
        while next < reqs.len() && reqs[next].arrival <= now {
            let r = &reqs[next];
            let id = engine.submit(SeqRequest {
                prompt: r.prompt.clone(),
                stream: r.stream,
                params: Arc::new(full_length(r.max_tokens, r.stream.seed)),
            })?;
            ids.insert(id, next);
            next += 1;
        }
        if !engine.has_unfinished() {
            wait_until(start, reqs[next].arrival);
            continue;
        }
        steps += 1;
        for update in engine.step()? {
            if let Some(c) = update.finished {
                let i = *ids.get(&update.id).context("unknown sequence id")?;
                ensure!(
                    c.token_ids.len() == reqs[i].max_tokens,
                    "request {i}: wrong length"
                );
                finish[i] = start.elapsed().as_secs_f64();
                done += 1;
            }
        }
    }
    Ok(outcome("continuous (paged)", reqs, &finish, steps))
}

/// Runs `batch` (indices into `reqs`) on the static engine with `max_tokens`.
fn run_static(
    model: &CausalLm,
    reqs: &[Request],
    batch: &[usize],
    max_tokens: usize,
    max_batch: usize,
) -> Result<()> {
    let prompts: Vec<Vec<i64>> = batch.iter().map(|&i| reqs[i].prompt.clone()).collect();
    let streams: Vec<SampleStream> = batch.iter().map(|&i| reqs[i].stream).collect();
    let params = full_length(max_tokens, reqs[batch[0]].stream.seed);
    let out =
        static_batch::generate_with_streams(model, None, &prompts, &streams, &params, max_batch)?;
    ensure!(
        out.iter().all(|c| c.token_ids.len() == max_tokens),
        "static engine: wrong length"
    );
    Ok(())
}

fn old_server(
    model: &CausalLm,
    reqs: &[Request],
    max_batch: usize,
    window: f64,
) -> Result<Outcome> {
    let mut finish = vec![0.0; reqs.len()];
    let (mut next, mut batches) = (0, 0);
    let start = Instant::now();
    while next < reqs.len() {
        wait_until(start, reqs[next].arrival);
        let key = full_length(reqs[next].max_tokens, reqs[next].stream.seed);
        let mut batch = vec![next];
        next += 1;
        let deadline = start.elapsed().as_secs_f64() + window;
        while batch.len() < max_batch && next < reqs.len() && reqs[next].arrival <= deadline {
            wait_until(start, reqs[next].arrival);
            let params = full_length(reqs[next].max_tokens, reqs[next].stream.seed);
            if !params.batches_with(&key) {
                break;
            }
            batch.push(next);
            next += 1;
        }
        run_static(model, reqs, &batch, key.max_tokens, max_batch)?;
        batches += 1;
        let t = start.elapsed().as_secs_f64();
        batch.iter().for_each(|&i| finish[i] = t);
    }
    Ok(outcome("old server (static)", reqs, &finish, batches))
}

fn padded_static(model: &CausalLm, reqs: &[Request], max_batch: usize) -> Result<Outcome> {
    let mut finish = vec![0.0; reqs.len()];
    let (mut next, mut batches) = (0, 0);
    let start = Instant::now();
    while next < reqs.len() {
        wait_until(start, reqs[next].arrival);
        let now = start.elapsed().as_secs_f64();
        let batch: Vec<usize> = (next..reqs.len())
            .take_while(|&i| reqs[i].arrival <= now)
            .take(max_batch)
            .collect();
        next += batch.len();
        let longest = batch.iter().map(|&i| reqs[i].max_tokens).max().unwrap_or(0);
        run_static(model, reqs, &batch, longest, max_batch)?;
        batches += 1;
        let t = start.elapsed().as_secs_f64();
        batch.iter().for_each(|&i| finish[i] = t);
    }
    Ok(outcome(
        "static, padded (hypothetical)",
        reqs,
        &finish,
        batches,
    ))
}

/// Runs the mixed workload on every schedule asked for.
pub fn run(args: &Args, sizes: &Sizes, subject: &Subject, model: CausalLm) -> Result<MixedResult> {
    let reqs = requests(args, sizes, &model);
    let len = sizes.prompt_len + sizes.mixed_max_tokens;
    let settings = grpo::settings(&model, sizes.mixed_max_num_seqs, len);
    let engine = InferenceEngine::new(model, None).with_settings(settings)?;
    let warm = full_length(4, args.seed);
    let first = [reqs[0].prompt.clone()];
    engine.generate(&first, &warm)?;
    static_batch::generate(engine.model(), None, &first, &warm, 1)?;
    engine.reset_prefix_cache();
    let device = subject.device;
    let mut outcomes = vec![measured(args, device, || continuous(&engine, &reqs))?];
    if !args.no_static {
        let model = engine.model();
        let (max_batch, window) = (sizes.mixed_max_num_seqs, args.window_ms as f64 / 1000.0);
        outcomes.push(measured(args, device, || {
            old_server(model, &reqs, max_batch, window)
        })?);
        outcomes.push(measured(args, device, || {
            padded_static(model, &reqs, max_batch)
        })?);
    }
    Ok(MixedResult {
        model: subject.label.clone(),
        requests: reqs.len(),
        tokens: reqs.iter().map(|r| r.max_tokens).sum(),
        arrival_rate: args.arrival_rate,
        outcomes,
    })
}
