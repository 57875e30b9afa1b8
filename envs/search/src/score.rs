//! SearchR1's exact-match reward (skyrl-gym `envs/search/utils.py`, from
//! Search-R1's `qa_em.py`): the last `<answer>...</answer>` of the episode,
//! normalised (lowercase, ASCII punctuation dropped, articles dropped,
//! whitespace collapsed), equal to one normalised target.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;
use skyrl_sdk::pystr;

fn answer_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"(?s)<answer>(.*?)</answer>").expect("answer pattern"))
}

fn article_pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\b(a|an|the)\b").expect("article pattern"))
}

/// Python's `string.punctuation`.
const PUNCTUATION: &str = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/// `normalize_answer`.
pub fn normalize_answer(text: &str) -> String {
    let lower = text.to_lowercase();
    let no_punct: String = lower
        .chars()
        .filter(|c| !PUNCTUATION.contains(*c))
        .collect();
    let no_articles = article_pattern().replace_all(&no_punct, " ");
    pystr::split_whitespace(&no_articles)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `extract_solution`: the last `<answer>` block, stripped.
pub fn extract_solution(text: &str) -> Option<String> {
    answer_pattern()
        .captures_iter(text)
        .last()
        .map(|c| pystr::strip(&c[1]).to_string())
}

/// The targets of `ground_truth["target"]`: a string or a list of strings.
pub fn targets(ground_truth: &Value) -> Result<Vec<String>, String> {
    let target = ground_truth.get("target").ok_or_else(|| {
        format!("ground_truth needs a `target` (string or list), got {ground_truth}")
    })?;
    match target {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "ground_truth.target entries must be strings, got {other}"
                )),
            })
            .collect(),
        other => Err(format!(
            "ground_truth.target must be a string or a list, got {other}"
        )),
    }
}

/// `em_check`.
pub fn em_check(prediction: &str, targets: &[String]) -> bool {
    let prediction = normalize_answer(prediction);
    targets.iter().any(|t| normalize_answer(t) == prediction)
}

/// `compute_score` (strict, format score 0, score 1).
pub fn compute_score(solution: &str, targets: &[String]) -> f64 {
    match extract_solution(solution) {
        Some(answer) if em_check(&answer, targets) => 1.0,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalisation_matches_squad_style() {
        assert_eq!(normalize_answer("The  Eiffel Tower!"), "eiffel tower");
        assert_eq!(normalize_answer("a an the"), "");
        assert_eq!(normalize_answer("Theatre"), "theatre");
        assert_eq!(normalize_answer("U.S.A."), "usa");
    }

    #[test]
    fn the_last_answer_counts() {
        let text = "<answer>London</answer> then <answer> Paris </answer>";
        assert_eq!(extract_solution(text).as_deref(), Some("Paris"));
        let targets = targets(&json!({"target": ["paris", "Paris, France"]})).unwrap();
        assert_eq!(compute_score(text, &targets), 1.0);
        assert_eq!(compute_score("no answer", &targets), 0.0);
        assert_eq!(compute_score("<answer>Lyon</answer>", &targets), 0.0);
    }

    #[test]
    fn targets_may_be_a_string_or_a_list() {
        assert_eq!(targets(&json!({"target": "x"})).unwrap(), vec!["x"]);
        assert!(targets(&json!({"target": 3})).is_err());
        assert!(targets(&json!({})).is_err());
    }
}
