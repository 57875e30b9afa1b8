use gsm8k::Gsm8k;
use serde_json::json;
use skyrl_sdk::{Environment, Error, Extras, Message};

fn env(ground_truth: serde_json::Value) -> Gsm8k {
    let extras = Extras::from_json(
        &json!({"reward_spec": {"method": "rule", "ground_truth": ground_truth}}).to_string(),
    )
    .unwrap();
    Gsm8k::create(&json!({}), &extras).unwrap()
}

#[test]
fn correct_answer_scores_one_and_ends() {
    let out = env(json!("72")).step("48 + 24 = 72\n#### 72").unwrap();
    assert_eq!(out.reward, 1.0);
    assert!(out.done);
    assert!(out.observations.is_empty());
}

#[test]
fn wrong_or_unformatted_answer_scores_zero() {
    assert_eq!(env(json!("72")).step("#### 70").unwrap().reward, 0.0);
    assert_eq!(
        env(json!("72")).step("The answer is 72").unwrap().reward,
        0.0
    );
}

#[test]
fn commas_are_ignored_and_numeric_ground_truth_works() {
    assert_eq!(env(json!("1234")).step("#### 1,234").unwrap().reward, 1.0);
    assert_eq!(env(json!(1234)).step("#### 1234").unwrap().reward, 1.0);
}

#[test]
fn init_keeps_the_prompt() {
    let prompt = vec![Message::user("What is 2+2?")];
    let (out, meta) = env(json!("4")).init(prompt.clone()).unwrap();
    assert_eq!(out, prompt);
    assert_eq!(meta, json!({}));
}

#[test]
fn missing_ground_truth_is_a_config_error() {
    let extras = Extras::from_json(r#"{"reward_spec": {}}"#).unwrap();
    assert!(matches!(
        Gsm8k::create(&json!({}), &extras),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn shipped_data_is_solved_by_its_worked_solutions() {
    let mut rows = 0;
    for text in [
        include_str!("../data/train.jsonl"),
        include_str!("../data/val.jsonl"),
    ] {
        for line in text.lines() {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(row["env_class"], "gsm8k");
            let extras = Extras::from_json(line).unwrap();
            let mut env = Gsm8k::create(&json!({}), &extras).unwrap();
            let solution = row["extra_info"]["answer"].as_str().unwrap();
            assert_eq!(env.step(solution).unwrap().reward, 1.0, "{line}");
            rows += 1;
        }
    }
    assert_eq!(rows, 30);
}
