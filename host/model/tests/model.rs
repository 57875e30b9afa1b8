//! Load/save, weight copies and the training-side API.

mod common;

use tch::nn::OptimizerConfig;
use tch::{nn, Kind, Tensor};

use common::{batch, cpu, max_abs_diff, perturbed_tiny};
use skyrl_model::{
    init_tiny_model, save_checkpoint, Arch, CausalLm, LogprobOptions, ModelConfig, TinySize,
    Tokenizer,
};

#[test]
fn save_and_reload_round_trips_including_shards() {
    let tmp = tempfile::tempdir().unwrap();
    let model = perturbed_tiny(Arch::Llama, &tmp.path().join("a"), 3);
    let tokenizer = Tokenizer::from_dir(tmp.path().join("a")).unwrap();
    let (ids, mask) = batch();
    let want = tch::no_grad(|| model.forward(&ids, Some(&mask)).unwrap());

    let single = tmp.path().join("single");
    save_checkpoint(&model, Some(&tokenizer), &single).unwrap();
    assert!(single.join("model.safetensors").is_file());
    assert!(single.join("tokenizer.json").is_file());
    let back = CausalLm::from_pretrained(&single, &cpu()).unwrap();
    assert_eq!(
        max_abs_diff(
            &tch::no_grad(|| back.forward(&ids, Some(&mask)).unwrap()),
            &want
        ),
        0.0
    );

    let sharded = tmp.path().join("sharded");
    std::fs::create_dir(&sharded).unwrap();
    model.write_into(&sharded, 40_000).unwrap();
    assert!(sharded.join("model.safetensors.index.json").is_file());
    assert!(!sharded.join("model.safetensors").exists());
    let back = CausalLm::from_pretrained(&sharded, &cpu()).unwrap();
    assert_eq!(
        max_abs_diff(
            &tch::no_grad(|| back.forward(&ids, Some(&mask)).unwrap()),
            &want
        ),
        0.0
    );

    // Saving over an existing checkpoint keeps its tokenizer files.
    model.save_pretrained(&single).unwrap();
    assert!(single.join("tokenizer_config.json").is_file());
    assert!(!tmp.path().read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with(".single")));
}

#[test]
fn init_is_seeded_and_sizes_differ() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, seed) in [("a", 1), ("b", 1), ("c", 2)] {
        init_tiny_model(Arch::Qwen2, TinySize::Tiny, &tmp.path().join(name), seed).unwrap();
    }
    let read = |n: &str| std::fs::read(tmp.path().join(n).join("model.safetensors")).unwrap();
    assert_eq!(read("a"), read("b"));
    assert_ne!(read("a"), read("c"));
    init_tiny_model(Arch::Llama, TinySize::Small, &tmp.path().join("s"), 0).unwrap();
    let small = CausalLm::from_pretrained(tmp.path().join("s"), &cpu()).unwrap();
    let tiny = CausalLm::from_pretrained(tmp.path().join("a"), &cpu()).unwrap();
    assert_eq!(small.config().hidden_size, 256);
    assert_eq!(small.config().num_hidden_layers, 4);
    assert_eq!(tiny.config().hidden_size, 64);
    assert!(tiny.config().tie_word_embeddings && !small.config().tie_word_embeddings);
    assert!(small.num_parameters() > 10 * tiny.num_parameters());
}

