//! The in-process engine decodes concurrent requests together without
//! changing any request's output.

use skyrl_inference::local::LocalEngine;
use skyrl_model::{
    init_tiny_model, Arch, CausalLm, InferenceEngine, LoadOptions, SampleStream, SamplingParams,
    TinySize, Tokenizer,
};
use std::sync::atomic::AtomicU64;

/// Same tokens; logprobs equal up to float noise from different padding.
fn same(got: &[skyrl_model::Completion], want: &[skyrl_model::Completion]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.token_ids, w.token_ids);
        for (x, y) in g.logprobs.iter().zip(&w.logprobs) {
            assert!((x - y).abs() < 1e-4, "{x} vs {y}");
        }
    }
}

#[test]
fn concurrent_requests_share_one_decode_batch_and_keep_their_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 2).unwrap();
    let options = LoadOptions {
        device: tch::Device::Cpu,
        kind: tch::Kind::Float,
    };
    let engine = || {
        InferenceEngine::new(
            CausalLm::from_pretrained(tmp.path(), &options).unwrap(),
            Some(Tokenizer::from_dir(tmp.path()).unwrap()),
        )
    };
    let solo = engine();
    let local = LocalEngine::new(engine());
    let version = AtomicU64::new(7);
    let params = SamplingParams {
        temperature: 1.0,
        max_tokens: 8,
        ignore_eos: true,
        ..Default::default()
    };
    let a = (
        vec![vec![3, 4, 5]],
        vec![SampleStream { seed: 1, index: 0 }],
    );
    let b = (
        vec![vec![9, 8], vec![7]],
        SampleStream::sequence(Some(2), 2),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (ra, rb) = rt.block_on(async {
        tokio::join!(
            local.generate(&a.0, &a.1, &params, &version),
            local.generate(&b.0, &b.1, &params, &version)
        )
    });
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(
        local.busy_periods(),
        1,
        "both requests in one running batch"
    );
    assert_eq!((ra.1, rb.1), (7, 7));
    let want_a = solo.generate_with_streams(&a.0, &a.1, &params).unwrap();
    let want_b = solo.generate_with_streams(&b.0, &b.1, &params).unwrap();
    same(&ra.0, &want_a);
    same(&rb.0, &want_b);
    // A bad request fails alone.
    let bad = (vec![vec![1_000_000]], SampleStream::sequence(Some(3), 1));
    let (ok, err) = rt.block_on(async {
        tokio::join!(
            local.generate(&a.0, &a.1, &params, &version),
            local.generate(&bad.0, &bad.1, &params, &version)
        )
    });
    same(&ok.unwrap().0, &want_a);
    assert!(err
        .unwrap_err()
        .to_string()
        .contains("outside the vocabulary"));
}
