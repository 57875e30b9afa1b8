//! The format checks of skyrl-gym's text2sql reward
//! (`verify_format_and_extract`), over the episode's whole history.

use std::sync::OnceLock;

use regex_lite::Regex;

/// Opening tag of the final answer.
pub const SOLUTION_START: &str = "<solution>";
/// Closing tag of the final answer.
pub const SOLUTION_END: &str = "</solution>";

/// The final SQL of a well-formatted history, trimmed; `None` when any check
/// fails (the reward is then -1.0). The checks, in skyrl-gym's order:
///
/// 1. `<solution>` occurs exactly once, and `</solution>` exactly once after it;
/// 2. the solution text contains no `<think>`, `<sql>` or `<observation>` tag,
///    opening or closing (`</?(think|sql|observation)\b`, any case);
/// 3. the history has at least one `<think>...</think>` (exact case);
/// 4. every `</observation>` (any case) before the solution is followed,
///    after whitespace, by `<think>` (any case).
pub fn solution_sql(history: &str) -> Option<&str> {
    if history.matches(SOLUTION_START).count() != 1 {
        return None;
    }
    let (pre_solution, tail) = history.split_once(SOLUTION_START)?;
    if tail.matches(SOLUTION_END).count() != 1 {
        return None;
    }
    let (solution, _) = tail.split_once(SOLUTION_END)?;
    if regex(&FORBIDDEN, r"(?i)</?(think|sql|observation)\b").is_match(solution) {
        return None;
    }
    if !regex(&THOUGHT, r"(?s)<think>.*?</think>").is_match(history) {
        return None;
    }
    let thinks_after_each_observation = regex(&OBSERVATION_END, r"(?i)</observation>")
        .find_iter(pre_solution)
        .all(|m| {
            pre_solution[m.end()..]
                .trim_start()
                .get(..7)
                .is_some_and(|next| next.eq_ignore_ascii_case("<think>"))
        });
    if !thinks_after_each_observation {
        return None;
    }
    Some(solution.trim())
}

static FORBIDDEN: OnceLock<Regex> = OnceLock::new();
static THOUGHT: OnceLock<Regex> = OnceLock::new();
static OBSERVATION_END: OnceLock<Regex> = OnceLock::new();

/// Compiles `pattern` into `cell` on first use.
fn regex<'a>(cell: &'a OnceLock<Regex>, pattern: &str) -> &'a Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("valid regex"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OBS: &str = "\n\n<observation>x\n<reminder>You have 4 turns left to complete the task.</reminder></observation>\n\n";

    #[test]
    fn accepts_think_sql_observation_think_solution() {
        let history = format!(
            "<think>a</think><sql>SELECT 1</sql>{OBS}<think>b</think><solution> SELECT 1; </solution>"
        );
        assert_eq!(solution_sql(&history), Some("SELECT 1;"));
        // Case-insensitive `<think>` after an observation, as in skyrl-gym.
        let history = format!("<think>a</think>{OBS}  <THINK>b</THINK><solution>x</solution>");
        assert_eq!(solution_sql(&history), Some("x"));
    }

    #[test]
    fn rejects_bad_formats() {
        for history in [
            "<solution>SELECT 1</solution>".to_owned(),
            "<think>a</think><solution>1</solution><solution>2</solution>".to_owned(),
            "<think>a</think><solution>1</solution></solution>".to_owned(),
            "<think>a</think></solution><solution>1".to_owned(),
            "<think>a</think><solution><sql>SELECT 1</sql></solution>".to_owned(),
            "<think>a</think><solution>SELECT 1 </THINK></solution>".to_owned(),
            "<think>a</think><solution><observation x></solution>".to_owned(),
            format!("<think>a</think>{OBS}<solution>SELECT 1</solution>"),
            format!("<think>a</think>{OBS}b<think>c</think><solution>1</solution>"),
            "<THINK>a</THINK><solution>1</solution>".to_owned(),
        ] {
            assert_eq!(solution_sql(&history), None, "{history}");
        }
    }

    #[test]
    fn tag_names_must_end_at_a_word_boundary() {
        let history = "<think>a</think><solution>SELECT '<sqlite>'</solution>";
        assert_eq!(solution_sql(history), Some("SELECT '<sqlite>'"));
    }
}
