//! `skyrl sft` (skyrl_train::sft): the config (unknown and unsupported keys
//! refused by name, 0.3.0's defaults of unsupported keys accepted,
//! num_epochs + num_steps refused), loss masks (by hand on the character
//! tokenizer, and against skyrl 0.3.0's own `tokenize_chat_example` run by
//! tests/reference/sft_tokenize_reference.py), the loss normalisation (per
//! token over the whole batch, whatever the micro-batches), checkpoint
//! resume, and training a tiny model until greedy generation from its export
//! reproduces the memorised answers.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::{json, Value};
use skyrl_model::{
    Arch, CausalLm, InferenceEngine, LoadOptions, SamplingParams, TinySize, Tokenizer,
};
use skyrl_train::sft::{
    load_examples, load_sft_config_str, tokenize_row, train_sft, SftConfig, SftOptions, SftTrainer,
    TokenizeOptions, TrainOnWhat,
};
use tch::{Device, Kind, Tensor};

fn ov(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn load(args: &[&str]) -> Result<SftConfig, String> {
    load_sft_config_str("", "<test>", &ov(args)).map_err(|e| format!("{e:#}"))
}

/// A tiny Qwen2 model with the character tokenizer and ChatML template.
fn tiny_model(dir: &Path) -> PathBuf {
    let out = dir.join("model");
    skyrl_model::init_tiny_model(Arch::Qwen2, TinySize::Tiny, &out, 7).unwrap();
    out
}

fn write_jsonl(path: &Path, rows: &[Value]) {
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// Overrides for a small fp32 run rooted at `dir` on `data`.
fn run_args(dir: &Path, model: &Path, data: &Path, extra: &[&str]) -> Vec<String> {
    let mut a = vec![
        format!("model.path={}", model.display()),
        format!("dataset_name={}", data.display()),
        "dataset_split=train".into(),
        "bf16=false".into(),
        "gradient_checkpointing=false".into(),
        "disable_cache=true".into(),
        "logger=jsonl".into(),
        "num_workers=2".into(),
        "optimizer_config.weight_decay=0.0".into(),
        format!("log_path={}", dir.join("logs").display()),
        format!("export_path={}", dir.join("exports").display()),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn config(args: &[String]) -> SftConfig {
    load_sft_config_str("", "<test>", args).expect("valid test config")
}

/// Builds trainers one at a time (libtorch's global RNG, parallel tests).
fn trainer(cfg: SftConfig) -> SftTrainer {
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    SftTrainer::new(cfg).unwrap()
}

fn params(t: &SftTrainer) -> Vec<(String, Tensor)> {
    let mut v = t.model().named_parameters();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn max_param_diff(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f64 {
    a.iter()
        .zip(b)
        .map(|((n, x), (m, y))| {
            assert_eq!(n, m);
            (x - y).abs().max().double_value(&[])
        })
        .fold(0.0, f64::max)
}

// ------------------------------------------------------------------ config

#[test]
fn defaults_follow_skyrl_0_3_0() {
    let c = load(&[]).unwrap();
    assert_eq!(c.model.path.as_deref(), Some("Qwen/Qwen3-0.6B"));
    assert_eq!((c.batch_size, c.micro_train_batch_size_per_gpu), (4, 2));
    assert_eq!((c.num_epochs, c.num_steps), (Some(1), None));
    assert_eq!(c.train_on_what, TrainOnWhat::LastAssistantMessage);
    assert_eq!(
        (c.dataset_name.as_str(), c.dataset_split.as_str()),
        ("yahma/alpaca-cleaned", "train[:100]")
    );
    assert_eq!((c.ckpt_path.as_str(), c.ckpt_interval), ("", 0));
    assert_eq!(c.logger.0, vec!["console".to_string()]);
    // The placement plans one process (0.3.0: 4 GPUs), the strategy fsdp (0.3.0: megatron).
    assert_eq!(
        (c.placement.num_gpus_per_node, c.strategy.as_str()),
        (1, "fsdp")
    );
}

#[test]
fn unknown_and_unsupported_keys_are_refused_by_name() {
    let e = load(&["batch_sise=4"]).unwrap_err();
    assert!(e.contains("`batch_sise`") && e.contains("override"), "{e}");
    let e = load(&["optimizer_config.lrr=1"]).unwrap_err();
    assert!(e.contains("optimizer_config.lrr"), "{e}");
    for (arg, key) in [
        (
            "megatron_config.tensor_model_parallel_size=4",
            "megatron_config.tensor_model_parallel_size",
        ),
        ("fsdp_config.cpu_offload=true", "fsdp_config.cpu_offload"),
        ("model.lora.init_method=pissa", "model.lora.init_method"),
        ("sequence_parallel_size=2", "sequence_parallel_size"),
        ("use_torch_compile=true", "use_torch_compile"),
        (
            "torch_profiler_config.enable=true",
            "torch_profiler_config.enable",
        ),
        ("use_sequence_packing=true", "use_sequence_packing"),
        ("model_config_kwargs={rope_theta: 1}", "model_config_kwargs"),
        (
            "megatron_config.transformer_config_kwargs={recompute_num_layers: 2}",
            "transformer_config_kwargs",
        ),
        ("tags=[a]", "tags"),
        (
            "megatron_config.no_such_key=1",
            "megatron_config.no_such_key",
        ),
    ] {
        let e = load(&[arg]).unwrap_err();
        assert!(
            e.contains(&format!("`{key}")) || e.contains(key),
            "{arg}: {e}"
        );
        assert!(
            e.contains("not supported") || e.contains("unknown"),
            "{arg}: {e}"
        );
    }
    // Two at once: both reported.
    let e = load(&["fsdp_config.cpu_offload=true", "record_memory=true"]).unwrap_err();
    assert!(
        e.contains("fsdp_config.cpu_offload") && e.contains("record_memory"),
        "{e}"
    );
    // skyrl 0.3.0's defaults of the same keys load.
    load(&[
        "megatron_config.tensor_model_parallel_size=2",
        "megatron_config.transformer_config_kwargs={recompute_granularity: full}",
        "fsdp_config.cpu_offload=false",
        "fsdp_config.wrap_policy={}",
        "model.lora.rank=0",
        "sequence_parallel_size=1",
        "dummy_run_max_steps=5",
        "torch_profiler_config.activities=[cpu, cuda]",
    ])
    .unwrap();
    // Values this trainer does not run.
    for (arg, needle) in [
        ("strategy=megatron", "strategy=megatron is not supported"),
        ("sampler=custom", "sampler=custom"),
        ("dataset_split=train[:10%]", "dataset_split"),
        ("logger=swanlab", "logger"),
        ("train_on_what=all_tokens", "train_on_what"),
        ("eval_interval=5", "eval_dataset_name"),
        ("batch_size=5", "micro_train_batch_size_per_gpu"),
    ] {
        let e = load(&[arg]).unwrap_err();
        assert!(e.contains(needle), "{arg}: {e}");
    }
}

#[test]
fn num_epochs_and_num_steps_are_exclusive_and_use_sample_packing_is_renamed() {
    let e = load(&["num_epochs=2", "num_steps=5"]).unwrap_err();
    assert!(e.contains("num_epochs") && e.contains("num_steps"), "{e}");
    let e = load_sft_config_str("num_epochs: 3\n", "sft.yaml", &ov(&["num_steps=5"]))
        .map_err(|e| format!("{e:#}"))
        .unwrap_err();
    assert!(e.contains("sft.yaml") && e.contains("num_steps=5"), "{e}");
    // Clearing one is how an override switches from epochs to steps.
    let c = load_sft_config_str(
        "num_epochs: 3\n",
        "sft.yaml",
        &ov(&["num_epochs=", "num_steps=5"]),
    )
    .unwrap();
    assert_eq!((c.num_epochs, c.num_steps), (None, Some(5)));
    assert!(load(&["num_epochs="])
        .unwrap_err()
        .contains("num_steps or num_epochs"));
    let c = load(&["use_sample_packing=false"]).unwrap();
    assert!(!c.remove_microbatch_padding);
    let e = load(&["use_sample_packing=false", "remove_microbatch_padding=true"]).unwrap_err();
    assert!(e.contains("use_sample_packing"), "{e}");
}

// ------------------------------------------------------------------ loss masks

fn conversation() -> Value {
    json!({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "x?"},
        {"role": "assistant", "content": "abc"},
    ]})
}

fn options(train_on_what: TrainOnWhat, max_length: Option<usize>) -> TokenizeOptions<'static> {
    TokenizeOptions {
        max_length,
        messages_key: "messages",
        train_on_what,
        tools_key: Some("tools"),
        system_key: Some("system"),
    }
}

/// The character tokenizer makes the masks countable by hand: one token per
/// character, `<|im_start|>` = 1, `<|im_end|>` = 2 (the EOS).
#[test]
fn loss_masks_by_hand_on_the_character_tokenizer() {
    let tmp = tempfile::tempdir().unwrap();
    let tok = Tokenizer::from_dir(tiny_model(tmp.path())).unwrap();
    let row = conversation();
    let row = row.as_object().unwrap();
    let text = |ids: &[i64]| tok.decode(ids, false).unwrap();

    // Last message: "abc<|im_end|>\n" after "...<|im_start|>assistant\n".
    let e = tokenize_row(row, &tok, &options(TrainOnWhat::LastAssistantMessage, None))
        .unwrap()
        .unwrap();
    assert_eq!(e.num_actions, 5);
    assert_eq!(e.loss_mask, vec![1; 5]);
    let window = &e.input_ids[e.input_ids.len() - 5..];
    assert_eq!(text(window), "abc<|im_end|>\n");

    // Every assistant message: from the first assistant header on, loss on
    // "yo<|im_end|>" and "abc<|im_end|>", none on headers, user turns or the
    // newline after each EOS.
    let e = tokenize_row(row, &tok, &options(TrainOnWhat::AllAssistantMessages, None))
        .unwrap()
        .unwrap();
    let header = 11; // <|im_start|> a s s i s t a n t \n
    let user = 10; // <|im_start|> u s e r \n x ? <|im_end|> \n
    let mut want = vec![0u8; header];
    want.extend([1, 1, 1, 0]); // y o <|im_end|> \n
    want.extend(vec![0u8; user]);
    want.extend(vec![0u8; header]);
    want.extend([1, 1, 1, 1, 0]); // a b c <|im_end|> \n
    assert_eq!(e.loss_mask, want);
    let window = &e.input_ids[e.input_ids.len() - e.num_actions..];
    let trained: Vec<i64> = window
        .iter()
        .zip(&e.loss_mask)
        .filter(|(_, &m)| m == 1)
        .map(|(&t, _)| t)
        .collect();
    assert_eq!(text(&trained), "yo<|im_end|>abc<|im_end|>");

    // With every assistant message trained, one must not open the
    // conversation (skyrl 0.3.0 fails on that too); the last one alone may.
    let opens = json!({"messages": [{"role": "assistant", "content": "hello"},
                                    {"role": "user", "content": "u"},
                                    {"role": "assistant", "content": "bye"}]});
    let opens = opens.as_object().unwrap();
    let e = tokenize_row(
        opens,
        &tok,
        &options(TrainOnWhat::AllAssistantMessages, None),
    );
    assert!(format!("{:#}", e.unwrap_err()).contains("starts with an assistant"));
    let e = tokenize_row(
        opens,
        &tok,
        &options(TrainOnWhat::LastAssistantMessage, None),
    );
    assert_eq!(e.unwrap().unwrap().num_actions, 5); // bye<|im_end|>\n

    // A conversation that ends with the user, or is cut before any loss token, is skipped.
    let mut ends_with_user = conversation();
    ends_with_user["messages"].as_array_mut().unwrap().pop();
    let r = ends_with_user.as_object().unwrap();
    assert!(
        tokenize_row(r, &tok, &options(TrainOnWhat::LastAssistantMessage, None))
            .unwrap()
            .is_none()
    );
    for what in [
        TrainOnWhat::LastAssistantMessage,
        TrainOnWhat::AllAssistantMessages,
    ] {
        assert!(tokenize_row(row, &tok, &options(what, Some(8)))
            .unwrap()
            .is_none());
    }
}

/// Rows covering both `train_on_what` values, truncation, system prompts,
/// trailing tool messages, tool calls and schemas, Alpaca rows.
fn parity_rows() -> Vec<(&'static str, Value)> {
    vec![
        ("two_turns", conversation()),
        (
            "system_column",
            json!({"system": "Be terse.", "messages": conversation()["messages"]}),
        ),
        (
            "own_system_kept",
            json!({"system": "ignored", "messages": [
                {"role": "system", "content": "S"},
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "a1"}]}),
        ),
        (
            "trailing_tool_dropped",
            json!({"messages": [
                {"role": "user", "content": "call it"},
                {"role": "assistant", "content": "", "tool_calls": "{\"name\": \"f\", \"arguments\": \"{}\"}"},
                {"role": "tool", "content": "42"},
                {"role": "assistant", "content": "it is 42"},
                {"role": "tool", "content": "late"}]}),
        ),
        (
            "tools_as_json_text",
            json!({"tools": "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]",
                   "messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": null}]}),
        ),
        (
            "ends_with_user",
            json!({"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"},
                                {"role": "user", "content": "again"}]}),
        ),
        (
            "alpaca",
            json!({"instruction": "Add", "input": "1 2", "output": "3"}),
        ),
    ]
}

