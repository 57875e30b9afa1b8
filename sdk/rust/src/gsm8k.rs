//! GSM8K answer extraction and scoring, exactly as skyrl-gym's
//! `skyrl_gym.envs.gsm8k.utils` (`method="strict"`). Enabled by the `gsm8k`
//! feature; shared by the gsm8k envs and the gsm8k reward plugin.

use std::sync::OnceLock;

use regex_lite::Regex;

/// Extracts the answer of the FIRST `#### <number>` (regex
/// `#### (\-?[0-9\.\,]+)`), with `,` and `$` removed. `None` when the
/// response has no such answer (it is then not well formatted).
pub fn extract_answer(response: &str) -> Option<String> {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    let pattern = PATTERN.get_or_init(|| Regex::new(r"#### (\-?[0-9\.\,]+)").expect("valid regex"));
    let number = pattern.captures(response)?.get(1)?.as_str();
    Some(number.replace([',', '$'], ""))
}

/// skyrl-gym's `compute_score`: no extractable answer -> `0.0`; answer equal
/// to `ground_truth` (as strings) -> `score`; otherwise `format_score`.
pub fn compute_score(response: &str, ground_truth: &str, format_score: f64, score: f64) -> f64 {
    match extract_answer(response) {
        None => 0.0,
        Some(answer) if answer == ground_truth => score,
        Some(_) => format_score,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_first_answer_and_strips_commas() {
        assert_eq!(
            extract_answer("so #### 1,234 and #### 5").as_deref(),
            Some("1234")
        );
        assert_eq!(extract_answer("#### -7.5").as_deref(), Some("-7.5"));
        assert_eq!(extract_answer("####12").as_deref(), None);
        assert_eq!(extract_answer("#### $12").as_deref(), None);
        assert_eq!(extract_answer("no answer"), None);
        // `-?` then at least one of [0-9.,]: a lone minus is not an answer,
        // but a later well-formed one is found.
        assert_eq!(extract_answer("#### - then #### 3").as_deref(), Some("3"));
        assert_eq!(extract_answer("##### 42").as_deref(), Some("42"));
    }

    #[test]
    fn scores_like_skyrl_gym() {
        assert_eq!(compute_score("#### 72", "72", 0.0, 1.0), 1.0);
        assert_eq!(compute_score("#### 71", "72", 0.0, 1.0), 0.0);
        assert_eq!(compute_score("#### 71", "72", 0.04, 1.0), 0.04);
        assert_eq!(compute_score("72", "72", 0.04, 1.0), 0.0);
        assert_eq!(compute_score("#### 72.0", "72", 0.0, 1.0), 0.0);
    }
}
