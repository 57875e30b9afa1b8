//! Rollout generator semantics with real plugins and a tiny random model:
//! multi-turn masks / logprobs / reward placement, max_input_length, and a
//! trapping env giving `env_error` without affecting the others.
//!
//! Needs `artifacts/plugins/{gsm8k_multi_turn,hostile}.wasm` (run `scripts/build-plugins`).

use std::path::PathBuf;

use serde_json::{json, Map, Value};
use skyrl_inference::RolloutEngine;
use skyrl_model::{init_tiny_model, Arch, CausalLm, InferenceEngine, LoadOptions, SamplingParams};
use skyrl_model::{TinySize, Tokenizer};
use skyrl_rollout::config::{RubricComponent, RubricConfig};
use skyrl_rollout::rubric::Rubric;
use skyrl_rollout::{Generator, GeneratorRequest, PluginSet, RolloutParams, ENV_ERROR};
use skyrl_runtime::{Message, Plugin, PluginEngine};

fn plugin(engine: &PluginEngine, name: &str) -> Plugin {
    let wasm = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../artifacts/plugins")
        .join(format!("{name}.wasm"));
    assert!(
        wasm.is_file(),
        "{} is missing: build the plugins first with scripts/build-plugins",
        wasm.display()
    );
    Plugin::load(engine, &wasm).unwrap()
}

fn setup() -> (RolloutEngine, Tokenizer, Generator, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    init_tiny_model(Arch::Qwen2, TinySize::Tiny, dir.path(), 3).unwrap();
    let opts = LoadOptions {
        device: tch::Device::Cpu,
        kind: tch::Kind::Float,
    };
    let model = CausalLm::from_pretrained(dir.path(), &opts).unwrap();
    let tokenizer = Tokenizer::from_dir(dir.path()).unwrap();
    let engine = RolloutEngine::local(InferenceEngine::new(
        model,
        Some(Tokenizer::from_dir(dir.path()).unwrap()),
    ));
    let pe = PluginEngine::shared().unwrap();
    let mut envs = PluginSet::default();
    envs.insert(
        "gsm8k_multi_turn",
        plugin(&pe, "gsm8k_multi_turn"),
        json!({}),
    );
    envs.insert("good", plugin(&pe, "hostile"), json!({"attack": "none"}));
    envs.insert("bad", plugin(&pe, "hostile"), json!({"attack": "trap"}));
    (engine, tokenizer, Generator::new(envs, 4).unwrap(), dir)
}

fn request(env_class: &str) -> GeneratorRequest {
    let mut extras = Map::new();
    extras.insert("reward_spec".into(), json!({"ground_truth": "72"}));
    GeneratorRequest {
        prompt: vec![Message::user("What is 8*9? End with #### ANSWER.")],
        env_class: env_class.into(),
        extras,
        stream: None,
    }
}

fn params(max_turns: usize, max_input_length: usize) -> RolloutParams {
    RolloutParams {
        sampling: SamplingParams {
            temperature: 1.0,
            max_tokens: 6,
            seed: Some(7),
            ..SamplingParams::default()
        },
        max_turns,
        max_input_length,
        chat_template_kwargs: Default::default(),
        append_eos_after_stop_str: true,
        conversation_multi_turn: true,
    }
}

