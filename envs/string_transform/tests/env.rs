use serde_json::{json, Value};
use skyrl_sdk::{Environment, Error, Extras, Message};
use string_transform::{partial_credit, Config, StringTransform, Task};

fn extras(v: Value) -> Extras {
    Extras::from_json(&v.to_string()).unwrap()
}

fn row(task: &str, input: &str, truth: &str) -> Extras {
    extras(json!({
        "reward_spec": {"method": "rule", "ground_truth": truth},
        "extra_info": {"task": task, "input": input}
    }))
}

#[test]
fn tasks_transform_the_input() {
    assert_eq!(Task::Copy.apply("abca"), "abca");
    assert_eq!(Task::Reverse.apply("abcd"), "dcba");
    assert_eq!(Task::Sort.apply("dbca"), "abcd");
}

#[test]
fn partial_credit_counts_positions_over_the_longer_length() {
    assert_eq!(partial_credit("abca", "abca"), 1.0);
    assert_eq!(partial_credit("  abca\n", "abca"), 1.0);
    assert_eq!(partial_credit("abcd", "abca"), 0.75);
    assert_eq!(partial_credit("ab", "abca"), 0.5);
    assert_eq!(partial_credit("abcaxxxx", "abca"), 0.5);
    assert_eq!(partial_credit("", "abca"), 0.0);
    assert_eq!(partial_credit("bcab", "abca"), 0.0);
}

#[test]
fn random_letters_of_the_alphabet_score_about_a_quarter() {
    // Every response of the right length over {a,b,c,d}, averaged.
    let target = "abc";
    let letters = ['a', 'b', 'c', 'd'];
    let mut total = 0.0;
    let mut n = 0.0;
    for a in letters {
        for b in letters {
            for c in letters {
                total += partial_credit(&format!("{a}{b}{c}"), target);
                n += 1.0;
            }
        }
    }
    assert!((total / n - 0.25).abs() < 1e-12);
}

#[test]
fn episode_is_a_single_step_with_metrics() {
    let mut env = StringTransform::create(&json!({}), &row("copy", "abca", "abca")).unwrap();
    let prompt = vec![Message::user("copy: abca")];
    let (p, meta) = env.init(prompt.clone()).unwrap();
    assert_eq!(p, prompt);
    assert_eq!(meta["target"], "abca");
    let out = env.step("abcb").unwrap();
    assert!(out.done);
    assert!(out.observations.is_empty());
    assert_eq!(out.reward, 0.75);
    assert_eq!(
        env.metrics(),
        json!({"exact_match": false, "char_accuracy": 0.75})
    );
    assert_eq!(env.step("abca").unwrap().reward, 1.0);
    assert_eq!(env.metrics()["exact_match"], true);
}

#[test]
fn config_task_overrides_the_row_and_rewrites_the_prompt() {
    let mut env =
        StringTransform::create(&json!({"task": "reverse"}), &row("copy", "abcd", "abcd")).unwrap();
    let (p, _) = env.init(vec![Message::user("copy: abcd")]).unwrap();
    assert_eq!(p, vec![Message::user("reverse: abcd")]);
    assert_eq!(env.step("dcba").unwrap().reward, 1.0);
}

#[test]
fn seeded_rows_generate_deterministic_inputs() {
    let cfg = Config::default();
    let a = string_transform::generate_input(&cfg, 7).unwrap();
    assert_eq!(a, string_transform::generate_input(&cfg, 7).unwrap());
    assert!((3..=5).contains(&a.len()) && a.chars().all(|c| "abcd".contains(c)));
    let mut env = StringTransform::create(
        &json!({"task": "sort"}),
        &extras(json!({"extra_info": {"seed": 7}})),
    )
    .unwrap();
    let (p, _) = env.init(vec![]).unwrap();
    assert_eq!(p, vec![Message::user(format!("sort: {a}"))]);
    assert_eq!(env.step(&Task::Sort.apply(&a)).unwrap().reward, 1.0);
}

#[test]
fn inconsistent_or_missing_rows_are_config_errors() {
    let bad = |config: Value, e: Extras| {
        matches!(
            StringTransform::create(&config, &e),
            Err(Error::InvalidConfig(_))
        )
    };
    assert!(bad(json!({}), row("copy", "abca", "acba")));
    assert!(bad(json!({}), row("shuffle", "abca", "abca")));
    assert!(bad(json!({}), extras(json!({"extra_info": {}}))));
    assert!(bad(json!({"task": "rot13"}), row("copy", "abca", "abca")));
    assert!(bad(
        json!({"alphabet": ""}),
        extras(json!({"extra_info": {"seed": 1}}))
    ));
    assert!(bad(
        json!({"min_len": 4, "max_len": 2}),
        extras(json!({"extra_info": {"seed": 1}}))
    ));
}

#[test]
fn shipped_data_matches_the_env() {
    for (split, text) in [
        ("train", include_str!("../data/train.jsonl")),
        ("val", include_str!("../data/val.jsonl")),
    ] {
        let mut n = 0;
        for line in text.lines() {
            let row: Value = serde_json::from_str(line).unwrap();
            assert_eq!(row["env_class"], "string_transform");
            let mut extras = row.as_object().unwrap().clone();
            let prompt: Vec<Message> =
                serde_json::from_value(extras.remove("prompt").unwrap()).unwrap();
            extras.remove("env_class");
            let extras = Extras::from_map(extras);
            let mut env = StringTransform::create(&json!({}), &extras).unwrap();
            let (p, _) = env.init(prompt.clone()).unwrap();
            assert_eq!(p, prompt);
            let truth = extras.ground_truth_str().unwrap();
            assert_eq!(env.step(&truth).unwrap().reward, 1.0, "{split}: {line}");
            n += 1;
        }
        assert_eq!(n, if split == "train" { 2000 } else { 100 });
    }
}
