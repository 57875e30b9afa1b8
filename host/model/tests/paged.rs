//! The paged engine against the static-batch engine and against itself under
//! pressure: greedy outputs identical, forks and prefix-cache hits exact,
//! preemption by recompute invisible in the output, sequences joining and
//! leaving the running batch, penalties and log-prob reports, bad input.

mod common;

use std::sync::Arc;

use common::perturbed_tiny;
use skyrl_model::{
    generate_with_streams, Arch, CausalLm, Completion, EngineSettings, InferenceEngine,
    SampleStream, SamplingParams, SeqId, SeqRequest, StopMatch, Tokenizer,
};

fn setup() -> (tempfile::TempDir, CausalLm, Tokenizer) {
    let tmp = tempfile::tempdir().unwrap();
    let model = perturbed_tiny(Arch::Qwen2, &tmp.path().join("m"), 11);
    let tokenizer = Tokenizer::from_dir(tmp.path().join("m")).unwrap();
    (tmp, model, tokenizer)
}

fn engine(model: &CausalLm, tmp: &tempfile::TempDir, settings: EngineSettings) -> InferenceEngine {
    let copy = model
        .try_clone(&common::cpu())
        .expect("clone the tiny model");
    let tokenizer = Tokenizer::from_dir(tmp.path().join("m")).unwrap();
    InferenceEngine::new(copy, Some(tokenizer))
        .with_settings(settings)
        .expect("valid settings")
}

/// Prompts of assorted lengths (shorter and longer than a block of 4).
fn prompts(tokenizer: &Tokenizer) -> Vec<Vec<i64>> {
    [
        "Q: 2+3=",
        "Tell me a story about a cat and a dog",
        "x",
        "abcd",
        "The quick brown fox jumps",
    ]
    .iter()
    .map(|t| tokenizer.encode(t, false).unwrap())
    .collect()
}

fn settings(block_size: usize, kv_tokens: u64, model: &CausalLm) -> EngineSettings {
    EngineSettings {
        block_size,
        kv_cache_bytes: Some(kv_tokens * EngineSettings::kv_bytes_per_token(model)),
        ..EngineSettings::default()
    }
}

fn tokens(cs: &[Completion]) -> Vec<Vec<i64>> {
    cs.iter().map(|c| c.token_ids.clone()).collect()
}

fn assert_logprobs_close(a: &[Completion], b: &[Completion]) {
    for (x, y) in a.iter().zip(b) {
        for (p, q) in x.logprobs.iter().zip(&y.logprobs) {
            assert!((p - q).abs() < 1e-4, "{p} vs {q}");
        }
    }
}

/// Greedy `max_tokens` from each prompt, ignoring EOS.
fn greedy(max_tokens: usize) -> SamplingParams {
    SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(max_tokens)
    }
}

/// Asserts that each `(prompt, max_tokens)` completion in `done` (by id)
/// equals the prompt decoded alone, greedily, by the static engine.
fn assert_each_matches_alone(
    model: &CausalLm,
    tokenizer: &Tokenizer,
    requests: &[(Vec<i64>, usize)],
    ids: &[SeqId],
    done: &std::collections::HashMap<SeqId, Completion>,
) {
    for (i, ((prompt, max_tokens), id)) in requests.iter().zip(ids).enumerate() {
        let alone = generate_with_streams(
            model,
            Some(tokenizer),
            std::slice::from_ref(prompt),
            &SampleStream::sequence(Some(1), 1),
            &greedy(*max_tokens),
            1,
        )
        .unwrap();
        let got = &done[id];
        assert_eq!(got.token_ids, alone[0].token_ids, "sequence {i}");
        assert_logprobs_close(std::slice::from_ref(got), &alone);
    }
}

#[test]
fn greedy_matches_the_static_engine_even_under_preemption() {
    let (tmp, model, tokenizer) = setup();
    let prompts = prompts(&tokenizer);
    let params = greedy(40);
    let streams = SampleStream::sequence(Some(1), prompts.len());
    let reference =
        generate_with_streams(&model, Some(&tokenizer), &prompts, &streams, &params, 8).unwrap();
    // Roomy pool, then one so small that sequences must be preempted and recomputed
    // (the context must still fit: 4096 tokens + a spare block).
    for kv_tokens in [1 << 16, 4096 + 8] {
        let engine = engine(&model, &tmp, settings(4, kv_tokens, &model));
        let got = engine
            .generate_with_streams(&prompts, &streams, &params)
            .unwrap();
        assert_eq!(tokens(&got), tokens(&reference), "kv_tokens {kv_tokens}");
        assert_logprobs_close(&got, &reference);
    }
    let tight = settings(4, 64, &model);
    let err = InferenceEngine::new(model, None)
        .with_settings(tight)
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot hold one sequence"),
        "{err}"
    );
}

