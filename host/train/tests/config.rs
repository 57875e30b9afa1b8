//! Config loading: defaults, YAML files, dotted overrides, unknown keys, validation.

use std::path::PathBuf;

use skyrl_train::algorithms::{AdvantageEstimatorRegistry, PolicyLossRegistry};
use skyrl_train::config::{load_config, load_config_str, ConfigError, SkyrlConfig};

fn ov(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn defaults_mirror_skyrl() {
    let c = load_config(None, &[]).unwrap();
    let t = &c.trainer;
    assert_eq!(
        (t.epochs, t.seed, t.eval_interval, t.ckpt_interval),
        (1, 42, 5, 10)
    );
    assert_eq!(
        (
            t.train_batch_size,
            t.policy_mini_batch_size,
            t.max_prompt_length
        ),
        (1024, 256, 512)
    );
    let o = &t.policy.optimizer_config;
    assert_eq!(
        (o.lr, o.adam_betas, o.weight_decay, o.max_grad_norm),
        (1e-6, [0.9, 0.999], 0.01, 1.0)
    );
    assert_eq!(o.scheduler, "constant_with_warmup");
    let a = &t.algorithm;
    assert_eq!(a.advantage_estimator, "grpo");
    assert_eq!(
        (a.eps_clip_low, a.eps_clip_high, a.clip_ratio_c),
        (0.2, 0.2, 3.0)
    );
    assert_eq!(
        (a.kl_estimator_type.as_str(), a.kl_loss_coef, a.use_kl_loss),
        ("k3", 0.001, true)
    );
    assert_eq!(a.loss_reduction, "token_mean");
    let g = &c.generator;
    assert_eq!((g.n_samples_per_prompt, g.max_turns), (5, 1));
    let s = &g.sampling_params;
    assert_eq!(
        (
            s.max_generate_length,
            s.temperature,
            s.top_p,
            s.top_k,
            s.min_p
        ),
        (1024, 1.0, 1.0, -1, 0.0)
    );
    // derived defaults
    assert_eq!(g.max_input_length, Some(512));
    assert_eq!(g.eval_sampling_params.as_ref().unwrap().temperature, 0.0);
    assert_eq!(a.temperature, Some(1.0));
    assert_eq!(a.max_seq_len, Some(512 + 1024));
    assert_eq!(t.reference.model, t.policy.model);
}

#[test]
fn shipped_configs_load() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("sft_") {
            // SFT configs are a tree of their own (`skyrl sft`).
            skyrl_train::sft::load_sft_config(Some(&p), &[])
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            continue;
        }
        if p.extension().is_some_and(|e| e == "yaml") {
            let c = load_config(Some(&p), &[]).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let names_ok = c.validate_names(
                &AdvantageEstimatorRegistry::with_defaults(),
                &PolicyLossRegistry::with_defaults(),
            );
            names_ok.unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            n += 1;
        }
    }
    assert!(n >= 2, "expected demo.yaml and gsm8k.yaml");
}

#[test]
fn overrides_parse_yaml_scalars_and_create_sections() {
    let c = load_config_str(
        "trainer:\n  epochs: 2\n",
        "inline",
        &ov(&[
            "trainer.epochs=3",
            "trainer.policy.optimizer_config.lr=1e-5",
            "trainer.policy.optimizer_config.adam_betas=[0.8, 0.9]",
            "generator.sampling_params.stop=['</answer>', '\\n\\n']",
            "trainer.algorithm.off_policy_correction.tis_ratio_type=token",
            "trainer.resume_mode=null",
            "+environment.skyrl_gym.gsm8k.strict=true",
            "trainer.run_name=run with spaces",
        ]),
    )
    .unwrap();
    assert_eq!(c.trainer.epochs, 3);
    assert_eq!(c.trainer.policy.optimizer_config.lr, 1e-5);
    assert_eq!(c.trainer.policy.optimizer_config.adam_betas, [0.8, 0.9]);
    assert_eq!(
        c.generator.sampling_params.stop.as_deref().unwrap()[0],
        "</answer>"
    );
    assert_eq!(
        c.trainer
            .algorithm
            .off_policy_correction
            .tis_ratio_type
            .as_deref(),
        Some("token")
    );
    assert_eq!(c.trainer.resume_mode, None);
    assert_eq!(
        c.environment.skyrl_gym.envs["gsm8k"]["strict"],
        serde_json::json!(true)
    );
    assert_eq!(c.trainer.run_name, "run with spaces");
}

