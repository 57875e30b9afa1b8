//! The lcb env against skyrl-gym 0.4.0's own `LCBEnv` (LiveCodeBench's
//! harness, installed with pip): the same responses to the same rows must
//! get the same reward and `parsed_code`. The cases are the ones where a
//! home-made judge drifts from LiveCodeBench: stdin read by `input()`,
//! `sys.stdin`, `open(0)`; `if __name__ == '__main__'`; `sys.exit` after
//! printing; leading blank or indented lines; float output compared as
//! decimals; functional tests with `metadata.func_name` (a `Solution`
//! method, a plain function, tuples, `True` for `1`). The deliberate
//! difference (numpy is not in the sandbox) is pinned too.

mod common;

use std::sync::Arc;

use serde_json::{json, Value};
use skyrl_runtime::{Message, Plugin, ToolRouter};

const SKYRL_GYM_DRIVER: &str = r#"
import json, os, sys
import skyrl_gym
job = json.load(sys.stdin)
# The programs print to the harness's real stdout (fd 1): keep it for the result.
result_fd = os.dup(1)
os.dup2(2, 1)
out = []
for case in job:
    env = skyrl_gym.make("lcb", env_config={}, extras={"reward_spec": {"method": "rule", "ground_truth": case["ground_truth"]}})
    env.init([{"role": "user", "content": "solve"}])
    o = env.step(case["response"])
    out.append({"reward": o["reward"], "parsed_code": o["metadata"]["parsed_code"]})
os.write(result_fd, json.dumps(out).encode())
"#;

fn lcb() -> Plugin {
    let router = Arc::new(
        ToolRouter::new(vec![common::load(common::shared_engine(), "python")]).expect("router"),
    );
    common::load(common::shared_engine(), "lcb")
        .with_tools(router)
        .unwrap()
}

fn stdin_tests(pairs: &[(&str, &str)]) -> String {
    let tests: Vec<Value> = pairs
        .iter()
        .map(|(i, o)| json!({"input": i, "output": o, "testtype": "stdin"}))
        .collect();
    Value::Array(tests).to_string()
}

fn functional_tests(name: &str, pairs: &[(&str, &str)]) -> String {
    let tests: Vec<Value> = pairs
        .iter()
        .map(|(i, o)| {
            json!({"input": i, "output": o, "testtype": "functional", "metadata": {"func_name": name}})
        })
        .collect();
    Value::Array(tests).to_string()
}

fn fenced(code: &str) -> String {
    format!("Here it is:\n```python\n{code}\n```\n")
}

/// (ground truth, response)
fn cases() -> Vec<(String, String)> {
    let add = stdin_tests(&[("1 2\n", "3\n"), ("-5 7\n", "2\n")]);
    let lines = stdin_tests(&[("3\n1\n2\n3\n", "6\n")]);
    let half = stdin_tests(&[("1\n", "0.5\n"), ("3\n", "1.5\n")]);
    let third = stdin_tests(&[("3\n", "0.3333333333333333\n")]);
    let two_sum = functional_tests(
        "twoSum",
        &[("[2, 7, 11, 15]\n9", "[0, 1]"), ("[3, 3]\n6", "[0, 1]")],
    );
    let plain = functional_tests("double", &[("4", "8"), ("-1", "-2")]);
    let truth = functional_tests("isEven", &[("4", "1"), ("3", "0")]);
    let pairs = functional_tests("pairs", &[("2", "[[0, 1]]")]);
    vec![
        (add.clone(), fenced("a, b = map(int, input().split())\nprint(a + b)")),
        (add.clone(), fenced("import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)")),
        (add.clone(), fenced("a, b = map(int, open(0).read().split())\nprint(a + b)")),
        (add.clone(), fenced("import sys\nline = sys.stdin.readline()\nprint(sum(map(int, line.split())))")),
        (add.clone(), fenced("def main():\n    print(sum(map(int, input().split())))\n\nif __name__ == '__main__':\n    main()")),
        (add.clone(), fenced("import sys\nprint(sum(map(int, input().split())))\nsys.exit(0)\nprint('never')")),
        (add.clone(), fenced("print(sum(map(int, input().split())))\nexit()")),
        (add.clone(), "```python\n\n\nprint(sum(map(int, input().split())))\n```".to_owned()),
        (add.clone(), "```python\n    x = input()\n    print(sum(map(int, x.split())))\n```".to_owned()),
        (add.clone(), fenced("print(sum(map(int, input().split())), end='  \\n\\n')")),
        (add.clone(), fenced("print(sum(map(int, input().split())) + 1)")),
        (add.clone(), fenced("raise ValueError('boom')")),
        (add.clone(), fenced("print(sum(map(int, input().split())))\nprint('extra')")),
        (add.clone(), "no code at all".to_owned()),
        (add.clone(), "```python \nprint(3)\n```".to_owned()),
        (lines.clone(), fenced("n = int(input())\nprint(sum(int(input()) for _ in range(n)))")),
        (lines.clone(), fenced("import sys\nn, *xs = map(int, sys.stdin)\nprint(sum(xs))")),
        (lines.clone(), fenced("data = [int(l) for l in open(0)]\nprint(sum(data[1:]))")),
        (half.clone(), fenced("print(int(input()) / 2)")),
        (half.clone(), fenced("print(f'{int(input()) / 2:.6f}')")),
        (half.clone(), fenced("print(int(input()) * 0.5 + 1e-12)")),
        (third.clone(), fenced("print(int(input()) / 9)")),
        (third.clone(), fenced("print(round(1 / int(input()), 6))")),
        (two_sum.clone(), fenced("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n                return [seen[target - x], i]\n            seen[x] = i")),
        (two_sum.clone(), fenced("class Solution:\n    def twoSum(self, nums, target):\n        return (0, 1)")),
        (two_sum.clone(), fenced("class Solution:\n    def twoSum(self, nums, target):\n        print('debug')\n        return [1, 0]")),
        (two_sum.clone(), fenced("class Solution:\n    def other(self, nums, target):\n        return [0, 1]")),
        (plain.clone(), fenced("def double(x):\n    return x * 2")),
        (plain.clone(), fenced("def double(x):\n    return x * 2.0")),
        (truth.clone(), fenced("def isEven(x):\n    return x % 2 == 0")),
        (pairs.clone(), fenced("def pairs(n):\n    return [(0, 1)]")),
        (pairs.clone(), fenced("def pairs(n):\n    return [[0, 1]]")),
    ]
}