#[test]
fn copy_weights_and_clone_give_identical_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let model = perturbed_tiny(Arch::Qwen2, &tmp.path().join("m"), 4);
    let (ids, mask) = batch();
    let want = tch::no_grad(|| model.forward(&ids, Some(&mask)).unwrap());
    let clone = model.try_clone(&cpu()).unwrap();
    assert_eq!(
        max_abs_diff(
            &tch::no_grad(|| clone.forward(&ids, Some(&mask)).unwrap()),
            &want
        ),
        0.0
    );
    let mut other = CausalLm::from_pretrained(tmp.path().join("m"), &cpu()).unwrap();
    assert!(
        max_abs_diff(
            &tch::no_grad(|| other.forward(&ids, Some(&mask)).unwrap()),
            &want
        ) > 1e-3
    );
    other.copy_weights_from(&model).unwrap();
    assert_eq!(
        max_abs_diff(
            &tch::no_grad(|| other.forward(&ids, Some(&mask)).unwrap()),
            &want
        ),
        0.0
    );
    // A clone is independent: training the original leaves it unchanged.
    tch::no_grad(|| {
        for (_, mut v) in model.var_store().variables() {
            let _ = v.g_mul_scalar_(0.5);
        }
    });
    assert_eq!(
        max_abs_diff(
            &tch::no_grad(|| clone.forward(&ids, Some(&mask)).unwrap()),
            &want
        ),
        0.0
    );
    // Mismatched shapes are an error.
    let tmp2 = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Small, tmp2.path(), 0).unwrap();
    let mut small = CausalLm::from_pretrained(tmp2.path(), &cpu()).unwrap();
    assert!(small.copy_weights_from(&model).is_err());
}

#[test]
fn forward_logprobs_trains_and_reports_entropy() {
    let tmp = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 0).unwrap();
    let model = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap();
    let (ids, mask) = batch();
    let target_mask = mask.narrow(1, 1, 7).to_kind(Kind::Float);
    let mut opt = nn::Adam::default().build(model.var_store(), 1e-2).unwrap();
    let mut losses = Vec::new();
    for _ in 0..30 {
        let out = model
            .forward_logprobs_with(
                &ids,
                &mask,
                &LogprobOptions {
                    temperature: 1.0,
                    with_entropy: true,
                },
            )
            .unwrap();
        assert_eq!(out.logprobs.size(), vec![2, 7]);
        let entropy = out.entropy.unwrap();
        assert!(entropy.min().double_value(&[]) >= 0.0);
        assert!(entropy.max().double_value(&[]) <= (99f64).ln() + 1e-4);
        let loss = -(out.logprobs * &target_mask).sum(Kind::Float) / target_mask.sum(Kind::Float);
        losses.push(loss.double_value(&[]));
        opt.backward_step(&loss);
    }
    assert!(
        losses[29] < 0.5 * losses[0],
        "loss did not drop: {losses:?}"
    );
    // Temperature scaling changes the log-probs.
    let t1 = tch::no_grad(|| model.forward_logprobs(&ids, &mask).unwrap());
    let t2 = tch::no_grad(|| {
        model
            .forward_logprobs_with(
                &ids,
                &mask,
                &LogprobOptions {
                    temperature: 2.0,
                    with_entropy: false,
                },
            )
            .unwrap()
            .logprobs
    });
    assert!(max_abs_diff(&t1, &t2) > 1e-3);
}

#[test]
fn bad_checkpoints_and_inputs_give_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let err = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap_err();
    assert!(err.to_string().contains("config.json"), "{err}");

    init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 0).unwrap();
    let mut config = ModelConfig::load(tmp.path()).unwrap();
    config.hidden_size = 96;
    config.head_dim = None;
    config.save(tmp.path()).unwrap();
    let err = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap_err();
    assert!(err.to_string().contains("shape"), "{err}");

    config.hidden_act = "gelu".into();
    config.save(tmp.path()).unwrap();
    let err = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap_err();
    assert!(err.to_string().contains("hidden_act"), "{err}");

    let tmp = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Llama, TinySize::Tiny, tmp.path(), 0).unwrap();
    let model = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap();
    let ids = Tensor::from_slice(&[1i64, 500]).view([1, 2]);
    assert!(model.forward(&ids, None).is_err());
    let short = Tensor::from_slice(&[1i64]).view([1, 1]);
    assert!(model.forward_logprobs(&short, &short.ones_like()).is_err());
    std::fs::remove_file(tmp.path().join("model.safetensors")).unwrap();
    let err = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap_err();
    assert!(err.to_string().contains("model.safetensors"), "{err}");
}