#[test]
fn unknown_keys_are_errors_naming_the_path() {
    let e = load_config_str(
        "trainer:\n  algorithm:\n    eps_clip: 0.3\n",
        "file.yaml",
        &[],
    )
    .unwrap_err();
    let msg = e.to_string();
    println!("{msg}");
    assert!(matches!(e, ConfigError::Key { .. }), "{msg}");
    assert!(
        msg.contains("trainer.algorithm") && msg.contains("eps_clip") && msg.contains("file.yaml"),
        "{msg}"
    );

    let e = load_config_str("", "x", &ov(&["generator.sampling_params.temprature=0.5"]))
        .unwrap_err()
        .to_string();
    println!("{e}");
    assert!(
        e.contains("temprature") && e.contains("from override"),
        "{e}"
    );

    let e = load_config_str("", "x", &ov(&["trainer.epochs=many"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("trainer.epochs"), "{e}");

    let e = load_config_str("", "x", &ov(&["trainer.epochs"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("key.sub=value"), "{e}");
    let e = load_config_str("", "x", &ov(&["trainer..epochs=1"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("malformed key"), "{e}");
    let e = load_config_str("", "x", &ov(&["trainer.epochs.x=1"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not a mapping") || e.contains("trainer.epochs"),
        "{e}"
    );
    let e = load_config_str("trainer: [1, 2", "bad.yaml", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.yaml") && e.contains("invalid YAML"), "{e}");
}

#[test]
fn validation_reports_every_problem() {
    let e = load_config_str(
        "",
        "x",
        &ov(&[
            "trainer.train_batch_size=10",
            "trainer.policy_mini_batch_size=4",
            "trainer.algorithm.use_kl_in_reward=true",
            "trainer.algorithm.advantage_estimator=gae",
            "trainer.algorithm.loss_reduction=mean",
            "trainer.resume_mode=from_path",
            "trainer.logprobs_chunk_size=0",
        ]),
    )
    .unwrap_err();
    let ConfigError::Invalid(problems) = &e else {
        panic!("{e}")
    };
    let all = problems.join("\n");
    println!("{e}");
    for needle in [
        "divisible by trainer.policy_mini_batch_size",
        "mutually exclusive",
        "loss_reduction `mean`",
        "resume_path",
        "trainer.logprobs_chunk_size must be a positive integer",
    ] {
        assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
    }
}

#[test]
fn deprecated_tis_keys_migrate_and_config_round_trips() {
    let c = load_config_str(
        "",
        "x",
        &ov(&[
            "trainer.algorithm.use_tis=true",
            "trainer.algorithm.tis_imp_ratio_cap=3.0",
        ]),
    )
    .unwrap();
    let opc = &c.trainer.algorithm.off_policy_correction;
    assert_eq!(opc.tis_ratio_type.as_deref(), Some("token"));
    assert_eq!(opc.token_tis_ratio_clip_high, 3.0);
    let yaml = serde_norway::to_string(&c).unwrap();
    let back = load_config_str(&yaml, "roundtrip", &[]).unwrap();
    assert_eq!(back, c);
    let _: SkyrlConfig = back;
}

#[test]
fn unknown_registry_names_are_reported() {
    let c = load_config_str("", "x", &ov(&["trainer.algorithm.policy_loss_type=ppo2"])).unwrap();
    let e = c
        .validate_names(
            &AdvantageEstimatorRegistry::with_defaults(),
            &PolicyLossRegistry::with_defaults(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("policy_loss_type") && e.contains("ppo2") && e.contains("regular"),
        "{e}"
    );
}

/// Generator keys skyrl-train honours: each is passed on, or refused by name
/// where this trainer cannot do what it asks.
#[test]
fn generator_keys_are_passed_on_or_refused_by_name() {
    let cfg = load_config_str(
        "",
        "x",
        &ov(&[
            "generator.sampling_params.repetition_penalty=1.3",
            "generator.chat_template_kwargs={enable_thinking: false}",
            "generator.append_eos_token_after_stop_str_in_multi_turn=false",
        ]),
    )
    .unwrap();
    let g = &cfg.generator;
    let p = skyrl_rollout::RolloutParams::from_config(g, &g.sampling_params, Some(1));
    assert_eq!(p.sampling.repetition_penalty, 1.3);
    assert_eq!(
        p.chat_template_kwargs["enable_thinking"],
        serde_json::json!(false)
    );
    assert!(!p.append_eos_after_stop_str);

    let e = load_config_str(
        "",
        "x",
        &ov(&[
            "generator.sampling_params.repetition_penalty=0",
            "generator.chat_template.source=url",
            "generator.chat_template.name_or_path=x.jinja",
            "generator.batched=true",
            "generator.max_turns=3",
            "generator.inference_engine.enable_http_endpoint=true",
            "generator.inference_engine.async_engine=false",
            "generator.inference_engine.enforce_eager=false",
            "generator.inference_engine.model_dtype=float16",
        ]),
    )
    .unwrap_err();
    let ConfigError::Invalid(problems) = &e else {
        panic!("{e}")
    };
    let all = problems.join("\n");
    for needle in [
        "generator.sampling_params.repetition_penalty must be > 0",
        "generator.chat_template.source must be `name` or `file`",
        "generator.batched=true generates one turn",
        "generator.inference_engine.enable_http_endpoint=true is not supported yet",
        "generator.inference_engine.async_engine=false",
        "generator.inference_engine.enforce_eager=false",
        "generator.inference_engine.model_dtype=float16",
    ] {
        assert!(all.contains(needle), "missing `{needle}` in:\n{all}");
    }
}

/// `generator.chat_template` as skyrl-train resolves it (its named templates
/// or a file), with the combinations skyrl-train refuses refused by name.
#[test]
fn custom_rollout_chat_templates_resolve_or_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("t.jinja");
    std::fs::write(&file, "{% for m in messages %}{{ m.content }}{% endfor %}").unwrap();
    let file_arg = format!("generator.chat_template.name_or_path={}", file.display());
    let load = |args: &[&str]| load_config_str("", "x", &ov(args));
    for args in [
        vec![
            "generator.chat_template.name_or_path=qwen3_without_thinking",
            "generator.sampling_params.logprobs=null",
        ],
        vec![
            "generator.chat_template.source=file",
            file_arg.as_str(),
            "generator.sampling_params.logprobs=null",
        ],
    ] {
        let cfg = load(&args).unwrap();
        let text = cfg.generator.chat_template.resolve().unwrap().unwrap();
        assert!(text.contains("for m"), "{args:?}");
    }
    let err = |args: &[&str]| load(args).unwrap_err().to_string();
    let e = err(&["generator.chat_template.name_or_path=qwen4"]);
    assert!(
        e.contains("generator.chat_template.name_or_path: no chat template named `qwen4`")
            && e.contains("qwen3_with_thinking"),
        "{e}"
    );
    let e = err(&[
        "generator.chat_template.source=file",
        "generator.chat_template.name_or_path=/no/such/template.jinja",
    ]);
    assert!(
        e.contains("cannot read the template file /no/such/template.jinja"),
        "{e}"
    );
    let e = err(&[
        "generator.chat_template.name_or_path=qwen3_with_thinking",
        "generator.step_wise_trajectories=true",
        "generator.batched=true",
    ]);
    for needle in [
        "sampling_params.logprobs=null",
        "does not support generator.step_wise_trajectories",
        "does not support generator.batched=true",
    ] {
        assert!(e.contains(needle), "missing `{needle}` in:\n{e}");
    }
    let e = err(&[
        "generator.chat_template.name_or_path=qwen3_with_thinking",
        "generator.sampling_params.logprobs=null",
        "generator.use_conversation_multi_turn=false",
    ]);
    assert!(e.contains("use_conversation_multi_turn=true"), "{e}");
}

#[test]
fn skyrl_0_3_0_algorithm_keys_are_validated_by_name() {
    let err = |args: &[&str]| load_config_str("", "x", &ov(args)).unwrap_err().to_string();
    let e = err(&["trainer.algorithm.off_policy_correction.token_mask_is_threshold_low=0.5"]);
    assert!(e.contains("token_mask_is_threshold_high"), "{e}");
    let e = err(&["trainer.algorithm.dppo.dppo_type=topk_tv"]);
    assert!(
        e.contains("trainer.algorithm.dppo.dppo_type `topk_tv`"),
        "{e}"
    );
    let e = err(&["trainer.algorithm.value_head_prefix=score"]);
    assert!(e.contains("value_head_prefix `score`"), "{e}");
    let e = err(&["trainer.algorithm.zero_variance_filter_tol=-1"]);
    assert!(e.contains("zero_variance_filter_tol"), "{e}");
    let c = load_config_str(
        "",
        "x",
        &ov(&[
            "trainer.algorithm.policy_loss_type=dppo",
            "trainer.algorithm.dppo.dppo_type=binary_kl",
            "trainer.algorithm.loss_reduction=prompt_mean",
        ]),
    )
    .unwrap();
    assert_eq!(c.trainer.algorithm.dppo.dppo_type, "binary_kl");
    assert_eq!(c.trainer.algorithm.loss_reduction, "prompt_mean");
}

#[test]
fn lora_keys_load_as_skyrl_writes_them_and_bad_ones_are_refused_by_name() {
    use skyrl_train::config::ModuleNames;
    let c = load_config_str(
        "trainer:\n  policy:\n    model:\n      lora: {rank: 8, alpha: 32, target_modules: [q_proj, v_proj]}\n",
        "<yaml>",
        &ov(&["trainer.policy.model.lora.exclude_modules=.*\\.0\\..*"]),
    )
    .unwrap();
    let lora = &c.trainer.policy.model.lora;
    assert_eq!((lora.rank, lora.alpha), (8, 32.0));
    assert_eq!(
        lora.target_modules,
        ModuleNames::Many(vec!["q_proj".into(), "v_proj".into()])
    );
    // Only the lora keys were given: the policy keeps skyrl's default model,
    // and the reference (the base model) gets no adapters.
    assert_eq!(
        c.trainer.policy.model.path.as_deref(),
        Some("Qwen/Qwen2.5-1.5B-Instruct")
    );
    assert_eq!(c.trainer.reference.model.lora.rank, 0);
    let spec = lora.spec(Some("base"), 1).unwrap().unwrap();
    assert_eq!(spec.scaling(), 4.0);

    let refused = |args: &[&str], key: &str| {
        let e = load_config_str("", "<test>", &ov(args))
            .unwrap_err()
            .to_string();
        assert!(e.contains(key), "{args:?}: {e}");
    };
    refused(
        &[
            "trainer.policy.model.lora.rank=8",
            "trainer.policy.model.lora.dropout=0.1",
        ],
        "trainer.policy.model.lora.dropout",
    );
    refused(
        &[
            "trainer.policy.model.lora.rank=8",
            "trainer.policy.model.lora.init_method=pissa",
        ],
        "trainer.policy.model.lora.init_method",
    );
    refused(
        &[
            "trainer.policy.model.lora.rank=8",
            "trainer.policy.model.lora.lora_sync_path=/x",
        ],
        "trainer.policy.model.lora.lora_sync_path",
    );
    refused(
        &[
            "trainer.policy.model.lora.rank=8",
            "trainer.policy.model.lora.max_loras=4",
        ],
        "trainer.policy.model.lora.max_loras",
    );
    refused(&["trainer.ref.model.lora.rank=8"], "trainer.ref.model.lora");
    refused(
        &["trainer.critic.model.lora.rank=8"],
        "trainer.critic.model.lora",
    );
    // Dropout is fine without recomputation.
    load_config_str(
        "",
        "<test>",
        &ov(&[
            "trainer.policy.model.lora.rank=8",
            "trainer.policy.model.lora.dropout=0.1",
            "trainer.gradient_checkpointing=false",
        ]),
    )
    .unwrap();
}