#[test]
fn lcb_rewards_agree_with_skyrl_gym() {
    let cases = cases();
    let job: Vec<Value> = cases
        .iter()
        .map(|(g, r)| json!({"ground_truth": g, "response": r}))
        .collect();
    let reference = common::skyrl_gym_reference(SKYRL_GYM_DRIVER, &Value::Array(job));
    let plugin = lcb();
    let mut passed = 0;
    for ((ground_truth, response), want) in cases.iter().zip(reference.as_array().unwrap()) {
        let extras = json!({"reward_spec": {"method": "rule", "ground_truth": ground_truth}});
        let mut env = plugin.create_env(&json!({}), &extras).unwrap();
        env.init(&[Message::user("solve")]).unwrap();
        let out = env.step(response).unwrap();
        assert!(out.done);
        assert_eq!(
            json!(out.reward),
            want["reward"],
            "{response}\n{}",
            out.metadata
        );
        assert_eq!(
            out.metadata["parsed_code"], want["parsed_code"],
            "{response}"
        );
        passed += usize::from(out.reward == 1.0);
    }
    // Both outcomes are exercised.
    assert!(
        passed >= 15 && passed < cases.len(),
        "{passed} of {}",
        cases.len()
    );
}

#[test]
fn numpy_programs_fail_naming_numpy_where_skyrl_gym_has_it() {
    let ground_truth = stdin_tests(&[("1 2\n", "3\n")]);
    let response = fenced("print(int(np.sum(np.array(list(map(int, input().split()))))))");
    let reference = common::skyrl_gym_reference(
        SKYRL_GYM_DRIVER,
        &json!([{"ground_truth": ground_truth, "response": response}]),
    );
    assert_eq!(reference[0]["reward"], json!(1.0));
    let extras = json!({"reward_spec": {"ground_truth": ground_truth}});
    let mut env = lcb().create_env(&json!({}), &extras).unwrap();
    let out = env.step(&response).unwrap();
    assert_eq!(out.reward, 0.0);
    let failure = out.metadata["failure"].as_str().unwrap();
    assert!(
        failure.contains("numpy") && failure.contains("sandbox"),
        "{failure}"
    );
}

#[test]
fn every_row_format_runs_and_bad_rows_are_config_errors() {
    let plugin = lcb();
    let code = fenced("class Solution:\n    def add(self, a, b):\n        return a + b");
    for ground_truth in [
        // LiveCodeBench's input_output object, as text and as JSON.
        json!(json!({"inputs": ["1\n2"], "outputs": ["3"], "fn_name": "add"}).to_string()),
        json!({"inputs": ["1\n2"], "outputs": ["3"], "fn_name": "add"}),
        // The project's own format.
        json!({"tests": [{"input": "1\n2", "output": "3", "testtype": "functional"}], "fn_name": "add"}),
    ] {
        let extras = json!({"reward_spec": {"ground_truth": ground_truth}});
        let mut env = plugin.create_env(&json!({}), &extras).unwrap();
        assert_eq!(env.step(&code).unwrap().reward, 1.0, "{ground_truth}");
    }
    for bad in [
        json!("[{\"input\": \"1\", \"output\": \"1\", \"testtype\": \"functional\"}]"),
        json!({"inputs": ["1"], "outputs": ["{oops"], "fn_name": "f"}),
        json!("not json"),
    ] {
        let extras = json!({"reward_spec": {"ground_truth": bad}});
        let err = plugin
            .create_env(&json!({}), &extras)
            .err()
            .expect("refused");
        assert!(
            err.to_string().contains("config")
                || err.to_string().contains("JSON")
                || err.to_string().contains("Function name"),
            "{err}"
        );
    }
}

#[test]
fn an_endless_program_is_stopped_and_scores_zero() {
    let plugin = lcb();
    let ground_truth = json!({"tests": [{"input": "", "output": "1"}], "timeout_s": 0.5});
    let extras = json!({"reward_spec": {"ground_truth": ground_truth}});
    let mut env = plugin.create_env(&json!({}), &extras).unwrap();
    let started = std::time::Instant::now();
    let out = env.step(&fenced("while True:\n    pass")).unwrap();
    assert_eq!(out.reward, 0.0);
    assert!(out.metadata["failure"]
        .as_str()
        .unwrap()
        .contains("Time Limit Exceeded"));
    assert!(
        started.elapsed().as_secs_f64() < 8.0,
        "{:?}",
        started.elapsed()
    );
    // A slow test that does finish is judged against the limit too.
    let mut env = plugin.create_env(&json!({}), &extras).unwrap();
    let out = env
        .step(&fenced("import time\ntime.sleep(0.8)\nprint(1)"))
        .unwrap();
    assert_eq!(out.reward, 0.0);
    let failure = out.metadata["failure"].as_str().unwrap();
    assert!(failure.contains("Time Limit Exceeded ("), "{failure}");
}