#[test]
fn bfloat16_weights_run_close_to_fp32() {
    let tmp = tempfile::tempdir().unwrap();
    let model = perturbed_tiny(Arch::Qwen2, &tmp.path().join("m"), 8);
    let bf16 = model
        .try_clone(&skyrl_model::LoadOptions {
            device: tch::Device::Cpu,
            kind: Kind::BFloat16,
        })
        .unwrap();
    assert_eq!(bf16.kind(), Kind::BFloat16);
    let (ids, mask) = batch();
    let a = tch::no_grad(|| model.forward_logprobs(&ids, &mask).unwrap());
    let b = tch::no_grad(|| bf16.forward_logprobs(&ids, &mask).unwrap());
    assert_eq!(b.kind(), Kind::Float);
    let diff = max_abs_diff(&a, &b);
    assert!(diff < 0.1, "bf16 log-probs differ by {diff}");
    // Saved in bf16, reloaded as fp32 without loss of the bf16 values.
    let dir = tmp.path().join("bf16");
    bf16.save_pretrained(&dir).unwrap();
    let config = ModelConfig::load(&dir).unwrap();
    assert_eq!(config.torch_dtype.as_deref(), Some("bfloat16"));
    let back = CausalLm::from_pretrained(&dir, &cpu()).unwrap();
    let c = tch::no_grad(|| back.forward_logprobs(&ids, &mask).unwrap());
    assert!(max_abs_diff(&b, &c) < 0.05);
}

#[test]
fn model_and_engine_can_move_to_another_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<CausalLm>();
    assert_send::<skyrl_model::InferenceEngine>();
    assert_send::<Tokenizer>();
    let tmp = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 0).unwrap();
    let (model, tokenizer) = skyrl_model::load_pretrained(tmp.path(), &cpu()).unwrap();
    let engine = skyrl_model::InferenceEngine::new(model, Some(tokenizer));
    let out = std::thread::spawn(move || {
        engine
            .generate(&[vec![5, 6, 7]], &skyrl_model::SamplingParams::greedy(3))
            .unwrap()
    })
    .join()
    .unwrap();
    assert!(!out[0].token_ids.is_empty());
}

#[test]
fn loaded_weights_are_private_to_the_model_and_missing_ones_are_named() {
    // `from_pretrained` maps the file copy-on-write: updating a loaded model must
    // change neither the file nor another model loaded from it.
    let tmp = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, tmp.path(), 0).unwrap();
    let file = tmp.path().join("model.safetensors");
    let bytes = std::fs::read(&file).unwrap();
    let a = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap();
    let b = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap();
    let (ids, mask) = batch();
    let before = tch::no_grad(|| b.forward(&ids, Some(&mask)).unwrap());
    let mut opt = nn::Adam::default().build(a.var_store(), 1e-2).unwrap();
    for _ in 0..2 {
        let loss = -a.forward_logprobs(&ids, &mask).unwrap().mean(Kind::Float);
        opt.backward_step(&loss);
    }
    let a_out = tch::no_grad(|| a.forward(&ids, Some(&mask)).unwrap());
    assert!(
        max_abs_diff(&a_out, &before) > 1e-3,
        "training changed nothing"
    );
    let after = tch::no_grad(|| b.forward(&ids, Some(&mask)).unwrap());
    assert_eq!(max_abs_diff(&after, &before), 0.0);
    assert!(
        std::fs::read(&file).unwrap() == bytes,
        "the checkpoint file changed"
    );
    drop((a, b, opt));

    // A checkpoint without one of the model's tensors is refused by name.
    let model = CausalLm::from_pretrained(tmp.path(), &cpu()).unwrap();
    let kept: Vec<(String, Tensor)> = skyrl_model::weights::read_weights(tmp.path())
        .unwrap()
        .into_iter()
        .filter(|(name, _)| name != "model.norm.weight")
        .collect();
    let partial = tmp.path().join("partial");
    std::fs::create_dir(&partial).unwrap();
    model.config().save(&partial).unwrap();
    skyrl_model::weights::write_weights(&partial, &kept, usize::MAX).unwrap();
    let err = CausalLm::from_pretrained(&partial, &cpu()).unwrap_err();
    assert!(err.to_string().contains("model.norm.weight"), "{err}");
}
