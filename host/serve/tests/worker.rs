//! The engine thread coalesces concurrent requests into one decode batch
//! without changing any request's output, and keeps arrival order around
//! weight loads.

use std::time::Duration;

use skyrl_model::{
    init_tiny_model, Arch, CausalLm, InferenceEngine, LoadOptions, SampleStream, SamplingParams,
    TinySize, Tokenizer,
};
use skyrl_serve::{EngineCommand, EngineWorker};
use tokio::sync::oneshot;

fn engine(dir: &std::path::Path) -> InferenceEngine {
    let options = LoadOptions {
        device: tch::Device::Cpu,
        kind: tch::Kind::Float,
    };
    InferenceEngine::new(
        CausalLm::from_pretrained(dir, &options).unwrap(),
        Some(Tokenizer::from_dir(dir).unwrap()),
    )
}

#[test]
fn coalesced_requests_match_solo_runs() {
    let tmp = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 7).unwrap();
    let tok = Tokenizer::from_dir(tmp.path()).unwrap();
    let prompts: Vec<Vec<i64>> = ["a b c", "hello there", "x", "2+2="]
        .iter()
        .map(|t| tok.encode(t, false).unwrap())
        .collect();
    let params = SamplingParams {
        temperature: 1.0,
        max_tokens: 10,
        ignore_eos: true,
        ..Default::default()
    };
    let solo = engine(tmp.path());
    // A long window so all four requests land in one batch.
    let worker = EngineWorker::spawn_with_window(engine(tmp.path()), Duration::from_millis(300));
    let mut replies = Vec::new();
    for (i, p) in prompts.iter().enumerate() {
        let (reply, rx) = oneshot::channel();
        assert!(worker.send(EngineCommand::Generate {
            prompts: vec![p.clone()],
            streams: vec![SampleStream {
                seed: 100 + i as u64,
                index: 0
            }],
            params: params.clone(),
            reply,
        }));
        replies.push(rx);
    }
    for (i, rx) in replies.into_iter().enumerate() {
        let (got, version) = rx.blocking_recv().unwrap().unwrap();
        let want = solo
            .generate_with_streams(
                &prompts[i..i + 1],
                &[SampleStream {
                    seed: 100 + i as u64,
                    index: 0,
                }],
                &params,
            )
            .unwrap();
        assert_eq!(got[0].token_ids, want[0].token_ids, "request {i}");
        assert_eq!(version, 0);
    }
}

#[test]
fn a_bad_request_does_not_fail_its_batch_neighbours() {
    let tmp = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 7).unwrap();
    let worker = EngineWorker::spawn_with_window(engine(tmp.path()), Duration::from_millis(300));
    let params = SamplingParams::greedy(3);
    let mut rxs = Vec::new();
    for p in [vec![1, 2, 3], vec![5, 9_999_999]] {
        let (reply, rx) = oneshot::channel();
        worker.send(EngineCommand::Generate {
            prompts: vec![p],
            streams: SampleStream::sequence(Some(1), 1),
            params: params.clone(),
            reply,
        });
        rxs.push(rx);
    }
    let ok = rxs.remove(0).blocking_recv().unwrap();
    assert_eq!(ok.unwrap().0[0].token_ids.len(), 3);
    let bad = rxs.remove(0).blocking_recv().unwrap().unwrap_err();
    assert!(bad.contains("outside the vocabulary"), "{bad}");
}

#[test]
fn generation_after_a_weight_load_uses_the_new_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &a, 1).unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &b, 2).unwrap();
    let worker = EngineWorker::spawn_with_window(engine(&a), Duration::from_millis(100));
    let params = SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(8)
    };
    let prompt = vec![vec![3, 4, 5]];
    let (load, load_rx) = oneshot::channel();
    let (gen, gen_rx) = oneshot::channel();
    worker.send(EngineCommand::LoadWeights {
        path: b.clone(),
        reply: load,
    });
    worker.send(EngineCommand::Generate {
        prompts: prompt.clone(),
        streams: SampleStream::sequence(Some(1), 1),
        params: params.clone(),
        reply: gen,
    });
    assert_eq!(load_rx.blocking_recv().unwrap().unwrap(), 1);
    let (got, version) = gen_rx.blocking_recv().unwrap().unwrap();
    assert_eq!(version, 1);
    let want = engine(&b).generate(&prompt, &params).unwrap();
    assert_eq!(got[0].token_ids, want[0].token_ids);
}