#[test]
fn loss_masks_match_skyrl_0_3_0_tokenize_chat_example() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let tok = Tokenizer::from_dir(&model).unwrap();
    let mut cases = Vec::new();
    let mut ours = serde_json::Map::new();
    for (name, row) in parity_rows() {
        for what in [
            TrainOnWhat::LastAssistantMessage,
            TrainOnWhat::AllAssistantMessages,
        ] {
            for max_length in [None, Some(24), Some(45), Some(60)] {
                let case = format!("{name}/{}/{max_length:?}", what.name());
                let o = options(what, max_length);
                let e = tokenize_row(row.as_object().unwrap(), &tok, &o).unwrap();
                ours.insert(case.clone(), serde_json::to_value(e).unwrap());
                cases.push(json!({
                    "name": case, "row": row, "train_on_what": what.name(),
                    "max_length": max_length, "messages_key": "messages",
                    "tools_key": "tools", "system_key": "system",
                }));
            }
        }
    }
    let spec = tmp.path().join("cases.json");
    let out = tmp.path().join("out.json");
    std::fs::write(&spec, json!({"cases": cases}).to_string()).unwrap();
    let run = Command::new(common::python())
        .arg(common::script("sft_tokenize_reference.py"))
        .args([&model, &spec, &out])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "sft_tokenize_reference.py failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let theirs: serde_json::Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    let mut skipped = 0;
    for (case, mine) in &ours {
        assert_eq!(mine, &theirs[case], "{case}: ours vs skyrl 0.3.0");
        skipped += mine.is_null() as usize;
    }
    // Both outcomes occur: kept rows and rows 0.3.0 skips.
    assert!(
        skipped > 0 && skipped < ours.len(),
        "{skipped} of {} skipped",
        ours.len()
    );
}

