//! GRPO-shaped rollout: every prompt sampled `n` times to the full length, on
//! the paged engine, the old static-batch engine and Hugging Face.

use anyhow::{ensure, Result};

use skyrl_model::{
    static_batch, CausalLm, Completion, EngineSettings, EngineStats, InferenceEngine, SampleStream,
};

use crate::clock::{Elapsed, Stopwatch};
use crate::hf::{self, HfResult};
use crate::workload::{full_length, random_prompts, repeat_each};
use crate::{Args, Sizes, Subject};

/// One engine's run of the whole rollout.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Timed {
    pub seconds: f64,
    pub tokens_per_s: f64,
    /// CPU seconds the process got / (seconds x threads); well under 1 means
    /// other processes held the cores.
    pub cpu_share: f64,
}

/// Results of the GRPO workload on one model.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GrpoResult {
    pub model: String,
    /// Sequences generated (prompts x n) and tokens each.
    pub rows: usize,
    pub gen_tokens: usize,
    /// Most sequences decoded together, on every engine.
    pub max_num_seqs: usize,
    pub paged: Timed,
    /// Prompt tokens the paged engine ran through the model, and those it shared.
    pub prefill_tokens_computed: u64,
    pub prefill_tokens_reused: u64,
    /// Engine steps, decode steps split across threads, and preemptions (KV
    /// pool ran dry) of the paged run.
    pub steps: u64,
    pub parallel_decode_steps: u64,
    pub preemptions: u64,
    pub static_batch: Option<Timed>,
    pub hf: Option<HfResult>,
}

impl GrpoResult {
    /// Share of the prompt tokens whose prefill prefix sharing saved.
    pub fn prefill_saved(&self) -> f64 {
        let total = self.prefill_tokens_computed + self.prefill_tokens_reused;
        self.prefill_tokens_reused as f64 / total.max(1) as f64
    }
}

/// KV budget for `rows` sequences of `len` tokens (no sharing assumed), plus one
/// full-context sequence, which the engine requires.
fn kv_budget(model: &CausalLm, block_size: usize, rows: usize, len: usize) -> u64 {
    let settings = EngineSettings {
        block_size,
        ..Default::default()
    };
    let blocks = rows * len.div_ceil(block_size) + settings.blocks_per_full_sequence(model) + 2;
    blocks as u64 * block_size as u64 * EngineSettings::kv_bytes_per_token(model)
}

/// Settings of the paged engine for a workload: `max_num_seqs` sequences of at
/// most `len` tokens, prefix caching on.
pub fn settings(model: &CausalLm, max_num_seqs: usize, len: usize) -> EngineSettings {
    let block_size = EngineSettings::default().block_size;
    EngineSettings {
        max_num_seqs,
        kv_cache_bytes: Some(kv_budget(model, block_size, max_num_seqs, len)),
        ..Default::default()
    }
}

fn check(out: &[Completion], rows: usize, gen_tokens: usize, who: &str) -> Result<()> {
    ensure!(
        out.len() == rows,
        "{who}: {} completions for {rows} rows",
        out.len()
    );
    ensure!(
        out.iter().all(|c| c.token_ids.len() == gen_tokens),
        "{who}: a completion is not {gen_tokens} tokens long"
    );
    Ok(())
}

fn timed(rows: usize, gen_tokens: usize, e: Elapsed) -> Timed {
    Timed {
        seconds: e.seconds,
        tokens_per_s: (rows * gen_tokens) as f64 / e.seconds,
        cpu_share: e.cpu_share,
    }
}

/// Runs the rollout on every engine asked for, at most `max_num_seqs`
/// sequences decoding together.
pub fn run(
    args: &Args,
    sizes: &Sizes,
    subject: &Subject,
    model: CausalLm,
    max_num_seqs: usize,
) -> Result<GrpoResult> {
    let prompts = random_prompts(&model, sizes.prompts, sizes.prompt_len, args.seed);
    let rows_prompts = repeat_each(&prompts, sizes.n);
    let rows = rows_prompts.len();
    let streams = SampleStream::sequence(Some(args.seed), rows);
    let params = full_length(sizes.gen_tokens, args.seed);
    let warm = full_length(4, args.seed);
    let device = subject.device;
    let len = sizes.prompt_len + sizes.gen_tokens;
    let settings = settings(&model, max_num_seqs, len);
    let engine = InferenceEngine::new(model, None).with_settings(settings)?;

    // Paged engine: a short warm-up, then the rollout with a cold prefix cache.
    engine.generate(&rows_prompts[..sizes.n.min(rows)], &warm)?;
    engine.reset_prefix_cache();
    let before = engine.stats();
    let clock = Stopwatch::start(device);
    let out = engine.generate_with_streams(&rows_prompts, &streams, &params)?;
    let paged = timed(rows, sizes.gen_tokens, clock.stop(args.threads));
    check(&out, rows, sizes.gen_tokens, "paged engine")?;
    let after = engine.stats();
    let delta = |f: fn(&EngineStats) -> u64| f(&after) - f(&before);

    let static_batch = if args.no_static {
        None
    } else {
        let model = engine.model();
        static_batch::generate(model, None, &rows_prompts[..1], &warm, 1)?;
        let clock = Stopwatch::start(device);
        let out = static_batch::generate_with_streams(
            model,
            None,
            &rows_prompts,
            &streams,
            &params,
            max_num_seqs,
        )?;
        let t = timed(rows, sizes.gen_tokens, clock.stop(args.threads));
        check(&out, rows, sizes.gen_tokens, "static engine")?;
        Some(t)
    };

    let tmp = tempfile::tempdir()?;
    let prompts_json = tmp.path().join("prompts.json");
    std::fs::write(&prompts_json, serde_json::to_string(&prompts)?)?;
    if let Some(path) = &args.prompts_out {
        std::fs::copy(&prompts_json, path)?;
    }
    let hf = if args.no_hf {
        None
    } else {
        drop(engine);
        Some(hf::run(args, sizes, subject, &prompts_json, max_num_seqs)?)
    };
    Ok(GrpoResult {
        model: subject.label.clone(),
        rows,
        gen_tokens: sizes.gen_tokens,
        max_num_seqs,
        paged,
        prefill_tokens_computed: delta(|s| s.prefill_tokens_computed),
        prefill_tokens_reused: delta(|s| s.prefill_tokens_reused),
        steps: delta(|s| s.steps),
        parallel_decode_steps: delta(|s| s.parallel_decode_steps),
        preemptions: delta(|s| s.preemptions),
        static_batch,
        hf,
    })
}