#[test]
fn preemption_recomputes_without_changing_sampled_output() {
    let (tmp, mut model, tokenizer) = setup();
    // A context of 64 tokens lets a pool of 40 blocks of 4 hold only a few sequences.
    let mut config = model.config().clone();
    config.max_position_embeddings = 64;
    let mut small = CausalLm::new(config, &common::cpu(), 0).unwrap();
    small.copy_weights_from(&model).unwrap();
    model = small;
    let prompts: Vec<Vec<i64>> = prompts(&tokenizer).into_iter().cycle().take(8).collect();
    let params = SamplingParams {
        ignore_eos: true,
        max_tokens: 40,
        seed: Some(3),
        ..Default::default()
    };
    let roomy = engine(&model, &tmp, settings(4, 4096, &model));
    let want = roomy.generate(&prompts, &params).unwrap();
    let tight = engine(&model, &tmp, settings(4, 17 * 4, &model));
    let got = tight.generate(&prompts, &params).unwrap();
    assert!(tight.stats().preemptions > 0, "{:?}", tight.stats());
    assert_eq!(tokens(&got), tokens(&want));
    assert_logprobs_close(&got, &want);
}

#[test]
fn samples_of_one_prompt_share_its_prefill() {
    let (tmp, model, tokenizer) = setup();
    let prompt = tokenizer
        .encode("Tell me a story about a cat and a dog", false)
        .unwrap();
    let mut s = settings(4, 1 << 14, &model);
    s.enable_prefix_caching = false;
    let engine = engine(&model, &tmp, s);
    let params = SamplingParams {
        ignore_eos: true,
        max_tokens: 12,
        ..Default::default()
    };
    let streams = SampleStream::sequence(Some(9), 8);
    let together = engine
        .generate_with_streams(&vec![prompt.clone(); 8], &streams, &params)
        .unwrap();
    let stats = engine.stats();
    assert_eq!(stats.prefill_tokens_computed, prompt.len() as u64);
    assert_eq!(stats.prefill_tokens_reused, 7 * prompt.len() as u64);
    assert!(together[1..]
        .iter()
        .all(|c| c.cached_prompt_tokens == prompt.len()));
    // Each sample is what it would be alone.
    for (i, stream) in streams.iter().enumerate().step_by(3) {
        let alone = engine
            .generate_with_streams(std::slice::from_ref(&prompt), &[*stream], &params)
            .unwrap();
        assert_eq!(alone[0].token_ids, together[i].token_ids);
    }
    assert!(together
        .iter()
        .any(|c| c.token_ids != together[0].token_ids));
}

#[test]
fn a_later_turn_reuses_the_cached_conversation() {
    let (tmp, model, tokenizer) = setup();
    let engine = engine(&model, &tmp, settings(4, 1 << 14, &model));
    let turn1 = tokenizer
        .encode("User: hello there. Assistant:", false)
        .unwrap();
    let params = greedy(10);
    let first = engine
        .generate(std::slice::from_ref(&turn1), &params)
        .unwrap();
    let mut turn2 = turn1.clone();
    turn2.extend(&first[0].token_ids);
    turn2.extend(tokenizer.encode(" User: and then?", false).unwrap());
    let before = engine.stats();
    let second = engine.generate(&[turn2.clone()], &params).unwrap();
    let reused = engine.stats().prefill_tokens_reused - before.prefill_tokens_reused;
    // Every full block of turn 1 (prompt and generated tokens but the last) is reused.
    let expected = (turn1.len() + first[0].token_ids.len() - 1) / 4 * 4;
    assert_eq!(reused as usize, expected);
    assert_eq!(second[0].cached_prompt_tokens, expected);
    let mut uncached = settings(4, 1 << 14, &model);
    uncached.enable_prefix_caching = false;
    let fresh = self::engine(&model, &tmp, uncached);
    assert_eq!(
        fresh.generate(&[turn2], &params).unwrap()[0].token_ids,
        second[0].token_ids
    );
    // New weights invalidate the cache.
    let mut engine = engine;
    engine.model_mut();
    assert_eq!(engine.stats().kv_blocks_cached, 0);
}