#[test]
fn multi_turn_masks_logprobs_and_rewards() {
    let (engine, tok, generator, _dir) = setup();
    let reqs: Vec<_> = ["gsm8k_multi_turn", "gsm8k_multi_turn", "good", "bad"]
        .iter()
        .map(|c| request(c))
        .collect();
    let out = generator
        .generate(&engine, &tok, &reqs, &params(3, 4000))
        .unwrap();
    assert_eq!(out.response_ids.len(), 4);
    for i in 0..4 {
        // Turn spans cover exactly the generated (mask 1) tokens.
        let mut covered = vec![0.0f32; out.response_ids[i].len()];
        for &(a, b) in &out.turn_spans[i] {
            covered[a..b].iter_mut().for_each(|x| *x = 1.0);
        }
        assert_eq!(covered, out.loss_masks[i], "trajectory {i}");
        assert_eq!(out.turn_spans[i].len(), out.num_turns[i]);
        // Step-wise samples: one per turn, each prompt the context before its turn.
        let sw = skyrl_rollout::step_wise::expand(&out);
        let rows: Vec<usize> = (0..sw.trajectory.len())
            .filter(|&r| sw.trajectory[r] == i)
            .collect();
        assert_eq!(rows.len(), out.num_turns[i].max(1));
        for (k, &r) in rows.iter().enumerate() {
            let (a, b) = out.turn_spans[i].get(k).copied().unwrap_or((0, 0));
            assert_eq!(sw.out.response_ids[r], out.response_ids[i][a..b]);
            let mut ctx = out.prompt_token_ids[i].clone();
            ctx.extend_from_slice(&out.response_ids[i][..a]);
            assert_eq!(sw.out.prompt_token_ids[r], ctx);
        }
        let n = out.response_ids[i].len();
        assert_eq!(out.loss_masks[i].len(), n);
        assert_eq!(out.rollout_logprobs[i].len(), n);
        assert_eq!(out.rewards[i].len(), n);
        for j in 0..n {
            if out.loss_masks[i][j] == 0.0 {
                assert_eq!(out.rollout_logprobs[i][j], 0.0, "obs token with a logprob");
                assert_eq!(out.rewards[i][j], 0.0, "reward on an observation token");
            } else {
                assert!(out.rollout_logprobs[i][j] <= 0.0);
            }
        }
    }
    // The multi-turn env (never answered correctly by a random model) runs all
    // 3 turns; observation tokens (mask 0) are the chat-templated user turns.
    for i in 0..2 {
        assert_eq!(out.num_turns[i], 3);
        let mask = &out.loss_masks[i];
        let obs: Vec<i64> = out.response_ids[i]
            .iter()
            .zip(mask)
            .filter(|(_, m)| **m == 0.0)
            .map(|(t, _)| *t)
            .collect();
        let text = tok.decode(&obs, false).unwrap();
        assert_eq!(text.matches("<|im_start|>user").count(), 2, "{text}");
        assert!(text.ends_with("<|im_start|>assistant\n"), "{text}");
        // Three generated segments separated by two observation segments.
        let segments = mask
            .windows(2)
            .filter(|w| w[0] == 1.0 && w[1] == 0.0)
            .count();
        assert_eq!(segments, 2);
        assert!(["stop", "length"].contains(&out.stop_reasons[i].as_str()));
    }
    // The well-behaved env pays 1.0 at the last generated token.
    let r = &out.rewards[2];
    assert_eq!(*r.last().unwrap(), 1.0);
    assert_eq!(r.iter().sum::<f32>(), 1.0);
    assert_eq!(out.num_turns[2], 1);
    // The trapping env costs only its own trajectory.
    assert_eq!(out.stop_reasons[3], ENV_ERROR);
    assert!(out.rewards[3].iter().all(|&x| x == 0.0));
    // Env metrics are means per env class.
    assert!(out
        .env_metrics
        .keys()
        .any(|k| k.starts_with("gsm8k_multi_turn/")));
}

#[test]
fn max_input_length_stops_with_length() {
    let (engine, tok, generator, _dir) = setup();
    let reqs = vec![request("gsm8k_multi_turn")];
    let prompt_len = tok
        .encode_chat(
            &[skyrl_model::ChatMessage::new(
                "user",
                "What is 8*9? End with #### ANSWER.",
            )],
            true,
        )
        .unwrap()
        .len();
    // Room for the first turn only: the second turn's input is too long.
    let out = generator
        .generate(&engine, &tok, &reqs, &params(5, prompt_len + 6))
        .unwrap();
    assert_eq!(out.num_turns[0], 1);
    assert_eq!(out.stop_reasons[0], "length");
    assert_eq!(out.prompt_token_ids[0].len(), prompt_len);
    // Responses are truncated to max_input_length + max_generate_length - prompt.
    assert!(out.response_ids[0].len() <= 6 + 6);
    let _: Value = json!(out.env_metrics);
}

