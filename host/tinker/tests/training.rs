//! The training model alone: accumulated gradients, AdamW steps, losses.

use skyrl_model::{init_tiny_model, Arch, LoadOptions, TinySize};
use skyrl_tinker::loss::LossFn;
use skyrl_tinker::training::{AdamStep, DatumInput, TrainingModel};

fn cpu() -> LoadOptions {
    LoadOptions {
        device: tch::Device::Cpu,
        kind: tch::Kind::Float,
    }
}

fn datum() -> DatumInput {
    let toks = [5i64, 9, 12, 20, 33, 40, 41, 42, 50, 60];
    DatumInput {
        tokens: toks[..9].to_vec(),
        targets: toks[1..].to_vec(),
        weights: vec![1.0; 9],
        sampler_logprobs: vec![],
        advantages: vec![],
    }
}

fn adam(lr: f64) -> AdamStep {
    AdamStep {
        learning_rate: lr,
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-12,
        weight_decay: 0.0,
        grad_clip_norm: 0.0,
    }
}

#[test]
fn lora_and_full_models_learn_a_sequence() {
    let dir = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, dir.path(), 0).unwrap();
    for rank in [8, 0] {
        let mut m = TrainingModel::new(dir.path(), "tiny", rank, 1, &cpu()).unwrap();
        let mut losses = Vec::new();
        for _ in 0..10 {
            let out = m.pass(&[datum()], LossFn::CrossEntropy, true).unwrap();
            losses.push(out.loss);
            m.optim_step(&adam(4e-3));
        }
        assert!(losses[9] < 0.8 * losses[0], "rank {rank}: {losses:?}");
    }
}

/// The chunked target log-probs equal a full log-softmax of the logits.
#[test]
fn target_logprobs_match_the_full_softmax() {
    let dir = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, dir.path(), 0).unwrap();
    let model = skyrl_model::CausalLm::from_pretrained(dir.path(), &cpu()).unwrap();
    let d = datum();
    let ids = tch::Tensor::from_slice(&d.tokens).view([1, -1]);
    let targets = tch::Tensor::from_slice(&d.targets).view([1, -1]);
    let mask = ids.ones_like();
    let chunked = model.target_logprobs(&ids, &mask, &targets).unwrap();
    let full = model
        .forward(&ids, Some(&mask))
        .unwrap()
        .log_softmax(-1, tch::Kind::Float)
        .gather(-1, &targets.unsqueeze(-1), false)
        .squeeze_dim(-1);
    let diff = (chunked - full).abs().max().double_value(&[]);
    assert!(diff < 1e-5, "{diff}");
    assert!(model
        .target_logprobs(&ids, &mask, &targets.narrow(1, 0, 3))
        .is_err());
}