#[test]
fn sequences_join_and_leave_the_running_batch() {
    let (tmp, model, tokenizer) = setup();
    let engine = engine(&model, &tmp, settings(4, 1 << 14, &model));
    let submit = |text: &str, max_tokens| {
        engine
            .submit(SeqRequest {
                prompt: tokenizer.encode(text, false).unwrap(),
                stream: SampleStream { seed: 1, index: 0 },
                params: Arc::new(greedy(max_tokens)),
            })
            .unwrap()
    };
    let long = submit("a long one", 30);
    let mut finished_at = std::collections::HashMap::new();
    let mut late = None;
    for step in 0.. {
        if step == 5 {
            late = Some(submit("a short late one", 3));
        }
        for u in engine.step().unwrap() {
            assert_eq!(u.new_token_ids.len(), 1);
            if u.finished.is_some() {
                finished_at.insert(u.id, step);
            }
        }
        if !engine.has_unfinished() {
            break;
        }
    }
    // The late request joined the running batch and left it long before the long one.
    assert_eq!(finished_at[&late.unwrap()], 7);
    assert_eq!(finished_at[&long], 29);
}

/// The decode rows' contiguous cache is carried over, regathered and grown as
/// sequences of different lengths join and leave; greedy output stays that of
/// each prompt decoded alone by the static engine.
#[test]
fn decode_rows_survive_joins_leaves_and_growth() {
    let (tmp, model, tokenizer) = setup();
    let engine = engine(&model, &tmp, settings(4, 1 << 14, &model));
    let prompts = prompts(&tokenizer);
    let max_tokens = [150, 20, 140, 60, 300];
    let join_at = [0, 0, 3, 10, 25];
    let mut ids = vec![None; prompts.len()];
    let mut done = std::collections::HashMap::new();
    for step in 0.. {
        for (i, prompt) in prompts.iter().enumerate() {
            if join_at[i] == step {
                let request = SeqRequest {
                    prompt: prompt.clone(),
                    stream: SampleStream { seed: 1, index: 0 },
                    params: Arc::new(greedy(max_tokens[i])),
                };
                ids[i] = Some(engine.submit(request).unwrap());
            }
        }
        for u in engine.step().unwrap() {
            if let Some(c) = u.finished {
                done.insert(u.id, c);
            }
        }
        if step > join_at[4] && !engine.has_unfinished() {
            break;
        }
    }
    let requests: Vec<(Vec<i64>, usize)> = prompts.into_iter().zip(max_tokens).collect();
    let ids: Vec<SeqId> = ids.into_iter().map(Option::unwrap).collect();
    assert_each_matches_alone(&model, &tokenizer, &requests, &ids, &done);
}

#[test]
fn decode_steps_split_across_threads_match_each_sequence_alone() {
    // Two intra-op threads: the tiny model's decode steps are small, so the
    // engine splits their rows across two threads (at least 4 rows a part).
    tch::set_num_threads(2);
    let (tmp, model, tokenizer) = setup();
    let engine = engine(&model, &tmp, settings(4, 1 << 15, &model));
    let base = prompts(&tokenizer);
    // Assorted lengths: rows leave at different steps, so rows move from one
    // part to the other, and the batch falls back to one part at the end.
    let requests: Vec<(Vec<i64>, usize)> = (0..12)
        .map(|i| (base[i % base.len()].clone(), 10 + 7 * i))
        .collect();
    let ids: Vec<_> = requests
        .iter()
        .map(|(prompt, max_tokens)| {
            let request = SeqRequest {
                prompt: prompt.clone(),
                stream: SampleStream { seed: 1, index: 0 },
                params: Arc::new(greedy(*max_tokens)),
            };
            engine.submit(request).unwrap()
        })
        .collect();
    let mut done = std::collections::HashMap::new();
    while engine.has_unfinished() {
        for u in engine.step().unwrap() {
            if let Some(c) = u.finished {
                done.insert(u.id, c);
            }
        }
    }
    assert_each_matches_alone(&model, &tokenizer, &requests, &ids, &done);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores >= 2 {
        assert!(
            engine.stats().parallel_decode_steps > 0,
            "no decode step was split on {cores} cores"
        );
    }
}