// ------------------------------------------------------------------ data sets

#[test]
fn splits_come_from_folder_file_names_and_slices() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let tok = Tokenizer::from_dir(&model).unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let rows: Vec<Value> = (0..5)
        .map(|i| {
            json!({"messages": [{"role": "user", "content": format!("q{i}")},
                                     {"role": "assistant", "content": "a".repeat(i + 1)}]})
        })
        .collect();
    write_jsonl(&data.join("train.jsonl"), &rows);
    write_jsonl(&data.join("validation.jsonl"), &rows[..2]);
    let cfg = config(&run_args(tmp.path(), &model, &data, &[]));
    let name = data.display().to_string();
    let n = |split: &str| load_examples(&cfg, &name, split, &tok, "m").unwrap();
    assert_eq!(n("train").len(), 5);
    assert_eq!(n("validation").len(), 2);
    // Rows 1..3 of the split: answers of 2 and 3 characters (+ EOS and newline).
    let sliced = n("train[1:3]");
    let windows: Vec<usize> = sliced.iter().map(|e| e.num_actions).collect();
    assert_eq!(windows, vec![4, 5]);
    let err = load_examples(&cfg, &name, "test", &tok, "m").unwrap_err();
    assert!(
        format!("{err:#}").contains("no file of split `test`"),
        "{err:#}"
    );
    // A single file is one `train` split, as in `datasets`.
    let file = data.join("train.jsonl").display().to_string();
    assert_eq!(
        load_examples(&cfg, &file, "train[:2]", &tok, "m")
            .unwrap()
            .len(),
        2
    );
    assert!(load_examples(&cfg, &file, "validation", &tok, "m").is_err());
}

