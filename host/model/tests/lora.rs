//! LoRA adapters: which layers they select, that only they train, that the
//! merged weights give the adapted model's logits, and that PEFT (the Python
//! package, `$SKYRL_PYTHON`) loads the saved adapter to the same logits.

mod common;

use serde_json::{json, Value};
use tch::{Kind, Tensor};

use common::{cpu, max_abs_diff, perturbed_tiny, run_python};
use skyrl_model::{
    save_checkpoint, Arch, CausalLm, LoraInit, LoraSpec, ModuleSelector, Tokenizer,
    LORA_ADAPTER_DIR,
};

fn spec(rank: i64, targets: ModuleSelector) -> LoraSpec {
    LoraSpec {
        rank,
        alpha: 16.0,
        dropout: 0.0,
        target_modules: targets,
        exclude_modules: None,
        init: LoraInit::Kaiming,
        seed: 7,
        base_model_name_or_path: Some("tiny".into()),
    }
}

fn names(list: &[&str]) -> ModuleSelector {
    ModuleSelector::Names(list.iter().map(|s| s.to_string()).collect())
}

fn batch() -> (Tensor, Tensor) {
    let ids: Vec<i64> = (0..2 * 12).map(|i| 3 + (i * 7) % 90).collect();
    let mask: Vec<i64> = [vec![1; 12], [vec![0; 3], vec![1; 9]].concat()].concat();
    (
        Tensor::from_slice(&ids).view([2, 12]),
        Tensor::from_slice(&mask).view([2, 12]),
    )
}

/// Gives every `lora_B` random values, so the adapters change the model.
fn randomise_b(model: &CausalLm) {
    tch::manual_seed(3);
    tch::no_grad(|| {
        for (name, mut t) in model.trainable_parameters() {
            if name.contains("lora_B") {
                t.copy_(&(Tensor::randn_like(&t) * 0.05));
            }
        }
    });
}

#[test]
fn targets_select_layers_as_peft_does() {
    let tmp = tempfile::tempdir().unwrap();
    let layers = |targets: ModuleSelector, exclude: Option<ModuleSelector>| {
        let mut model = perturbed_tiny(Arch::Qwen2, tmp.path(), 1);
        let mut s = spec(4, targets);
        s.exclude_modules = exclude;
        model
            .attach_lora(s)
            .map(|_| model.lora().unwrap().modules().to_vec())
    };
    let n_layers = 2;
    assert_eq!(
        layers(ModuleSelector::AllLinear, None).unwrap().len(),
        7 * n_layers
    );
    let qv = layers(names(&["q_proj", "v_proj"]), None).unwrap();
    assert_eq!(qv.len(), 2 * n_layers);
    assert!(qv
        .iter()
        .all(|m| m.ends_with("q_proj") || m.ends_with("v_proj")));
    let regex = layers(ModuleSelector::Regex(r".*\.0\.mlp\..*".into()), None).unwrap();
    assert_eq!(
        regex,
        vec![
            "model.layers.0.mlp.down_proj",
            "model.layers.0.mlp.gate_proj",
            "model.layers.0.mlp.up_proj"
        ]
    );
    let excluded = layers(ModuleSelector::AllLinear, Some(names(&["o_proj"]))).unwrap();
    assert_eq!(excluded.len(), 6 * n_layers);

    let err = |targets| layers(targets, None).unwrap_err().to_string();
    assert!(
        err(names(&["lm_head"])).contains("does not adapt"),
        "{}",
        err(names(&["lm_head"]))
    );
    assert!(err(names(&["qproj"])).contains("matches no module"));
    assert!(err(ModuleSelector::Regex("nothing".into())).contains("select none"));
    assert!(err(ModuleSelector::Regex("(".into())).contains("not a regex"));
    let mut zero = spec(0, ModuleSelector::AllLinear);
    zero.rank = 0;
    let mut model = perturbed_tiny(Arch::Qwen2, tmp.path(), 1);
    assert!(model
        .attach_lora(zero)
        .unwrap_err()
        .to_string()
        .contains("rank"));
}