#[test]
fn penalties_and_logprob_reports() {
    let (tmp, model, tokenizer) = setup();
    let engine = engine(&model, &tmp, settings(4, 1 << 14, &model));
    let prompt = tokenizer.encode("abcabcabc", false).unwrap();
    let greedy = SamplingParams {
        ignore_eos: true,
        top_logprobs: 3,
        prompt_logprobs: Some(2),
        ..SamplingParams::greedy(16)
    };
    let plain = engine
        .generate(std::slice::from_ref(&prompt), &greedy)
        .unwrap()
        .remove(0);
    // Top alternatives: the greedy token is the first, with its raw log-prob.
    for ((t, lp), top) in plain
        .token_ids
        .iter()
        .zip(&plain.logprobs)
        .zip(&plain.top_logprobs)
    {
        assert_eq!(top.len(), 3);
        assert_eq!(top[0].0, *t);
        assert!((top[0].1 - lp).abs() < 1e-6);
    }
    // Prompt log-probs equal the training forward's.
    let ids = tch::Tensor::from_slice(&prompt).view([1, -1]);
    let want = tch::no_grad(|| model.forward_logprobs(&ids, &ids.ones_like()).unwrap());
    let want = Vec::<f32>::try_from(want.view([-1])).unwrap();
    let got = plain.prompt_logprobs.as_ref().unwrap();
    assert_eq!(got.len(), prompt.len() - 1);
    for (g, w) in got.iter().zip(&want) {
        assert!((g.logprob - w).abs() < 1e-4, "{} vs {w}", g.logprob);
        assert_eq!(g.top.len(), 2);
    }
    // A strong repetition penalty forbids repeats that greedy decoding makes.
    let repeats = |c: &Completion| {
        let mut seen = std::collections::HashSet::new();
        c.token_ids.iter().filter(|t| !seen.insert(**t)).count()
    };
    assert!(repeats(&plain) > 0, "{:?}", plain.token_ids);
    for penalised in [
        SamplingParams {
            frequency_penalty: 2.0,
            presence_penalty: 2.0,
            ..greedy.clone()
        },
        SamplingParams {
            repetition_penalty: 1e6,
            ..greedy.clone()
        },
    ] {
        let c = engine
            .generate(std::slice::from_ref(&prompt), &penalised)
            .unwrap()
            .remove(0);
        assert!(repeats(&c) < repeats(&plain), "{:?}", c.token_ids);
        // Raw log-probs are those of the unpenalised distribution.
        assert!(c.logprobs.iter().all(|lp| *lp <= 0.0));
    }
}

#[test]
fn bad_input_is_refused_at_submit() {
    let (tmp, model, _) = setup();
    let engine = engine(&model, &tmp, settings(4, 4096 + 8, &model));
    let request = |prompt: Vec<i64>, max_tokens| SeqRequest {
        prompt,
        stream: SampleStream { seed: 0, index: 0 },
        params: Arc::new(SamplingParams {
            max_tokens,
            ..Default::default()
        }),
    };
    let err = |r| engine.submit(r).unwrap_err().to_string();
    assert!(err(request(vec![], 4)).contains("empty"));
    assert!(err(request(vec![5; 4096], 4)).contains("context is 4096"));
    assert!(err(request(vec![1_000_000], 4)).contains("outside the vocabulary"));
    let no_tokenizer = InferenceEngine::new(model, None);
    let stop = SeqRequest {
        params: Arc::new(SamplingParams {
            stop: vec!["x".into()],
            ..Default::default()
        }),
        ..request(vec![5], 4)
    };
    assert!(no_tokenizer
        .submit(stop)
        .unwrap_err()
        .to_string()
        .contains("stop strings need a tokenizer"));
    assert!(!engine.has_unfinished());
}

/// Stop strings found late in a long output (only the output's tail is
/// decoded each step) end the sequence at their first occurrence; before
/// `min_tokens` they do not.
#[test]
fn stop_strings_end_long_outputs_at_their_first_occurrence() {
    let (tmp, model, tokenizer) = setup();
    let engine = engine(&model, &tmp, settings(4, 1 << 14, &model));
    let prompt = tokenizer.encode("Tell me a story", false).unwrap();
    let run = |stop: Vec<String>, min_tokens: usize| {
        let params = SamplingParams {
            stop,
            min_tokens,
            ignore_eos: true,
            ..SamplingParams::greedy(120)
        };
        engine
            .generate(std::slice::from_ref(&prompt), &params)
            .unwrap()
            .remove(0)
    };
    let free = run(Vec::new(), 0);
    let text = tokenizer.decode(&free.token_ids, true).unwrap();
    // A three-character stop string from late in the output, by token 60.
    let late = tokenizer.decode(&free.token_ids[..60], true).unwrap();
    let chars: Vec<char> = late.chars().collect();
    let stop: String = chars[chars.len() - 3..].iter().collect();
    let first = text.find(&stop).unwrap();
    let got = run(vec![stop.clone()], 0);
    assert_eq!(got.stop_match, Some(StopMatch::String(stop.clone())));
    let out = tokenizer.decode(&got.token_ids, true).unwrap();
    assert!(out.ends_with(&stop), "{out:?} should end with {stop:?}");
    assert_eq!(
        out.len(),
        first + stop.len(),
        "stopped at the first occurrence"
    );
    assert_eq!(got.token_ids[..], free.token_ids[..got.token_ids.len()]);
    // With min_tokens past it, the sequence runs on.
    let held = run(vec![stop.clone()], got.token_ids.len() + 1);
    assert!(held.token_ids.len() > got.token_ids.len());
}