// ------------------------------------------------------------------ training

/// Conversations with unequal numbers of loss tokens.
fn uneven_rows() -> Vec<Value> {
    (0..6)
        .map(|i| {
            json!({"messages": [
                {"role": "user", "content": format!("item {i}")},
                {"role": "assistant", "content": "xyz".repeat(i + 1)},
            ]})
        })
        .collect()
}

/// The loss of a step is the mean NLL per loss token over the whole batch:
/// the first step's `train/loss` equals the initial model's token-weighted
/// evaluation loss on the same conversations, and the update does not depend
/// on how the batch is cut into micro-batches or padded.
#[test]
fn the_loss_is_the_per_token_mean_over_the_batch() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let data = tmp.path().join("uneven.jsonl");
    write_jsonl(&data, &uneven_rows());
    let name = data.display().to_string();
    let mut runs = Vec::new();
    for (micro, own_padding) in [(6, "false"), (1, "true"), (3, "true")] {
        let dir = tmp.path().join(format!("run{micro}"));
        let args = run_args(
            &dir,
            &model,
            &data,
            &[
                "batch_size=6",
                &format!("micro_train_batch_size_per_gpu={micro}"),
                &format!("remove_microbatch_padding={own_padding}"),
                "num_epochs=",
                "num_steps=2",
                "optimizer_config.lr=1e-3",
                &format!("eval_dataset_name={name}"),
                "eval_dataset_split=train",
                "eval_before_train=true",
            ],
        );
        let mut t = trainer(config(&args));
        let summary = t.run(&SftOptions::default()).unwrap();
        let before = summary.evals[0].1;
        let first = summary.losses()[0];
        assert!(
            (first - before).abs() < 1e-5,
            "micro {micro}: step-1 loss {first} vs token-mean NLL {before}"
        );
        runs.push((summary.losses(), params(&t)));
    }
    for (losses, p) in &runs[1..] {
        for (a, b) in losses.iter().zip(&runs[0].0) {
            assert!((a - b).abs() < 1e-5, "losses {losses:?} vs {:?}", runs[0].0);
        }
        let d = max_param_diff(p, &runs[0].1);
        assert!(d < 1e-5, "weights differ by {d:e}");
    }
}

