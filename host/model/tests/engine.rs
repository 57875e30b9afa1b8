//! Built-in inference engine: KV cache vs full recompute, seeding, stops, logprobs.

mod common;

use tch::{Kind, Tensor};

use common::{cpu, perturbed_tiny};
use skyrl_model::{
    generate, Arch, CausalLm, InferenceEngine, LogprobMode, SampleStream, SamplingParams,
    StopMatch, StopReason, Tokenizer,
};

fn model_and_tokenizer() -> (tempfile::TempDir, CausalLm, Tokenizer) {
    let tmp = tempfile::tempdir().unwrap();
    let model = perturbed_tiny(Arch::Qwen2, &tmp.path().join("m"), 5);
    let tokenizer = Tokenizer::from_dir(tmp.path().join("m")).unwrap();
    (tmp, model, tokenizer)
}

fn prompts(tokenizer: &Tokenizer) -> Vec<Vec<i64>> {
    ["Q: 2+3=", "Tell me a story about a cat", "x"]
        .iter()
        .map(|t| tokenizer.encode(t, false).unwrap())
        .collect()
}

/// Greedy decoding by re-running the full forward on the growing sequence.
fn greedy_by_recompute(model: &CausalLm, prompt: &[i64], steps: usize) -> Vec<i64> {
    let mut seq = prompt.to_vec();
    let mut out = Vec::new();
    for _ in 0..steps {
        let ids = Tensor::from_slice(&seq).view([1, seq.len() as i64]);
        let logits = tch::no_grad(|| model.forward(&ids, None).unwrap());
        let next = logits
            .get(0)
            .get(seq.len() as i64 - 1)
            .argmax(-1, false)
            .int64_value(&[]);
        seq.push(next);
        out.push(next);
    }
    out
}

#[test]
fn greedy_kv_cache_matches_full_recompute_with_left_padding() {
    let (_tmp, model, tokenizer) = model_and_tokenizer();
    let prompts = prompts(&tokenizer);
    let params = SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(20)
    };
    let got = generate(&model, Some(&tokenizer), &prompts, &params, 8).unwrap();
    for (p, c) in prompts.iter().zip(&got) {
        assert_eq!(
            c.token_ids,
            greedy_by_recompute(&model, p, 20),
            "prompt {p:?}"
        );
        assert_eq!(c.stop_reason, StopReason::Length);
        assert_eq!(c.logprobs.len(), 20);
    }
}

#[test]
fn raw_logprobs_equal_training_forward() {
    let (_tmp, model, tokenizer) = model_and_tokenizer();
    let prompts = prompts(&tokenizer);
    let params = SamplingParams {
        temperature: 0.8,
        top_p: 0.9,
        top_k: 50,
        max_tokens: 16,
        ignore_eos: true,
        seed: Some(3),
        ..Default::default()
    };
    let got = generate(&model, None, &prompts, &params, 8).unwrap();
    for (p, c) in prompts.iter().zip(&got) {
        let full: Vec<i64> = p.iter().chain(&c.token_ids).copied().collect();
        let ids = Tensor::from_slice(&full).view([1, full.len() as i64]);
        let lp = tch::no_grad(|| model.forward_logprobs(&ids, &ids.ones_like()).unwrap());
        let want = lp
            .get(0)
            .narrow(0, p.len() as i64 - 1, c.token_ids.len() as i64);
        let got = Tensor::from_slice(&c.logprobs);
        let diff = (want - got).abs().max().double_value(&[]);
        assert!(
            diff < 1e-4,
            "rollout logprobs differ from forward_logprobs by {diff}"
        );
    }
}

