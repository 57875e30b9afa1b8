//! AIME scoring, ported from skyrl-gym 0.4.0's `envs/aime/utils.py` (verl's
//! `math_dapo`): `last_boxed_only_string`, `remove_boxed`, the Minerva
//! (`Answer: ...`) and strict-box checks, `verify` and `compute_score`.
//!
//! Strings are handled as Python does, by code point: the response is cut
//! to its last 300 code points, the strict-box check to its last 100.

use std::sync::LazyLock;

use regex_lite::Regex;

use crate::normalize::normalize_final_answer;
use skyrl_sdk::pystr;

/// Reward for a correct answer.
pub const CORRECT_SCORE: f64 = 1.0;
/// Reward for a wrong or missing answer.
pub const INCORRECT_SCORE: f64 = -1.0;
/// `compute_score` keeps only this many trailing code points of a response.
pub const MAX_SOLUTION_CHARS: usize = 300;
/// `is_correct_strict_box` looks only this many code points back.
pub const STRICT_BOX_WINDOW: i64 = 100;
/// The prediction when a response has no `Answer:` line.
pub const INVALID: &str = "[INVALID]";

/// The result of [`compute_score`]: Python's `{"score", "acc", "pred"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// [`CORRECT_SCORE`] or [`INCORRECT_SCORE`].
    pub score: f64,
    /// Whether the answer was judged correct.
    pub acc: bool,
    /// The normalised prediction (Minerva), or the raw boxed content
    /// (strict box; `None` when there is no box).
    pub pred: Option<String>,
}

/// Python's default `answer_pattern`, `(?i)Answer\s*:\s*([^\n<]+)`, with
/// its Unicode semantics spelled out: `(?i)` lets `s` also match `ſ`
/// (U+017F) and `\s` is `str.isspace`.
static ANSWER: LazyLock<Regex> = LazyLock::new(|| {
    let ws = pystr::space_class();
    Regex::new(&format!("[aA][nN][sSſ][wW][eE][rR]{ws}*:{ws}*([^\\n<]+)")).expect("valid pattern")
});

/// The last `\boxed{...}` of `string` with balanced braces, if any.
pub fn last_boxed_only_string(string: &str) -> Option<&str> {
    let idx = string.rfind("\\boxed{")?;
    let mut open = 0i64;
    for (i, b) in string.bytes().enumerate().skip(idx) {
        if b == b'{' {
            open += 1;
        }
        if b == b'}' {
            open -= 1;
            if open == 0 {
                return Some(&string[idx..=i]);
            }
        }
    }
    None
}

/// The content of `\boxed{content}`; `None` where Python's assertions fail.
pub fn remove_boxed(s: &str) -> Option<&str> {
    s.strip_prefix("\\boxed{")?.strip_suffix('}')
}

/// Minerva check: the last `Answer: ...` of the solution, normalised,
/// equals the normalised ground truth (first extracted from its last
/// `\boxed{}` when `gt_need_extract`). Returns `(correct, pred)`; `None`
/// where Python raises (`gt_need_extract` and no box in `gt`).
pub fn is_correct_minerva(
    solution_str: &str,
    gt: &str,
    gt_need_extract: bool,
) -> Option<(bool, String)> {
    // re.findall: non-overlapping matches, left to right; keep the last.
    let extracted = ANSWER
        .captures_iter(solution_str)
        .last()
        .map(|c| c.get(1).map_or("", |m| m.as_str()).to_owned());
    let pred = normalize_final_answer(extracted.as_deref().unwrap_or(INVALID));
    let gt = if gt_need_extract {
        normalize_final_answer(remove_boxed(last_boxed_only_string(gt)?)?)
    } else {
        normalize_final_answer(gt)
    };
    Some((pred == gt, pred))
}

/// Strict-box check: the raw content of the last `\boxed{}` in the last 100
/// code points (or from `pause_tokens_index[3] - 100`, Python slicing)
/// equals `gt` exactly. Returns `(1 or -1, extracted)`.
pub fn is_correct_strict_box(
    pred: &str,
    gt: &str,
    pause_tokens_index: Option<[i64; 4]>,
) -> (i32, Option<String>) {
    let pred = match pause_tokens_index {
        Some(idx) => pystr::slice_from(pred, idx[3] - STRICT_BOX_WINDOW),
        None => pystr::slice_from(pred, -STRICT_BOX_WINDOW),
    };
    let extracted = last_boxed_only_string(pred).and_then(remove_boxed);
    let score = if extracted == Some(gt) { 1 } else { -1 };
    (score, extracted.map(str::to_owned))
}