/// A run stopped after 2 steps and resumed (`resume_from=latest`) ends with
/// the weights and losses of an uninterrupted run.
#[test]
fn lora_sft_trains_only_the_adapters_and_exports_merged_weights_and_the_adapter() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let data = tmp.path().join("uneven.jsonl");
    write_jsonl(&data, &uneven_rows());
    let dir = tmp.path().join("run");
    let cfg = config(&run_args(
        &dir,
        &model,
        &data,
        &[
            "batch_size=2",
            "micro_train_batch_size_per_gpu=2",
            "num_epochs=4",
            "optimizer_config.lr=1e-2",
            "model.lora.rank=4",
            "model.lora.alpha=8",
            "hf_save_interval=4",
        ],
    ));
    let mut t = trainer(cfg);
    let base = params(&t);
    let summary = t.run(&SftOptions::default()).unwrap();
    let losses = summary.losses();
    assert!(
        losses.last().unwrap() < &(losses[0] * 0.9),
        "LoRA SFT did not lower the loss: {losses:?}"
    );
    assert_eq!(
        max_param_diff(&base, &params(&t)),
        0.0,
        "base weights moved"
    );
    let adapters = t.model().trainable_parameters();
    assert_eq!(
        adapters.len(),
        2 * 7 * 2,
        "all-linear: 2 layers x 7 modules x (A, B)"
    );
    // The export is the merged model plus the adapter in PEFT's format.
    let export = summary.last_export.clone().expect("exported at the end");
    let merged = skyrl_model::CausalLm::from_pretrained(
        &export,
        &skyrl_model::LoadOptions {
            device: tch::Device::Cpu,
            kind: tch::Kind::Float,
        },
    )
    .unwrap();
    let want = t.model().merged_parameters();
    assert!(max_param_diff(&merged.named_parameters(), &want) < 1e-6);
    assert!(export.join("lora_adapter/adapter_config.json").is_file());
}

#[test]
fn a_resumed_run_continues_the_same_run() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let data = tmp.path().join("uneven.jsonl");
    write_jsonl(&data, &uneven_rows());
    let args = |dir: &Path| {
        run_args(
            dir,
            &model,
            &data,
            &[
                "batch_size=2",
                "micro_train_batch_size_per_gpu=1",
                "num_epochs=2",
                "optimizer_config.lr=1e-3",
                "optimizer_config.scheduler=cosine",
                &format!("ckpt_path={}", dir.join("ckpts").display()),
                "ckpt_interval=2",
                "resume_from=latest",
            ],
        )
    };
    let straight = tmp.path().join("straight");
    let mut t = trainer(config(&args(&straight)));
    let whole = t.run(&SftOptions::default()).unwrap();
    assert_eq!(whole.final_step, 6);
    let full = params(&t);

    let split = tmp.path().join("split");
    let first = trainer(config(&args(&split)))
        .run(&SftOptions { max_steps: Some(3) })
        .unwrap();
    assert_eq!(first.final_step, 3);
    let ckpts = split.join("ckpts");
    assert!(ckpts.join("global_step_2/model.safetensors").is_file());
    assert!(ckpts.join("global_step_3/optimizer.safetensors").is_file());
    assert_eq!(
        std::fs::read_to_string(ckpts.join("latest_ckpt_global_step.txt")).unwrap(),
        "3"
    );
    let mut t = trainer(config(&args(&split)));
    let rest = t.run(&SftOptions::default()).unwrap();
    assert_eq!((rest.start_step, rest.final_step), (3, 6));
    assert!(rest.resumed_from.is_some());
    let losses: Vec<f64> = first.losses().into_iter().chain(rest.losses()).collect();
    for (a, b) in losses.iter().zip(whole.losses()) {
        assert!((a - b).abs() < 1e-5, "{losses:?} vs {:?}", whole.losses());
    }
    let d = max_param_diff(&params(&t), &full);
    assert!(d < 1e-6, "resumed weights differ by {d:e}");
}

