//! GSM8K answer extraction and scoring, exactly as skyrl-gym's
//! `skyrl_gym.envs.gsm8k.utils` (`method="strict"`). Enabled by the `gsm8k`
//! feature; shared by the gsm8k envs and the gsm8k reward plugin.

/// Extracts the answer of the FIRST `#### <number>` (skyrl-gym's regex
/// `#### (\-?[0-9\.\,]+)`), with `,` and `$` removed. `None` when the
/// response has no such answer (it is then not well formatted).
///
/// A plain scan with the regex's leftmost-first semantics: at each
/// `#### ` (overlapping ones too), an optional `-` and at least one of
/// `[0-9.,]`; a `-` not followed by one of them fails that position. A
/// regex engine here was compiled afresh in every sandboxed instance, a
/// large share of a gsm8k episode.
pub fn extract_answer(response: &str) -> Option<String> {
    const MARK: &str = "#### ";
    let number_char = |b: &u8| b.is_ascii_digit() || *b == b'.' || *b == b',';
    let mut from = 0;
    while let Some(found) = response[from..].find(MARK) {
        let start = from + found + MARK.len();
        let rest = &response.as_bytes()[start..];
        let sign = usize::from(rest.first() == Some(&b'-'));
        let digits = rest[sign..].iter().take_while(|b| number_char(b)).count();
        if digits > 0 {
            let number = &response[start..start + sign + digits];
            return Some(number.replace([',', '$'], ""));
        }
        from += found + 1;
    }
    None
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
        assert_eq!(extract_answer("#### -").as_deref(), None);
        assert_eq!(extract_answer("#### --5 #### -.,").as_deref(), Some("-."));
        assert_eq!(extract_answer("é#### ٣ #### 9x").as_deref(), Some("9"));
        assert_eq!(extract_answer("#### ").as_deref(), None);
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
