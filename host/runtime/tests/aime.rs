//! Parity of the `aime` plugin with skyrl-gym 0.4.0: every case runs one
//! episode through the WebAssembly component and through Python's
//! `skyrl_gym.envs.aime.utils.compute_score` (the project venv's Python,
//! `$SKYRL_PYTHON`, else `<repo>/.deps/venv/bin/python`), and score, acc and
//! pred must agree for all of them.

mod common;

use serde_json::{json, Value};
use skyrl_runtime::Message;

/// `(response, ground_truth)` pairs covering each normalisation step.
const CASES: &[(&str, &str)] = &[
    // Plain Minerva answers.
    ("Answer: 42", "42"),
    ("answer: 42", "42"),
    ("ANSWER : 42", "42"),
    ("Answer:42", "42"),
    ("Answer: 41", "42"),
    ("Answer: 042", "42"),
    ("Answer: 0", "0"),
    ("Answer: 00", "0"),
    ("The answer is \\boxed{42}.\nAnswer: 42", "42"),
    (
        "Final Answer: The final answer is $204$. I hope it is correct.",
        "204",
    ),
    ("Answer: The answer is 204", "204"),
    ("The ANSWER IS: 7", "7"),
    // No answer line, empty and degenerate answers.
    ("no answer here, just \\boxed{5}", "5"),
    ("", "5"),
    ("", ""),
    ("Answer:", "5"),
    ("Answer:   ", ""),
    ("Answer: \n\n42", "42"),
    ("Answer: \n<42", "42"),
    ("Answer: <b>5</b>", "5"),
    // Several answers: findall keeps the last non-overlapping match.
    ("Answer: 12\nAnswer: 13", "13"),
    ("Answer: 12 and Answer: 13", "13"),
    ("answer:5 ANSWER:6", "5"),
    ("Answer: 3</s><|im_end|>", "3"),
    ("Answer: 5\r\n", "5"),
    ("Answer: \t5\t", "5"),
    // Numbers: commas, signs, decimals.
    ("Answer: 1,000", "1000"),
    ("Answer: 1,000,000", "1,000,000"),
    ("Answer: 1, 2, 3", "1,2,3"),
    ("Answer: -5", "-5"),
    ("Answer: -1,000", "-1000"),
    ("Answer: 3.14", "3.14"),
    ("Answer: 3.14.", "3.14"),
    ("Answer: 5\\%", "5"),
    ("Answer: 10^{10}", "10^{10}"),
    // Equals signs and dollars.
    ("Answer: x = 3", "3"),
    ("Answer: 5 = 2 + 3", "3"),
    ("Answer: $25$", "25"),
    ("Answer: \\$25", "25"),
    ("Answer: a$b$c$d$", "b"),
    ("Answer: 42", "$42$"),
    // LaTeX: fractions, roots, boxes, text.
    ("Answer: $\\frac{1}{2}$", "\\frac{1}{2}"),
    ("Answer: \\frac12", "\\frac{1}{2}"),
    ("Answer: \\dfrac{1}{2}", "\\frac{1}{2}"),
    ("Answer: 1/2", "\\frac{1}{2}"),
    ("Answer: frac12", "frac{1}{2}"),
    ("Answer: \\frac1{2}", "\\frac{1}{2}"),
    ("Answer: \\sqrt2", "\\sqrt{2}"),
    ("Answer: 2\\sqrt{3}", "2\\sqrt3"),
    ("Answer: \\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}"),
    ("Answer: \\boxed{\\frac{3}{4}}", "\\frac{3}{4}"),
    ("Answer: \\boxed{\\boxed{7}}", "7"),
    ("Answer: 42", "\\boxed{42}"),
    ("Answer: \\text{(A)}", "(A)"),
    ("Answer: \\textbf{B}", "B"),
    ("Answer: \\overline{AB}", "AB"),
    ("Answer: \\mbox{yes}", "yes"),
    ("Answer: \\text{\\text{a}}", "\\text{a}"),
    ("Answer: \\{1,2\\}", "\\{1,2\\}"),
    // Units and removed expressions.
    ("Answer: 5 \\text{ dollars}", "5"),
    ("Answer: 10 \\text{ cm}", "10"),
    ("Answer: 10 \\text{m}", "10"),
    ("Answer: 90^\\circ", "90"),
    ("Answer: 90^{\\circ}", "90 degrees"),
    ("Answer: 7 students", "7"),
    ("Answer: 3 units", "3"),
    ("Answer: 6 square units", "6"),
    ("Answer: 12 ways", "12"),
    ("Answer: 100 \\mathrm{th}", "100"),
    ("Answer: 5,\\!000 meters", "5000"),
    ("Answer: {,}123", "123"),
    ("Answer: 3\\;4", "34"),
    ("Answer: 7 \\ldots", "7"),
    ("Answer: \"17\"", "17"),
    ("Answer: an apple", "apple"),
    ("Answer: 3 \\text{and} 4", "3,4"),
    // Ground-truth normalisation.
    ("Answer: 42", "42\n"),
    ("Answer: 42", " 4 2 "),
    ("Answer: 42", "forty-two"),
    ("Answer: 42", "4\u{a0}2"),
    // Unicode: Python's (?i), \s, isdigit and strip.
    ("Anſwer: 42", "42"),
    ("Answer:\u{a0}42", "42"),
    ("Answer:\u{1c}42\u{1f}", "42"),
    ("Answer:\u{3000}42\u{2028}", "42"),
    ("Answer: ４２", "42"),
    ("Answer: ١,٢٣٤", "١٢٣٤"),
    ("Answer: 1,²", "1²"),
    ("Answer: 1,½", "1½"),
    ("Answer: 😀 42", "😀42"),
    ("Réponse finale. Answer: 42 ✓", "42✓"),
];