#[test]
fn fresh_adapters_change_nothing_and_merged_weights_equal_the_adapted_model() {
    let tmp = tempfile::tempdir().unwrap();
    let mut model = perturbed_tiny(Arch::Qwen2, tmp.path(), 2);
    let (ids, mask) = batch();
    let before = tch::no_grad(|| model.forward(&ids, Some(&mask)).unwrap());
    model
        .attach_lora(spec(4, ModuleSelector::AllLinear))
        .unwrap();
    let fresh = tch::no_grad(|| model.forward(&ids, Some(&mask)).unwrap());
    assert_eq!(max_abs_diff(&before, &fresh), 0.0);

    randomise_b(&model);
    let adapted = tch::no_grad(|| model.forward(&ids, Some(&mask)).unwrap());
    assert!(
        max_abs_diff(&before, &adapted) > 1e-3,
        "adapters had no effect"
    );
    let mut plain = CausalLm::new(model.config().clone(), &cpu(), 0).unwrap();
    plain.copy_weights_from(&model).unwrap();
    let merged = tch::no_grad(|| plain.forward(&ids, Some(&mask)).unwrap());
    let diff = max_abs_diff(&adapted, &merged);
    assert!(
        diff < 1e-5,
        "merged model differs from the adapted one by {diff}"
    );
}

#[test]
fn only_adapters_get_gradients() {
    let tmp = tempfile::tempdir().unwrap();
    let mut model = perturbed_tiny(Arch::Qwen2, tmp.path(), 3);
    model
        .attach_lora(spec(2, names(&["q_proj", "down_proj"])))
        .unwrap();
    randomise_b(&model);
    let (ids, mask) = batch();
    for checkpointed in [false, true] {
        for (_, mut t) in model.trainable_parameters() {
            t.zero_grad();
        }
        let lp = if checkpointed {
            let (out, ckpt) = model
                .forward_logprobs_checkpointed(&ids, &mask, &Default::default())
                .unwrap();
            out.logprobs.sum(Kind::Float).backward();
            ckpt.backward().unwrap();
            None
        } else {
            let lp = model.forward_logprobs(&ids, &mask).unwrap();
            lp.sum(Kind::Float).backward();
            Some(lp)
        };
        drop(lp);
        for (name, t) in model.named_parameters() {
            assert!(!t.requires_grad(), "{name} is trainable");
            assert!(!t.grad().defined(), "{name} got a gradient");
        }
        let trainable = model.trainable_parameters();
        assert_eq!(trainable.len(), 2 * 2 * 2);
        for (name, t) in trainable {
            let g = t.grad();
            assert!(
                g.defined(),
                "{name} got no gradient (checkpointed: {checkpointed})"
            );
            assert!(
                g.abs().sum(Kind::Float).double_value(&[]) > 0.0,
                "{name}: zero gradient"
            );
        }
    }
}

#[test]
fn dropout_is_active_only_in_training_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let mut model = perturbed_tiny(Arch::Qwen2, tmp.path(), 4);
    let mut s = spec(4, ModuleSelector::AllLinear);
    s.dropout = 0.5;
    model.attach_lora(s).unwrap();
    randomise_b(&model);
    let (ids, mask) = batch();
    let eval = || tch::no_grad(|| model.forward(&ids, Some(&mask)).unwrap());
    assert_eq!(max_abs_diff(&eval(), &eval()), 0.0);
    let (a, b) = model.with_training(|| (eval(), eval()));
    assert_eq!(max_abs_diff(&eval(), &eval()), 0.0, "dropout stayed on");
    assert!(
        max_abs_diff(&a, &b) > 0.0,
        "dropout did not act while training"
    );
}