#[test]
fn rubric_combines_the_env_reward_with_weighted_components() {
    let (engine, tok, base, _dir) = setup();
    let pe = PluginEngine::shared().unwrap();
    let mut envs = base.envs.clone();
    envs.insert_reward("format", plugin(&pe, "format_reward"));
    envs.insert_reward("correct", plugin(&pe, "gsm8k_reward"));
    let cfg = RubricConfig {
        env_weight: 0.5,
        components: vec![
            RubricComponent {
                name: "format".into(),
                weight: 0.25,
            },
            RubricComponent {
                name: "correct".into(),
                weight: 2.0,
            },
        ],
    };
    let rubric = Rubric::new(&cfg, envs.rewards()).unwrap();
    let plain = Generator::new(envs.clone(), 4).unwrap();
    let mut scored = Generator::new(envs, 4).unwrap();
    scored.set_rubric(rubric);
    let reqs: Vec<_> = (0..6).map(|_| request("gsm8k_multi_turn")).collect();
    let a = plain
        .generate(&engine, &tok, &reqs, &params(2, 4000))
        .unwrap();
    let b = scored
        .generate(&engine, &tok, &reqs, &params(2, 4000))
        .unwrap();
    assert_eq!(a.response_ids, b.response_ids, "same seeds, same rollouts");
    let (mut env_sum, mut fmt_sum, mut correct_sum) = (0.0, 0.0, 0.0);
    for i in 0..reqs.len() {
        let env: f64 = a.rewards[i].iter().map(|&x| x as f64).sum();
        let generated: Vec<i64> = a.response_ids[i]
            .iter()
            .zip(&a.loss_masks[i])
            .filter(|(_, &m)| m > 0.0)
            .map(|(&t, _)| t)
            .collect();
        let fmt = format_reward::format_score(&tok.decode(&generated, true).unwrap());
        let total: f64 = b.rewards[i].iter().map(|&x| x as f64).sum();
        let correct = (total - 0.5 * env - 0.25 * fmt) / 2.0;
        assert!(
            correct.abs() < 1e-5 || (correct - 1.0).abs() < 1e-5,
            "trajectory {i}: total {total}, env {env}, format {fmt}"
        );
        env_sum += env;
        fmt_sum += fmt;
        correct_sum += correct.round();
    }
    let n = reqs.len() as f64;
    let m = &b.reward_metrics;
    assert!((m["env"] - env_sum / n).abs() < 1e-6, "{m:?}");
    assert!((m["format"] - fmt_sum / n).abs() < 1e-6, "{m:?}");
    assert!((m["correct"] - correct_sum / n).abs() < 1e-6, "{m:?}");
    assert_eq!(m["format/errors"], 0.0);
}

#[test]
fn rubric_components_must_be_reward_plugins() {
    let pe = PluginEngine::shared().unwrap();
    let mut rewards = std::collections::BTreeMap::new();
    rewards.insert("env_not_reward".to_string(), plugin(&pe, "gsm8k"));
    let cfg = |name: &str| RubricConfig {
        env_weight: 1.0,
        components: vec![RubricComponent {
            name: name.into(),
            weight: 1.0,
        }],
    };
    let err = Rubric::new(&cfg("missing"), &rewards).err().unwrap();
    assert!(
        format!("{err:#}").contains("--reward missing=PATH"),
        "{err:#}"
    );
    let err = Rubric::new(&cfg("env_not_reward"), &rewards).err().unwrap();
    assert!(format!("{err:#}").contains("cannot score"), "{err:#}");
}

/// Each turn's generated span, and whether the EOS token follows it.
fn eos_after_spans(out: &skyrl_rollout::GeneratorOutput, i: usize, eos: i64) -> Vec<bool> {
    out.turn_spans[i]
        .iter()
        .map(|&(_, b)| out.response_ids[i].get(b) == Some(&eos) && out.loss_masks[i][b] == 0.0)
        .collect()
}

#[test]
fn a_turn_ending_on_a_stop_string_gets_eos_appended_outside_the_loss() {
    let (engine, tok, generator, _dir) = setup();
    let eos = tok.eos_token_id().expect("the tiny tokenizer has an EOS");
    let reqs = vec![request("gsm8k_multi_turn"); 4];
    // Stop strings the random model hits within a few tokens.
    let stop: Vec<String> = "aeiou0123456789 ".chars().map(String::from).collect();
    let mut with = params(3, 4000);
    with.sampling.stop = stop.clone();
    let out = generator.generate(&engine, &tok, &reqs, &with).unwrap();
    let mut appended = 0;
    for i in 0..reqs.len() {
        for (k, (&(a, b), after)) in out.turn_spans[i]
            .iter()
            .zip(eos_after_spans(&out, i, eos))
            .enumerate()
        {
            let text = tok.decode(&out.response_ids[i][a..b], true).unwrap();
            let last_is_eos = b > a && out.response_ids[i][b - 1] == eos;
            let on_stop = stop.iter().any(|s| text.ends_with(s.as_str()));
            assert_eq!(
                after,
                on_stop && !last_is_eos,
                "trajectory {i} turn {k}: {text:?}"
            );
            appended += after as usize;
        }
        // The env's reward sits on a generated token, never on the EOS.
        for (j, r) in out.rewards[i].iter().enumerate() {
            if *r != 0.0 {
                assert_eq!(out.loss_masks[i][j], 1.0);
            }
        }
        assert_eq!(out.rollout_logprobs[i].len(), out.response_ids[i].len());
    }
    assert!(appended > 0, "no turn ended on a stop string");

    let mut without = with.clone();
    without.append_eos_after_stop_str = false;
    let out = generator.generate(&engine, &tok, &reqs, &without).unwrap();
    for i in 0..reqs.len() {
        assert!(
            eos_after_spans(&out, i, eos).iter().all(|a| !a),
            "trajectory {i}"
        );
    }
}

