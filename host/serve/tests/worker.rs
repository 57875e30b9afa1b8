//! The engine thread's step loop: requests with different settings share the
//! running batch without changing any request's output, a bad request fails
//! alone, streaming requests see every token, pause holds new requests, a
//! client that went away is aborted, and weight loads run between steps.

use std::time::Duration;

use skyrl_model::{
    init_tiny_model, Arch, CausalLm, InferenceEngine, LoadOptions, SampleStream, SamplingParams,
    TinySize, Tokenizer,
};
use skyrl_serve::{EngineCommand, EngineWorker, GenerateError};
use tokio::sync::{mpsc, oneshot};

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

fn tiny() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 7).unwrap();
    tmp
}

type Reply = oneshot::Receiver<Result<(Vec<skyrl_model::Completion>, u64), GenerateError>>;

fn generate(worker: &EngineWorker, prompt: Vec<i64>, seed: u64, params: &SamplingParams) -> Reply {
    let (reply, rx) = oneshot::channel();
    assert!(worker.send(EngineCommand::Generate {
        prompts: vec![prompt],
        streams: vec![SampleStream { seed, index: 0 }],
        params: params.clone(),
        events: None,
        reply,
    }));
    rx
}

#[test]
fn requests_with_different_settings_share_the_batch_and_match_solo_runs() {
    let tmp = tiny();
    let tok = Tokenizer::from_dir(tmp.path()).unwrap();
    let prompts: Vec<Vec<i64>> = ["a b c", "hello there", "x", "2+2="]
        .iter()
        .map(|t| tok.encode(t, false).unwrap())
        .collect();
    let settings = |i: usize| SamplingParams {
        temperature: 0.5 + 0.25 * i as f64,
        top_k: if i == 2 { 5 } else { -1 },
        max_tokens: 6 + i,
        ignore_eos: true,
        ..Default::default()
    };
    let solo = engine(tmp.path());
    let worker = EngineWorker::spawn(engine(tmp.path()));
    let replies: Vec<Reply> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| generate(&worker, p.clone(), 100 + i as u64, &settings(i)))
        .collect();
    for (i, rx) in replies.into_iter().enumerate() {
        let (got, version) = rx.blocking_recv().unwrap().unwrap();
        let stream = SampleStream {
            seed: 100 + i as u64,
            index: 0,
        };
        let want = solo
            .generate_with_streams(&prompts[i..i + 1], &[stream], &settings(i))
            .unwrap();
        assert_eq!(got[0].token_ids, want[0].token_ids, "request {i}");
        assert_eq!(got[0].token_ids.len(), 6 + i);
        assert_eq!(version, 0);
    }
}

#[test]
fn a_bad_request_fails_alone_as_rejected() {
    let tmp = tiny();
    let worker = EngineWorker::spawn(engine(tmp.path()));
    let params = SamplingParams::greedy(3);
    let ok = generate(&worker, vec![1, 2, 3], 1, &params);
    let bad = generate(&worker, vec![5, 9_999_999], 1, &params);
    assert_eq!(ok.blocking_recv().unwrap().unwrap().0[0].token_ids.len(), 3);
    match bad.blocking_recv().unwrap().unwrap_err() {
        GenerateError::Rejected(m) => assert!(m.contains("vocabulary"), "{m}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[test]
fn streamed_tokens_add_up_to_the_completion() {
    let tmp = tiny();
    let worker = EngineWorker::spawn(engine(tmp.path()));
    let params = SamplingParams {
        ignore_eos: true,
        top_logprobs: 2,
        ..SamplingParams::greedy(5)
    };
    let (events, mut rx_events) = mpsc::unbounded_channel();
    let (reply, rx) = oneshot::channel();
    worker.send(EngineCommand::Generate {
        prompts: vec![vec![3, 4, 5], vec![3, 4, 5]],
        streams: SampleStream::sequence(Some(1), 2),
        params,
        events: Some(events),
        reply,
    });
    let (outs, _) = rx.blocking_recv().unwrap().unwrap();
    let mut streamed = vec![Vec::new(); 2];
    let mut finished = [false; 2];
    while let Some(ev) = rx_events.blocking_recv() {
        assert_eq!(
            ev.update.new_top_logprobs.len(),
            ev.update.new_token_ids.len()
        );
        streamed[ev.index].extend(ev.update.new_token_ids);
        finished[ev.index] |= ev.update.finished.is_some();
    }
    assert_eq!(finished, [true, true]);
    for (s, c) in streamed.iter().zip(&outs) {
        assert_eq!(s, &c.token_ids);
        assert_eq!(c.token_ids.len(), 5);
    }
}

#[test]
fn paused_requests_wait_and_abandoned_ones_are_dropped() {
    let tmp = tiny();
    let worker = EngineWorker::spawn(engine(tmp.path()));
    let (pause, rx) = oneshot::channel();
    worker.send(EngineCommand::Pause { reply: pause });
    rx.blocking_recv().unwrap();
    assert!(worker.is_paused());
    let params = SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(4)
    };
    let mut held = generate(&worker, vec![1, 2], 1, &params);
    // A client that gives up while its request is held or running.
    drop(generate(&worker, vec![1, 2, 3], 1, &params));
    std::thread::sleep(Duration::from_millis(200));
    assert!(held.try_recv().is_err(), "nothing runs while paused");
    let (resume, rx) = oneshot::channel();
    worker.send(EngineCommand::Resume { reply: resume });
    rx.blocking_recv().unwrap();
    assert_eq!(
        held.blocking_recv().unwrap().unwrap().0[0].token_ids.len(),
        4
    );
    // A long request whose client leaves does not keep the engine busy.
    let long = SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(3000)
    };
    drop(generate(&worker, vec![1, 2, 3], 1, &long));
    let quick = generate(&worker, vec![4, 5], 1, &params);
    assert_eq!(
        quick.blocking_recv().unwrap().unwrap().0[0].token_ids.len(),
        4
    );
    let (busy_tx, busy_rx) = std::sync::mpsc::channel();
    let (reply, rx) = oneshot::channel();
    worker.send(EngineCommand::WithEngine {
        job: Box::new(move |e| {
            busy_tx.send(e.has_unfinished()).unwrap();
            Ok(false)
        }),
        reply,
    });
    assert_eq!(rx.blocking_recv().unwrap(), Ok(0));
    assert!(
        !busy_rx.recv().unwrap(),
        "the abandoned request was aborted"
    );
}

#[test]
fn generation_after_a_weight_load_uses_the_new_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &a, 1).unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, &b, 2).unwrap();
    let worker = EngineWorker::spawn(engine(&a));
    let params = SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(8)
    };
    let prompt = vec![vec![3, 4, 5]];
    let (load, load_rx) = oneshot::channel();
    worker.send(EngineCommand::LoadWeights {
        path: b.clone(),
        reply: load,
    });
    let gen_rx = generate(&worker, prompt[0].clone(), 1, &params);
    assert_eq!(load_rx.blocking_recv().unwrap().unwrap(), 1);
    let (got, version) = gen_rx.blocking_recv().unwrap().unwrap();
    assert_eq!(version, 1);
    let want = engine(&b).generate(&prompt, &params).unwrap();
    assert_eq!(got[0].token_ids, want[0].token_ids);
}