/// Our adapter, loaded by PEFT onto the transformers model, gives our logits;
/// PEFT's merge and our merged export agree too; and our loader reads the
/// adapter back to the same logits.
#[test]
fn peft_loads_the_saved_adapter_to_the_same_logits() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let export = tmp.path().join("export");
    let init = tmp.path().join("init");
    let model = perturbed_tiny(Arch::Qwen2, &init, 5);
    let tokenizer = Tokenizer::from_dir(&init).unwrap();
    save_checkpoint(&model, Some(&tokenizer), &base).unwrap();
    let mut model = CausalLm::from_pretrained(&base, &cpu()).unwrap();
    let mut s = spec(
        4,
        names(&["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"]),
    );
    s.alpha = 8.0;
    model.attach_lora(s).unwrap();
    randomise_b(&model);
    save_checkpoint(&model, Some(&tokenizer), &export).unwrap();
    let adapter = export.join(LORA_ADAPTER_DIR);
    let config: Value = serde_json::from_str(
        &std::fs::read_to_string(adapter.join("adapter_config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        config["target_modules"],
        json!(["k_proj", "o_proj", "q_proj", "up_proj", "v_proj"])
    );

    let (ids, mask) = batch();
    let ours = tch::no_grad(|| model.forward(&ids, Some(&mask)).unwrap());
    let work = tmp.path().join("io");
    std::fs::create_dir_all(&work).unwrap();
    let request = work.join("request.json");
    let out = work.join("out.json");
    let rows = |t: &Tensor| Vec::<Vec<i64>>::try_from(t).unwrap();
    std::fs::write(
        &request,
        json!({"input_ids": rows(&ids), "attention_mask": rows(&mask)}).to_string(),
    )
    .unwrap();
    run_python(
        "peft_reference.py",
        &[&base, &adapter, &export, &request, &out],
    );
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(reference["r"], json!(4));
    assert_eq!(reference["modules"].as_array().unwrap().len(), 5 * 2);
    let real = mask.to_kind(Kind::Bool).unsqueeze(-1).expand_as(&ours);
    for key in ["adapted", "peft_merged", "exported"] {
        let rows: Vec<Vec<Vec<f32>>> = serde_json::from_value(reference[key].clone()).unwrap();
        let flat: Vec<f32> = rows.into_iter().flatten().flatten().collect();
        let want = Tensor::from_slice(&flat).view_as(&ours);
        let diff = max_abs_diff(&ours.masked_select(&real), &want.masked_select(&real));
        eprintln!("max |ours - {key}| = {diff:e}");
        assert!(diff < 1e-4, "{key}: logits differ by {diff}");
    }

    let mut reloaded = CausalLm::from_pretrained(&base, &cpu()).unwrap();
    reloaded.load_lora_adapter(&adapter).unwrap();
    let again = tch::no_grad(|| reloaded.forward(&ids, Some(&mask)).unwrap());
    assert_eq!(max_abs_diff(&ours, &again), 0.0);
}

/// At `B = 0` the chain rule fixes the adapters' gradients from the full
/// model's: `dL/dB = s · dL/dW · Aᵀ` and `dL/dA = 0`, for every adapted layer.
#[test]
fn adapter_gradients_follow_the_full_weight_gradient() {
    let tmp = tempfile::tempdir().unwrap();
    let full = perturbed_tiny(Arch::Qwen2, tmp.path(), 6);
    let mut lora = CausalLm::new(full.config().clone(), &cpu(), 0).unwrap();
    lora.copy_weights_from(&full).unwrap();
    let s = spec(4, names(&["q_proj", "gate_proj"]));
    let scaling = s.scaling();
    lora.attach_lora(s).unwrap();
    let (ids, mask) = batch();
    full.forward_logprobs(&ids, &mask)
        .unwrap()
        .sum(Kind::Float)
        .backward();
    lora.forward_logprobs(&ids, &mask)
        .unwrap()
        .sum(Kind::Float)
        .backward();
    let full_grads: std::collections::HashMap<String, Tensor> = full
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (n, t.grad()))
        .collect();
    let adapters: std::collections::HashMap<String, Tensor> =
        lora.trainable_parameters().into_iter().collect();
    let mut checked = 0;
    for module in lora.lora().unwrap().modules() {
        let key = format!("base_model.model.{module}");
        let a = &adapters[&format!("{key}.lora_A.weight")];
        let b = &adapters[&format!("{key}.lora_B.weight")];
        let g_w = &full_grads[&format!("{module}.weight")];
        let want_b = g_w.matmul(&a.detach().tr()) * scaling;
        let diff = max_abs_diff(&b.grad(), &want_b);
        let scale = want_b.abs().max().double_value(&[]);
        assert!(scale > 0.0, "{module}: zero full-weight gradient");
        assert!(
            diff <= 1e-5 * scale.max(1.0),
            "{module}: dL/dB off by {diff}"
        );
        assert_eq!(a.grad().abs().max().double_value(&[]), 0.0);
        checked += 1;
    }
    assert_eq!(checked, 2 * 2);
}