#[test]
fn seeded_sampling_is_reproducible_and_seed_dependent() {
    let (_tmp, model, tokenizer) = model_and_tokenizer();
    let engine = InferenceEngine::new(model, Some(tokenizer));
    let prompts = prompts(engine.tokenizer().unwrap());
    let params = |seed| SamplingParams {
        temperature: 1.0,
        max_tokens: 24,
        ignore_eos: true,
        seed: Some(seed),
        ..Default::default()
    };
    let a = engine.generate(&prompts, &params(7)).unwrap();
    let b = engine.generate(&prompts, &params(7)).unwrap();
    let c = engine.generate(&prompts, &params(8)).unwrap();
    let outputs = |cs: &[skyrl_model::Completion]| {
        cs.iter()
            .map(|x| (x.token_ids.clone(), x.logprobs.clone()))
            .collect::<Vec<_>>()
    };
    // The second run reuses cached prompt blocks and still matches exactly.
    assert_eq!(outputs(&a), outputs(&b));
    assert!(b.iter().any(|x| x.cached_prompt_tokens > 0));
    assert_ne!(
        a.iter().map(|x| &x.token_ids).collect::<Vec<_>>(),
        c.iter().map(|x| &x.token_ids).collect::<Vec<_>>()
    );
    // Sequences of the same batch get independent streams.
    let same = vec![prompts[0].clone(); 4];
    let d = engine.generate(&same, &params(7)).unwrap();
    assert!(d.iter().any(|x| x.token_ids != d[0].token_ids));
}

#[test]
fn a_prompt_sampled_from_its_own_stream_ignores_its_batch_company() {
    let (_tmp, model, tokenizer) = model_and_tokenizer();
    let engine = InferenceEngine::new(model, Some(tokenizer));
    let prompts = prompts(engine.tokenizer().unwrap());
    let params = SamplingParams {
        temperature: 1.0,
        max_tokens: 12,
        ignore_eos: true,
        ..Default::default()
    };
    let stream = |seed, index| SampleStream { seed, index };
    let alone = engine
        .generate_with_streams(&prompts[1..2], &[stream(11, 0)], &params)
        .unwrap();
    let together = engine
        .generate_with_streams(
            &prompts,
            &[stream(5, 3), stream(11, 0), stream(5, 4)],
            &params,
        )
        .unwrap();
    assert_eq!(alone[0].token_ids, together[1].token_ids);
    // `generate` with a seed is the stream sequence (seed, 0..n).
    let seeded = engine
        .generate(
            &prompts,
            &SamplingParams {
                seed: Some(5),
                ..params.clone()
            },
        )
        .unwrap();
    let explicit = engine
        .generate_with_streams(&prompts, &SampleStream::sequence(Some(5), 3), &params)
        .unwrap();
    assert_eq!(seeded, explicit);
    let err = engine
        .generate_with_streams(&prompts, &[stream(1, 0)], &params)
        .unwrap_err();
    assert!(err.to_string().contains("3 prompts but 1 sampling streams"));
}

#[test]
fn stop_strings_and_stop_tokens_are_honoured() {
    let (_tmp, model, tokenizer) = model_and_tokenizer();
    let prompt = tokenizer.encode("Q: 2+3=", false).unwrap();
    let free = generate(
        &model,
        Some(&tokenizer),
        std::slice::from_ref(&prompt),
        &SamplingParams {
            ignore_eos: true,
            ..SamplingParams::greedy(30)
        },
        1,
    )
    .unwrap();
    let text = tokenizer.decode(&free[0].token_ids, true).unwrap();
    let chars: Vec<char> = text.chars().collect();
    let stop: String = chars[6..8].iter().collect();
    let first = text.find(&stop).unwrap();
    let params = SamplingParams {
        stop: vec![stop.clone()],
        ignore_eos: true,
        ..SamplingParams::greedy(30)
    };
    let got = generate(
        &model,
        Some(&tokenizer),
        std::slice::from_ref(&prompt),
        &params,
        1,
    )
    .unwrap();
    let c = &got[0];
    assert_eq!(c.stop_reason, StopReason::Stop);
    assert_eq!(c.stop_match, Some(StopMatch::String(stop.clone())));
    let out = tokenizer.decode(&c.token_ids, true).unwrap();
    assert!(out.ends_with(&stop), "{out:?} should end with {stop:?}");
    assert_eq!(
        out.len(),
        first + stop.len(),
        "stopped at the first occurrence"
    );

    // A stop token id ends the sequence and is included.
    let stop_id = free[0].token_ids[4];
    let params = SamplingParams {
        stop_token_ids: vec![stop_id],
        ..SamplingParams::greedy(30)
    };
    let got = generate(&model, None, std::slice::from_ref(&prompt), &params, 1).unwrap();
    let pos = free[0]
        .token_ids
        .iter()
        .position(|&t| t == stop_id)
        .unwrap();
    assert_eq!(got[0].token_ids, free[0].token_ids[..=pos].to_vec());
    assert_eq!(got[0].stop_match, Some(StopMatch::Token(stop_id)));

    // Stop strings without a tokenizer are a clear error.
    let err = generate(
        &model,
        None,
        &[prompt],
        &SamplingParams {
            stop: vec!["x".into()],
            ..Default::default()
        },
        1,
    )
    .unwrap_err();
    assert!(err.to_string().contains("tokenizer"), "{err}");
}

