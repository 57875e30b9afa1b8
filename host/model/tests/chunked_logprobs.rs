//! The chunked LM head (`forward_logprobs_chunked`, and the checkpointed
//! forward that uses it) against the full-logits path: values and every
//! parameter's gradient, with a temperature and entropy.

mod common;

use std::collections::BTreeMap;

use tch::{Kind, Tensor};

use common::{batch, cpu};
use skyrl_model::{
    init_tiny_model, Arch, CausalLm, LayerCheckpoints, LogprobOptions, TinySize, TokenLogprobs,
};

const TOL: f64 = 1e-5;

const OPTIONS: LogprobOptions = LogprobOptions {
    temperature: 0.7,
    with_entropy: true,
};

/// Outputs and every parameter's gradient.
type Run = (Tensor, Tensor, BTreeMap<String, Tensor>);

/// A loss mixing both outputs with fixed random weights, back-propagated
/// (then through the layers when the forward was checkpointed).
fn run<'m>(
    model: &'m CausalLm,
    forward: impl FnOnce() -> (TokenLogprobs, Option<LayerCheckpoints<'m>>),
) -> Run {
    for (_, p) in model.named_parameters() {
        zero_grad(&p);
    }
    let (out, checkpoints) = forward();
    let entropy = out.entropy.expect("entropy requested");
    tch::manual_seed(11);
    let (w1, w2) = (
        Tensor::randn(out.logprobs.size(), (Kind::Float, tch::Device::Cpu)),
        Tensor::randn(entropy.size(), (Kind::Float, tch::Device::Cpu)),
    );
    ((&out.logprobs * w1).sum(Kind::Float) + (&entropy * w2).sum(Kind::Float)).backward();
    if let Some(c) = checkpoints {
        c.backward().unwrap();
    }
    let grads = model
        .named_parameters()
        .into_iter()
        .map(|(n, p)| (n, p.grad().copy()))
        .collect();
    (out.logprobs.detach(), entropy.detach(), grads)
}

fn zero_grad(p: &Tensor) {
    let mut g = p.grad();
    if g.defined() {
        let _ = g.zero_();
    }
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

fn assert_same(what: &str, a: &Run, b: &Run) {
    let d = max_diff(&a.0, &b.0);
    assert!(d < TOL, "{what}: logprobs differ by {d}");
    let d = max_diff(&a.1, &b.1);
    assert!(d < TOL, "{what}: entropy differs by {d}");
    assert_eq!(a.2.len(), b.2.len());
    for (name, g) in &a.2 {
        let d = max_diff(g, &b.2[name]);
        assert!(d < TOL, "{what}: gradient of {name} differs by {d}");
        assert!(
            g.abs().max().double_value(&[]) > 0.0,
            "{what}: {name} got no gradient"
        );
    }
}

#[test]
fn chunked_head_equals_full_logits_values_and_gradients() {
    let tmp = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 0).unwrap();
    let model = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap();
    let (ids, mask) = batch();
    let full = run(&model, || {
        let out = model.forward_logprobs_with(&ids, &mask, &OPTIONS).unwrap();
        (out, None)
    });
    // 14 scored positions: chunks of 1, 3 (uneven), 14 and the default (one chunk)
    for chunk in [Some(1), Some(3), Some(14), None] {
        let chunked = run(&model, || {
            let out = model
                .forward_logprobs_chunked(&ids, &mask, &OPTIONS, chunk)
                .unwrap();
            (out, None)
        });
        assert_same(&format!("chunk {chunk:?}"), &chunked, &full);
    }
    // trainer.logprobs_chunk_size: 2 rows x 5 positions per chunk (10 + 4 tokens)
    let mut by_positions = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap();
    by_positions.set_logprob_chunk_positions(Some(5));
    let chunked = run(&by_positions, || {
        let out = by_positions
            .forward_logprobs_chunked(&ids, &mask, &OPTIONS, None)
            .unwrap();
        (out, None)
    });
    assert_same("5 positions per row", &chunked, &full);
    // the checkpointed forward's head is the chunked one
    let checkpointed = run(&model, || {
        let (out, checkpoints) = model
            .forward_logprobs_checkpointed(&ids, &mask, &OPTIONS)
            .unwrap();
        (out, Some(checkpoints))
    });
    assert_same("checkpointed", &checkpointed, &full);
}
