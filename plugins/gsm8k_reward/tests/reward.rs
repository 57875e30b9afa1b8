use gsm8k_reward::Gsm8kReward;
use serde_json::json;
use skyrl_sdk::{score_with, Error, Extras, Message, Reward};

#[test]
fn scores_strict_gsm8k_answers() {
    let prompt = [Message::user("What is 6 * 7?")];
    let e = Extras::default();
    assert_eq!(
        Gsm8kReward::score(&prompt, "6*7=42\n#### 42", &json!("42"), &e).unwrap(),
        1.0
    );
    assert_eq!(
        Gsm8kReward::score(&prompt, "#### 4,2", &json!(42), &e).unwrap(),
        1.0
    );
    assert_eq!(
        Gsm8kReward::score(&prompt, "#### 41", &json!("42"), &e).unwrap(),
        0.0
    );
    assert_eq!(
        Gsm8kReward::score(&prompt, "42", &json!("42"), &e).unwrap(),
        0.0
    );
    assert!(matches!(
        Gsm8kReward::score(&prompt, "#### 42", &json!([42]), &e),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn glue_accepts_json_or_bare_ground_truth() {
    assert_eq!(
        score_with::<Gsm8kReward>(&[], "#### 42", "\"42\"", "{}").unwrap(),
        1.0
    );
    assert_eq!(
        score_with::<Gsm8kReward>(&[], "#### 42", "42", "").unwrap(),
        1.0
    );
    assert!(score_with::<Gsm8kReward>(&[], "#### 42", "42", "[]").is_err());
}