/// Python's `verify`: strict box or Minerva, as `(correct, pred)`.
pub fn verify(
    solution_str: &str,
    answer: &str,
    strict_box_verify: bool,
    pause_tokens_index: Option<[i64; 4]>,
) -> (bool, Option<String>) {
    if strict_box_verify {
        let (correct, pred) = is_correct_strict_box(solution_str, answer, pause_tokens_index);
        return (correct == 1, pred);
    }
    let (correct, pred) =
        is_correct_minerva(solution_str, answer, false).expect("no extraction, cannot fail");
    (correct, Some(pred))
}

/// Python's `compute_score`: the last 300 code points of the solution are
/// verified; 1.0 when correct, else -1.0.
pub fn compute_score(
    solution_str: &str,
    ground_truth: &str,
    strict_box_verify: bool,
    pause_tokens_index: Option<[i64; 4]>,
) -> Score {
    let solution_str = pystr::last_chars(solution_str, MAX_SOLUTION_CHARS);
    let (acc, pred) = verify(
        solution_str,
        ground_truth,
        strict_box_verify,
        pause_tokens_index,
    );
    Score {
        score: if acc { CORRECT_SCORE } else { INCORRECT_SCORE },
        acc,
        pred,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minerva(solution: &str, gt: &str) -> (f64, bool, String) {
        let s = compute_score(solution, gt, false, None);
        (s.score, s.acc, s.pred.unwrap())
    }

    #[test]
    fn boxed_extraction_balances_braces_and_takes_the_last() {
        assert_eq!(
            last_boxed_only_string("a \\boxed{1} b \\boxed{\\frac{1}{2}} c"),
            Some("\\boxed{\\frac{1}{2}}")
        );
        assert_eq!(last_boxed_only_string("\\boxed{1"), None);
        assert_eq!(last_boxed_only_string("no box"), None);
        assert_eq!(remove_boxed("\\boxed{x}"), Some("x"));
        assert_eq!(remove_boxed("\\fbox{x}"), None);
    }

    #[test]
    fn minerva_scores_the_last_answer_line() {
        assert_eq!(minerva("Answer: 42", "42"), (1.0, true, "42".into()));
        assert_eq!(minerva("answer : 7\nAnswer: 42", "42").0, 1.0);
        assert_eq!(minerva("Answer: 41", "42"), (-1.0, false, "41".into()));
        assert!(minerva("ANSWER:1,000", "1000").1);
    }

    #[test]
    fn a_boxed_answer_without_an_answer_line_is_invalid() {
        assert_eq!(
            minerva("so \\boxed{42}", "42"),
            (-1.0, false, INVALID.into())
        );
        assert_eq!(minerva("", "42").2, INVALID);
    }

    #[test]
    fn the_answer_group_stops_at_newline_or_angle_bracket() {
        assert_eq!(minerva("Answer: 42</s>", "42").2, "42");
        assert_eq!(minerva("Answer: 42\nmore text", "42").2, "42");
        // One match swallows a later "Answer:" on the same line.
        assert_eq!(minerva("Answer: 1 Answer: 2", "2").2, "1Answer:2");
    }

    #[test]
    fn python_unicode_rules_apply() {
        // (?i) matches the long s; \s includes U+001C.
        assert!(minerva("Anſwer:\u{1c}42", "42").1);
        assert!(minerva("Answer:\u{a0}42", "42").1);
    }

    #[test]
    fn only_the_last_300_code_points_count() {
        let far = format!("Answer: 42\n{}", "é".repeat(300));
        assert_eq!(minerva(&far, "42").2, INVALID);
        let near = format!("Answer: 42\n{}", "é".repeat(288));
        assert!(minerva(&near, "42").1);
    }

    #[test]
    fn strict_box_compares_the_raw_last_box() {
        let s = compute_score("x \\boxed{42}", "42", true, None);
        assert_eq!((s.score, s.acc, s.pred), (1.0, true, Some("42".into())));
        let s = compute_score("x \\boxed{ 42}", "42", true, None);
        assert_eq!((s.score, s.acc), (-1.0, false));
        let s = compute_score("no box", "42", true, None);
        assert_eq!(s.pred, None);
        let far = format!("\\boxed{{42}}{}", " ".repeat(100));
        assert_eq!(compute_score(&far, "42", true, None).pred, None);
        // Pause tokens move the window start to `index[3] - 100`.
        let s = compute_score(&far, "42", true, Some([0, 0, 0, 100]));
        assert_eq!(s.pred.as_deref(), Some("42"));
    }

    #[test]
    fn minerva_can_extract_the_ground_truth_from_a_box() {
        assert_eq!(
            is_correct_minerva("Answer: 5", "so \\boxed{5}", true),
            Some((true, "5".into()))
        );
        assert_eq!(is_correct_minerva("Answer: 5", "5", true), None);
    }
}