#[test]
fn top_k_one_is_greedy_and_processed_logprobs_are_valid() {
    let (_tmp, model, tokenizer) = model_and_tokenizer();
    let prompts = prompts(&tokenizer);
    let greedy = generate(
        &model,
        None,
        &prompts,
        &SamplingParams {
            ignore_eos: true,
            ..SamplingParams::greedy(12)
        },
        8,
    )
    .unwrap();
    let topk1 = SamplingParams {
        top_k: 1,
        max_tokens: 12,
        ignore_eos: true,
        seed: Some(1),
        ..Default::default()
    };
    let got = generate(&model, None, &prompts, &topk1, 8).unwrap();
    for (a, b) in greedy.iter().zip(&got) {
        assert_eq!(a.token_ids, b.token_ids);
    }
    let params = SamplingParams {
        temperature: 0.7,
        top_p: 0.5,
        min_p: 0.05,
        max_tokens: 12,
        ignore_eos: true,
        seed: Some(2),
        logprob_mode: LogprobMode::Processed,
        ..Default::default()
    };
    let got = generate(&model, None, &prompts, &params, 8).unwrap();
    for c in &got {
        assert!(c.logprobs.iter().all(|&lp| lp <= 1e-6 && lp.is_finite()));
    }
}

#[test]
fn sampling_follows_the_model_distribution() {
    // With one step and many samples, empirical frequencies approach softmax(logits).
    let (_tmp, model, tokenizer) = model_and_tokenizer();
    let prompt = tokenizer.encode("ab", false).unwrap();
    let n = 2000;
    let params = SamplingParams {
        temperature: 0.25,
        max_tokens: 1,
        ignore_eos: true,
        seed: Some(9),
        ..Default::default()
    };
    let got = generate(&model, None, &vec![prompt.clone(); n], &params, 1000).unwrap();
    let ids = Tensor::from_slice(&prompt).view([1, 2]);
    let probs = tch::no_grad(|| model.forward(&ids, None).unwrap())
        .get(0)
        .get(1)
        .divide_scalar(0.25)
        .softmax(-1, Kind::Float);
    let mut counts = vec![0f64; probs.size()[0] as usize];
    for c in &got {
        counts[c.token_ids[0] as usize] += 1.0;
    }
    let empirical = Tensor::from_slice(&counts) / n as f64;
    let probs = probs.to_kind(Kind::Double);
    let tv = 0.5
        * (empirical - &probs)
            .abs()
            .sum(Kind::Double)
            .double_value(&[]);
    let uniform_tv = 0.5
        * (probs - 1.0 / counts.len() as f64)
            .abs()
            .sum(Kind::Double)
            .double_value(&[]);
    eprintln!("TV(samples, model) = {tv:.4}; TV(uniform, model) = {uniform_tv:.4}");
    assert!(
        uniform_tv > 0.2,
        "test distribution too flat to be informative: {uniform_tv}"
    );
    assert!(
        tv < 0.08,
        "total variation {tv} between samples and model distribution"
    );
}

#[test]
fn bad_input_is_rejected() {
    let (_tmp, model, _tokenizer) = model_and_tokenizer();
    let p = SamplingParams::default();
    assert!(generate(&model, None, &[vec![]], &p, 4).is_err());
    assert!(generate(&model, None, &[vec![100_000]], &p, 4).is_err());
    let bad = SamplingParams {
        top_p: 0.0,
        ..Default::default()
    };
    assert!(generate(&model, None, &[vec![5]], &bad, 4).is_err());
    let zero = SamplingParams {
        max_tokens: 0,
        ..Default::default()
    };
    let out = generate(&model, None, &[vec![5]], &zero, 4).unwrap();
    assert!(out[0].token_ids.is_empty());
    assert_eq!(out[0].stop_reason, StopReason::Length);
    let _ = cpu();
}