#[test]
fn chat_template_kwargs_reach_the_prompt_template() {
    let (engine, _, generator, dir) = setup();
    // A template variable as Qwen3's `enable_thinking`.
    let cfg_path = dir.path().join("tokenizer_config.json");
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    let template = cfg["chat_template"].as_str().unwrap().to_string();
    cfg["chat_template"] = json!(format!(
        "{template}{{% if add_generation_prompt and enable_thinking is defined and not enable_thinking %}}<think></think>{{% endif %}}"
    ));
    std::fs::write(&cfg_path, cfg.to_string()).unwrap();
    let tok = Tokenizer::from_dir(dir.path()).unwrap();
    let reqs = vec![request("good")];
    let mut p = params(1, 4000);
    let plain = generator.generate(&engine, &tok, &reqs, &p).unwrap();
    p.chat_template_kwargs
        .insert("enable_thinking".into(), json!(false));
    let off = generator.generate(&engine, &tok, &reqs, &p).unwrap();
    let text = |ids: &[i64]| tok.decode(ids, false).unwrap();
    assert!(!text(&plain.prompt_token_ids[0]).ends_with("<think></think>"));
    assert!(
        text(&off.prompt_token_ids[0]).ends_with("<think></think>"),
        "{}",
        text(&off.prompt_token_ids[0])
    );
}

#[test]
fn without_conversation_multi_turn_the_episode_is_one_assistant_message() {
    let (engine, tok, generator, _dir) = setup();
    let eos = tok.eos_token_id().unwrap();
    let reqs = vec![request("gsm8k_multi_turn"); 4];
    let mut p = params(3, 4000);
    p.conversation_multi_turn = false;
    let out = generator.generate(&engine, &tok, &reqs, &p).unwrap();
    for i in 0..reqs.len() {
        let ids = &out.response_ids[i];
        let mask = &out.loss_masks[i];
        assert_eq!(out.num_turns[i], 3, "the random model never answers right");
        // Observations are the env's text, not chat-templated user turns.
        let obs: Vec<i64> = ids
            .iter()
            .zip(mask)
            .filter(|(_, m)| **m == 0.0)
            .map(|(t, _)| *t)
            .collect();
        let text = tok.decode(&obs, false).unwrap();
        assert!(!obs.is_empty() && !text.contains("<|im_start|>"), "{text}");
        // No turn keeps its EOS inside the message; one closes it, trained on.
        let n = ids.len();
        assert!(ids[..n - 1].iter().all(|&t| t != eos), "trajectory {i}");
        if out.stop_reasons[i] != "length" {
            assert_eq!((ids[n - 1], mask[n - 1]), (eos, 1.0));
            assert_eq!(out.rollout_logprobs[i][n - 1], 0.0);
        }
        assert_eq!(out.rollout_logprobs[i].len(), n);
        assert_eq!(out.rewards[i].len(), n);
    }
}

