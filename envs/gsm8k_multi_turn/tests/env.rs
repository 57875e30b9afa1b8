use gsm8k_multi_turn::{Gsm8kMultiTurn, FINAL_ANSWER_PROMPT, REASONING_PROMPT};
use serde_json::{json, Value};
use skyrl_sdk::{Environment, Error, Extras, Message};

fn env(extras: Value) -> Gsm8kMultiTurn {
    Gsm8kMultiTurn::create(&json!({}), &Extras::from_json(&extras.to_string()).unwrap()).unwrap()
}

fn gt(max_turns: Option<u32>) -> Value {
    let mut e = json!({"reward_spec": {"method": "rule", "ground_truth": "18"}});
    if let Some(t) = max_turns {
        e["max_turns"] = json!(t);
    }
    e
}

#[test]
fn correct_answer_ends_the_episode_with_reward_one() {
    let out = env(gt(Some(3))).step("#### 18").unwrap();
    assert_eq!((out.reward, out.done), (1.0, true));
    assert!(out.observations.is_empty());
}

#[test]
fn wrong_answers_get_format_credit_and_feedback_until_the_last_turn() {
    let mut e = env(gt(Some(3)));
    let first = e.step("I think #### 17").unwrap();
    assert!((first.reward - 0.2 / 3.0).abs() < 1e-12);
    assert!(!first.done);
    assert_eq!(first.observations, vec![Message::user(REASONING_PROMPT)]);

    let second = e.step("no answer here").unwrap();
    assert_eq!(second.reward, 0.0);
    assert_eq!(
        second.observations,
        vec![Message::user(FINAL_ANSWER_PROMPT)]
    );

    let third = e.step("#### 16").unwrap();
    assert!(third.done);
    assert!(third.observations.is_empty());
    assert_eq!(e.metrics(), json!({"steps": 3}));
}

#[test]
fn max_turns_defaults_to_five_and_reads_extra_info() {
    let mut e = env(gt(None));
    for _ in 0..4 {
        assert!(!e.step("#### 1").unwrap().done);
    }
    assert!(e.step("#### 1").unwrap().done);

    let mut extras = gt(None);
    extras["extra_info"] = json!({"max_turns": 1});
    assert!(env(extras).step("#### 1").unwrap().done);
}

#[test]
fn bad_extras_are_config_errors() {
    let bad =
        Extras::from_json(r#"{"reward_spec": {"ground_truth": "1"}, "max_turns": "x"}"#).unwrap();
    assert!(matches!(
        Gsm8kMultiTurn::create(&json!({}), &bad),
        Err(Error::InvalidConfig(_))
    ));
    let missing = Extras::from_json("{}").unwrap();
    assert!(matches!(
        Gsm8kMultiTurn::create(&json!({}), &missing),
        Err(Error::InvalidConfig(_))
    ));
}
