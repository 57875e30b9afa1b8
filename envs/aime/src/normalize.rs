//! `normalize_final_answer` from skyrl-gym 0.4.0's `envs/aime/utils.py`
//! (Minerva / lm-evaluation-harness answer normalisation), step for step.
//!
//! The `re.sub` calls are ported to `regex-lite` with the same patterns:
//! both pick the leftmost match with backtracking (Perl) priorities for
//! greedy and lazy repeats, `.` excludes only `\n` in both, and every pattern
//! here is ASCII-only, so the matches and groups are Python's.

use std::sync::LazyLock;

use regex_lite::{Captures, Regex};

use skyrl_sdk::pystr;

/// `SUBSTITUTIONS`: `(before, after)` pairs applied in order with
/// `str.replace` (every non-overlapping occurrence, left to right).
pub const SUBSTITUTIONS: [(&str, &str); 10] = [
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    ("\\ ", ""),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
];

/// `REMOVED_EXPRESSIONS`: removed in order after the substitutions.
pub const REMOVED_EXPRESSIONS: [&str; 41] = [
    "square",
    "ways",
    "integers",
    "dollars",
    "mph",
    "inches",
    "hours",
    "km",
    "units",
    "\\ldots",
    "sue",
    "points",
    "feet",
    "minutes",
    "digits",
    "cents",
    "degrees",
    "cm",
    "gm",
    "pounds",
    "meters",
    "meals",
    "edges",
    "students",
    "childrentickets",
    "multiples",
    "\\text{s}",
    "\\text{.}",
    "\\text{\ns}",
    "\\text{}^2",
    "\\text{}^3",
    "\\text{\n}",
    "\\text{}",
    "\\mathrm{th}",
    "^\\circ",
    "^{\\circ}",
    "\\;",
    ",\\!",
    "{,}",
    "\"",
    "\\dots",
];

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("valid pattern")
}

/// `(.*?)(\$)(.*?)(\$)(.*)` -> `$\3$`: keeps the first `$...$` of a line.
static DOLLARS: LazyLock<Regex> = LazyLock::new(|| regex(r"(.*?)(\$)(.*?)(\$)(.*)"));
/// `(\\text\{)(.*?)(\})` -> `\2`.
static TEXT: LazyLock<Regex> = LazyLock::new(|| regex(r"(\\text\{)(.*?)(\})"));
/// `(\\textbf\{)(.*?)(\})` -> `\2`.
static TEXTBF: LazyLock<Regex> = LazyLock::new(|| regex(r"(\\textbf\{)(.*?)(\})"));
/// `(\\overline\{)(.*?)(\})` -> `\2`.
static OVERLINE: LazyLock<Regex> = LazyLock::new(|| regex(r"(\\overline\{)(.*?)(\})"));
/// `(\\boxed\{)(.*)(\})` -> `\2` (greedy: up to the line's last `}`).
static BOXED: LazyLock<Regex> = LazyLock::new(|| regex(r"(\\boxed\{)(.*)(\})"));
/// `(frac)([^{])(.)` -> `frac{\2}{\3}`.
static FRAC: LazyLock<Regex> = LazyLock::new(|| regex(r"(frac)([^{])(.)"));
/// `(sqrt)([^{])` -> `sqrt{\2}`.
static SQRT: LazyLock<Regex> = LazyLock::new(|| regex(r"(sqrt)([^{])"));

/// `re.sub(pattern, template, s)` with the template as a closure over the
/// groups (no `$` template syntax to escape).
fn sub(re: &Regex, s: &str, template: impl Fn(&Captures) -> String) -> String {
    re.replace_all(s, |c: &Captures| template(c)).into_owned()
}

/// Normalises a final answer to a quantitative reasoning question, exactly
/// as Python's `normalize_final_answer`.
pub fn normalize_final_answer(final_answer: &str) -> String {
    // final_answer.split("=")[-1]
    let mut s = final_answer
        .rsplit('=')
        .next()
        .unwrap_or(final_answer)
        .to_owned();

    for (before, after) in SUBSTITUTIONS {
        s = s.replace(before, after);
    }
    for expr in REMOVED_EXPRESSIONS {
        s = s.replace(expr, "");
    }

    // Extract and normalise LaTeX math.
    s = sub(&DOLLARS, &s, |c| format!("${}$", &c[3]));
    s = sub(&TEXT, &s, |c| c[2].to_owned());
    s = sub(&TEXTBF, &s, |c| c[2].to_owned());
    s = sub(&OVERLINE, &s, |c| c[2].to_owned());
    s = sub(&BOXED, &s, |c| c[2].to_owned());

    // Shorthand TeX: \fracab -> \frac{a}{b}, \sqrta -> \sqrt{a}.
    s = sub(&FRAC, &s, |c| format!("frac{{{}}}{{{}}}", &c[2], &c[3]));
    s = sub(&SQRT, &s, |c| format!("sqrt{{{}}}", &c[2]));
    s = s.replace('$', "");

    // Numbers: drop thousands separators from all-digit answers.
    if pystr::is_digit(&s.replace(',', "")) {
        s = s.replace(',', "");
    }

    pystr::strip(&s).to_owned()
}

#[cfg(test)]
mod tests {
    use super::normalize_final_answer as norm;

    #[test]
    fn keeps_the_text_after_the_last_equals_sign() {
        assert_eq!(norm("x = y = 42"), "42");
        assert_eq!(norm("a="), "");
    }

    #[test]
    fn applies_substitutions_and_removals_in_order() {
        assert_eq!(norm("an apple"), "apple");
        assert_eq!(norm("5 \\text{ dollars}"), "5");
        assert_eq!(norm("10 \\text{m}"), "10");
        assert_eq!(norm("1,\\text{and} 2"), "12");
        assert_eq!(norm("x,\\text{and} y"), "x,y");
        assert_eq!(norm("90^\\circ"), "90");
        assert_eq!(norm("\"7\""), "7");
        assert_eq!(norm("1,\\!000"), "1000");
    }

    #[test]
    fn keeps_the_first_inline_math_of_each_line() {
        assert_eq!(norm("so $x$ and $y$"), "x");
        assert_eq!(norm("one $ only"), "oneonly");
        assert_eq!(norm("a$1$\nb$2$c"), "1\n2");
    }

    #[test]
    fn unwraps_text_textbf_overline_and_boxed() {
        assert_eq!(norm("\\text{12}"), "12");
        assert_eq!(norm("\\textbf{12}"), "12");
        assert_eq!(norm("\\overline{12}"), "12");
        assert_eq!(norm("\\boxed{\\frac{1}{2}}"), "\\frac{1}{2}");
        // Lazy \text{...} stops at the first brace.
        assert_eq!(norm("\\text{\\text{a}}"), "\\text{a}");
    }

    #[test]
    fn expands_shorthand_frac_and_sqrt() {
        assert_eq!(norm("\\frac12"), "\\frac{1}{2}");
        assert_eq!(norm("\\frac1{2}"), "\\frac{1}{{}2}");
        assert_eq!(norm("\\sqrt2"), "\\sqrt{2}");
        assert_eq!(norm("\\sqrt{2}"), "\\sqrt{2}");
    }

    #[test]
    fn strips_commas_only_from_digit_strings() {
        assert_eq!(norm("1,000"), "1000");
        assert_eq!(norm("-1,000"), "-1,000");
        assert_eq!(norm("1,²"), "1²");
        assert_eq!(norm(",,"), ",,");
    }

    #[test]
    fn strips_python_whitespace() {
        assert_eq!(norm("\u{1c}42\u{3000}"), "42");
    }
}