/// `(response, ground_truth)` pairs that need building: long responses
/// around the 300-code-point cut, and answer templates x answers.
fn generated_cases() -> Vec<(String, String)> {
    let mut cases = vec![
        (format!("{}\nAnswer: 9", "x".repeat(400)), "9".to_owned()),
        (format!("Answer: 9\n{}", "y".repeat(300)), "9".to_owned()),
        (format!("Answer: 9\n{}", "é".repeat(290)), "9".to_owned()),
        (format!("Answer: 9\n{}", "é".repeat(291)), "9".to_owned()),
        (format!("Answer: 9\n{}", "😀".repeat(290)), "9".to_owned()),
    ];
    let templates = [
        "Answer: {}",
        "answer:{}\n",
        "Final Answer: $\\boxed{{}}$",
        "Answer: {} units",
    ];
    let answers = [
        "204",
        "1,024",
        "-3",
        "\\frac{5}{7}",
        "\\frac57",
        "0.5",
        "x=2",
        "\\text{(C)}",
    ];
    for t in templates {
        for (i, a) in answers.iter().enumerate() {
            let response = t.replace("{}", a);
            cases.push((response.clone(), (*a).to_owned()));
            cases.push((response, answers[(i + 1) % answers.len()].to_owned()));
        }
    }
    cases
}

fn all_cases() -> Vec<(String, String)> {
    let mut cases: Vec<_> = CASES
        .iter()
        .map(|(r, g)| ((*r).to_owned(), (*g).to_owned()))
        .collect();
    cases.extend(generated_cases());
    cases
}

const REFERENCE: &str = r#"
import json, sys
from skyrl_gym.envs.aime.utils import compute_score
cases = json.loads(sys.stdin.buffer.read().decode("utf-8"))
print(json.dumps([compute_score(r, g) for r, g in cases]))
"#;

/// skyrl-gym's `compute_score` for every case, as `{score, acc, pred}`.
fn reference(cases: &[(String, String)]) -> Vec<Value> {
    let results: Vec<Value> =
        serde_json::from_value(common::skyrl_gym_reference(REFERENCE, &json!(cases))).unwrap();
    assert_eq!(results.len(), cases.len());
    results
}

/// One episode of the plugin per case, as `{score, acc, pred}`.
fn plugin(cases: &[(String, String)]) -> Vec<Value> {
    let engine = common::engine(Default::default());
    let plugin = common::load(&engine, "aime");
    cases
        .iter()
        .map(|(response, gt)| {
            let extras = json!({ "reward_model": { "ground_truth": gt } });
            let mut env = plugin.create_env(&json!({}), &extras).unwrap();
            env.init(&[Message::user("q")]).unwrap();
            let step = env.step(response).unwrap();
            assert!(step.done, "one step is always done");
            assert!(step.observations.is_empty());
            env.close().unwrap();
            json!({
                "score": step.reward,
                "acc": step.metadata["acc"],
                "pred": step.metadata["pred"],
            })
        })
        .collect()
}

#[test]
fn aime_plugin_matches_skyrl_gym_compute_score() {
    let cases = all_cases();
    assert!(cases.len() >= 40);
    let want = reference(&cases);
    let got = plugin(&cases);
    let differing: Vec<String> = cases
        .iter()
        .zip(want.iter().zip(&got))
        .filter(|(_, (w, g))| w != g)
        .map(|((r, gt), (w, g))| {
            format!("response {r:?}, ground truth {gt:?}:\n  python {w}\n  plugin {g}")
        })
        .collect();
    assert!(
        differing.is_empty(),
        "{} of {} cases differ:\n{}",
        differing.len(),
        cases.len(),
        differing.join("\n")
    );
    let correct = want.iter().filter(|w| w["acc"] == true).count();
    assert!(
        correct > 10 && correct < cases.len() - 10,
        "both outcomes are covered ({correct} correct)"
    );
}

#[test]
fn aime_falls_back_to_reward_spec_and_rejects_a_missing_ground_truth() {
    let engine = common::engine(Default::default());
    let plugin = common::load(&engine, "aime");
    let extras = json!({ "reward_spec": { "ground_truth": "204" } });
    let mut env = plugin.create_env(&json!({}), &extras).unwrap();
    env.init(&[Message::user("q")]).unwrap();
    let step = env.step("Answer: 204").unwrap();
    assert_eq!(step.reward, 1.0);
    assert_eq!(step.metadata, json!({ "acc": true, "pred": "204" }));
    assert!(plugin.create_env(&json!({}), &json!({})).is_err());
}