/// Three conversations, each ending in an answer no random model would say;
/// `train_sft` (what `skyrl sft` runs) trains until the loss is near zero,
/// logging every step to metrics.jsonl and TensorBoard, and greedy
/// generation from the exported model, prompted with each conversation up
/// to its answer, says the answer and stops.
#[test]
fn sft_memorises_answers_that_greedy_generation_reproduces() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let data = tmp.path().join("chat.jsonl");
    let rows = vec![
        json!({"messages": [{"role": "user", "content": "What is the secret word?"},
                            {"role": "assistant", "content": "zebra-quartz-42"}]}),
        json!({"system": "Be brief.", "messages": [{"role": "user", "content": "Name the lost city."},
                                                   {"role": "assistant", "content": "Vorlan Teek"}]}),
        json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                            {"role": "user", "content": "Who guards the gate?"},
                            {"role": "assistant", "content": "the owl named Pim"}]}),
    ];
    write_jsonl(&data, &rows);
    let args = run_args(
        tmp.path(),
        &model,
        &data,
        &[
            "batch_size=3",
            "micro_train_batch_size_per_gpu=3",
            "num_epochs=",
            "num_steps=150",
            "optimizer_config.lr=3e-3",
            "hf_save_interval=150",
            "logger=[jsonl, tensorboard]",
        ],
    );
    let summary = train_sft(config(&args), &SftOptions::default()).unwrap();
    let losses = summary.losses();
    assert_eq!(losses.len(), 150);
    let (first, last) = (losses[0], losses[149]);
    assert!(last < 0.02 * first, "loss {first} -> {last}");
    let export = summary
        .last_export
        .expect("hf_save_interval exports at the end");
    assert_eq!(export, tmp.path().join("exports/global_step_150/policy"));
    let logged = std::fs::read_to_string(tmp.path().join("logs/metrics.jsonl")).unwrap();
    assert_eq!(
        logged.lines().filter(|l| l.contains("train/loss")).count(),
        150
    );
    // The TensorBoard tracker got the steps too (its event file grows past the header).
    let tb = std::fs::read_dir(tmp.path().join("logs/tensorboard"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("events.out.tfevents"))
        .expect("a TensorBoard event file");
    assert!(
        std::fs::metadata(&tb).unwrap().len() > 150 * 100,
        "{}",
        tb.display()
    );

    let options = LoadOptions {
        device: Device::Cpu,
        kind: Kind::Float,
    };
    let trained = CausalLm::from_pretrained(&export, &options).unwrap();
    let tok = Tokenizer::from_dir(&export).unwrap();
    let prompts: Vec<(Vec<Value>, &str)> = vec![
        (vec![rows[0]["messages"][0].clone()], "zebra-quartz-42"),
        (
            vec![
                json!({"role": "system", "content": "Be brief."}),
                rows[1]["messages"][0].clone(),
            ],
            "Vorlan Teek",
        ),
        (
            rows[2]["messages"].as_array().unwrap()[..3].to_vec(),
            "the owl named Pim",
        ),
    ];
    let ids: Vec<Vec<i64>> = prompts
        .iter()
        .map(|(m, _)| tok.encode_chat(m, true).unwrap())
        .collect();
    let engine = InferenceEngine::new(trained, Some(tok));
    let outs = engine.generate(&ids, &SamplingParams::greedy(32)).unwrap();
    for ((_, want), out) in prompts.iter().zip(&outs) {
        let text = engine
            .tokenizer()
            .unwrap()
            .decode(&out.token_ids, true)
            .unwrap();
        assert_eq!(&text, want, "{out:?}");
        assert_eq!(out.token_ids.last(), Some(&2), "ends with <|im_end|>");
    }
}