#[test]
fn a_custom_chat_template_retokenizes_the_conversation_as_skyrl_train() {
    let (engine, tok, mut generator, _dir) = setup();
    let source = skyrl_model::custom_chat_template("qwen3_without_thinking").unwrap();
    generator
        .set_chat_template(tok.compile_chat_template(source).unwrap())
        .unwrap();
    let template = tok.compile_chat_template(source).unwrap();
    let reqs: Vec<_> = ["gsm8k_multi_turn", "gsm8k_multi_turn", "good", "bad"]
        .iter()
        .map(|c| request(c))
        .collect();
    let out = generator
        .generate(&engine, &tok, &reqs, &params(3, 4000))
        .unwrap();
    // The prompt is the custom template's render, without a generation prompt.
    let prompt = [skyrl_model::ChatMessage::new(
        "user",
        "What is 8*9? End with #### ANSWER.",
    )];
    let want_prompt = tok
        .encode_chat_using(&template, &prompt, false, None)
        .unwrap();
    let text = |ids: &[i64]| tok.decode(ids, false).unwrap();
    for i in 0..reqs.len() {
        assert_eq!(out.prompt_token_ids[i], want_prompt, "trajectory {i}");
        let (ids, mask) = (&out.response_ids[i], &out.loss_masks[i]);
        let n = ids.len();
        assert_eq!((mask.len(), out.rewards[i].len()), (n, n));
        assert_eq!(out.rollout_logprobs[i], vec![0.0; n], "no rollout logprobs");
        // Every assistant turn is one `{% generation %}` run: its text and
        // `<|im_end|>`, and nothing else is trained on.
        assert_eq!(out.turn_spans[i].len(), out.num_turns[i], "trajectory {i}");
        for &(a, b) in &out.turn_spans[i] {
            assert!(text(&ids[a..b]).ends_with("<|im_end|>"));
            assert!(text(&ids[..a]).ends_with("<|im_start|>assistant\n"));
        }
        let rendered = text(ids);
        assert_eq!(
            rendered.matches("<|im_start|>assistant\n").count(),
            out.num_turns[i]
        );
        // Only the last step's reward, on the last token.
        assert!(out.rewards[i][..n.saturating_sub(1)]
            .iter()
            .all(|&r| r == 0.0));
    }
    // gsm8k_multi_turn: 3 turns, the two observations in between as user
    // messages (mask 0), the final one left out.
    for i in 0..2 {
        assert_eq!(out.num_turns[i], 3);
        let rendered = text(&out.response_ids[i]);
        assert_eq!(
            rendered.matches("<|im_start|>user\n").count(),
            2,
            "{rendered}"
        );
        assert!(rendered.ends_with("<|im_end|>\n"), "{rendered}");
    }
    // `good` ends after one turn with reward 1 on the last token; `bad` traps.
    assert_eq!(out.rewards[2].last(), Some(&1.0));
    assert_eq!(out.stop_reasons[3], ENV_ERROR);
    assert!(out.rewards[3].iter().all(|&r| r == 0.0));

    // max_input_length is checked against each turn's re-rendered input:
    // room for the first turn only.
    let first = tok
        .encode_chat_using(&template, &prompt, true, None)
        .unwrap();
    let reqs = vec![request("gsm8k_multi_turn")];
    let out = generator
        .generate(&engine, &tok, &reqs, &params(5, first.len() + 2))
        .unwrap();
    assert_eq!(
        (out.num_turns[0], out.stop_reasons[0].as_str()),
        (1, "length")
    );
}

#[test]
fn a_custom_chat_template_is_refused_with_a_generator_plugin() {
    let (engine, tok, mut generator, _dir) = setup();
    let tok = std::sync::Arc::new(tok);
    let pe = PluginEngine::shared().unwrap();
    let custom = skyrl_rollout::custom_generator::CustomGenerator::new(
        plugin(&pe, "best_of_n"),
        json!({}),
        60.0,
        std::sync::Arc::new(engine),
        tok.clone(),
    )
    .unwrap();
    generator.set_custom(custom).unwrap();
    let source = skyrl_model::custom_chat_template("qwen3_with_thinking").unwrap();
    let err = generator
        .set_chat_template(tok.compile_chat_template(source).unwrap())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("generator.chat_template.name_or_path"),
        "{err}"
    );
}

#[test]
fn episodes_per_instance_reuses_env_sandboxes_across_the_batch() {
    use skyrl_rollout::config::PluginSandboxConfig;
    use skyrl_rollout::sandbox::SandboxSettings;
    let pe = PluginEngine::shared().unwrap();
    let settings = |episodes: u32| {
        let config: PluginSandboxConfig =
            serde_json::from_value(json!({ "episodes_per_instance": episodes })).unwrap();
        std::collections::BTreeMap::from([("good".to_string(), config)])
    };
    let zero = settings(0);
    let err = SandboxSettings::new(&zero)
        .apply(plugin(&pe, "hostile"), Some("good"))
        .err()
        .expect("0 is refused");
    let text = format!("{err:#}");
    assert!(
        text.contains("environment.sandbox.good") && text.contains("episodes_per_instance"),
        "{text}"
    );

    let eight = settings(8);
    let good = SandboxSettings::new(&eight)
        .apply(plugin(&pe, "hostile"), Some("good"))
        .unwrap();
    assert_eq!(good.episodes_per_instance(), 8);
    let (engine, tok, _, _dir) = setup();
    let mut envs = PluginSet::default();
    envs.insert("good", good.clone(), json!({"attack": "none"}));
    let generator = Generator::new(envs, 2).unwrap();
    let reqs: Vec<_> = (0..6).map(|_| request("good")).collect();
    let out = generator
        .generate(&engine, &tok, &reqs, &params(1, 512))
        .unwrap();
    assert!(
        out.rewards.iter().all(|r| r.iter().sum::<f32>() == 1.0),
        "{:?}",
        out.rewards
    );
    // The batch's six sandboxes wait for the next batch, which takes them
    // and hands them back again.
    assert_eq!(good.idle_env_instances(), 6);
    generator
        .generate(&engine, &tok, &reqs, &params(1, 512))
        .unwrap();
    assert_eq!(good.idle_env_instances(), 6);
}
