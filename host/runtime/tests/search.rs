//! The `search` and `searchcode` envs and the `search_tool` plugin against
//! skyrl-gym 0.4.0's SearchEnv and SearchCodeEnv: both drive the same BM25
//! retrieval server (skyrl-retrieval, on loopback, over the shipped toy
//! corpus) with the same episodes, and must agree on every observation,
//! reward, done flag and metadata. Also: a
//! retrieval server that is down is an observation, not a failed episode,
//! and the tool reaches the server only through an HTTP grant.

mod common;

use std::sync::Arc;

use serde_json::{json, Value};
use skyrl_retrieval::{BackgroundServer, Index};
use skyrl_runtime::{Message, NetworkPolicy, Plugin, SandboxPolicy, ToolRouter};

fn retrieval_server() -> BackgroundServer {
    let index =
        Index::load(&common::repo().join("data/search/toy_corpus.jsonl")).expect("toy corpus");
    BackgroundServer::start("127.0.0.1:0".parse().unwrap(), Arc::new(index), 3).expect("server")
}

/// The search tool, granted `allowed` origins.
fn search_tool(allowed: Vec<String>) -> Plugin {
    common::load(common::shared_engine(), "search_tool")
        .with_policy(SandboxPolicy {
            network: NetworkPolicy {
                allowed_hosts: allowed,
                ..NetworkPolicy::default()
            },
            ..SandboxPolicy::default()
        })
        .unwrap()
}

/// The search env with its tool, the tool granted `allowed` origins.
fn search_env(allowed: Vec<String>) -> Plugin {
    let router = Arc::new(ToolRouter::new(vec![search_tool(allowed)]).expect("router"));
    common::load(common::shared_engine(), "search")
        .with_tools(router)
        .unwrap()
}

/// Episodes: (ground-truth targets, max_turns, actions).
fn episodes() -> Vec<(Value, u32, Vec<&'static str>)> {
    vec![
        (
            json!(["Paris"]),
            3,
            vec![
                "<think>I should look it up.</think><search>capital of France</search>",
                "<answer> Paris </answer>",
            ],
        ),
        (
            json!(["Rhone", "Rhône"]),
            3,
            vec![
                "<search>Which rivers meet at Lyon?</search> and <search>ignored</search>",
                "no tags at all",
                "<answer>the Saone</answer>",
            ],
        ),
        (
            json!("Paris"),
            2,
            vec!["<search>Eiffel Tower city</search>", "still thinking"],
        ),
        (
            json!(["Marseille"]),
            4,
            vec![
                "<search>   </search>",
                "<search>zzzz qqqq nothing matches</search>",
                "<search>port city Mediterranean coast café</search>",
                "<answer>marseille.</answer>",
            ],
        ),
        (
            json!(["x"]),
            2,
            vec!["<answer>x</answer><answer>y</answer>"],
        ),
    ]
}

fn extras(targets: &Value, max_turns: u32) -> Value {
    json!({
        "reward_spec": {"method": "rule", "ground_truth": {"target": targets}},
        "max_turns": max_turns,
    })
}

/// Runs episodes through skyrl-gym's own env classes. searchcode builds its
/// SearchToolGroup with the default URL (127.0.0.1:8000), so the driver
/// points that default at the test's server; nothing else is changed.
const SKYRL_GYM_DRIVER: &str = r#"
import functools, json, sys
import skyrl_gym.envs.searchcode.env as searchcode
from skyrl_gym.envs.search.env import SearchEnv, SearchEnvConfig
from skyrl_gym.tools import SearchToolGroup
job = json.load(sys.stdin)
searchcode.SearchToolGroup = functools.partial(SearchToolGroup, search_url=job["search_url"], timeout=5)
out = []
for ep in job["episodes"]:
    if job["env"] == "search":
        config = SearchEnvConfig(search_url=job["search_url"], topk=3, timeout=5, log_requests=False)
        env = SearchEnv(config, ep["extras"])
    else:
        env = searchcode.SearchCodeEnv(None, ep["extras"])
    env.init([{"role": "user", "content": "q"}])
    steps = []
    for action in ep["actions"]:
        o = env.step(action)
        steps.append({"observations": o["observations"], "reward": float(o["reward"]),
                      "done": o["done"], "metadata": o["metadata"]})
    out.append(steps)
json.dump(out, sys.stdout)
"#;

fn skyrl_gym_steps(env: &str, search_url: &str, episodes: &[Value]) -> Vec<Vec<Value>> {
    let job = json!({"env": env, "search_url": search_url, "episodes": episodes});
    serde_json::from_value(common::skyrl_gym_reference(SKYRL_GYM_DRIVER, &job)).unwrap()
}

#[test]
fn search_episodes_agree_with_skyrl_gym() {
    let server = retrieval_server();
    let url = server.retrieve_url();
    let plugin = search_env(vec![format!("http://{}", server.addr())]);
    let episodes = episodes();
    let jobs: Vec<Value> = episodes
        .iter()
        .map(|(targets, turns, actions)| json!({"extras": extras(targets, *turns), "actions": actions}))
        .collect();
    let reference = skyrl_gym_steps("search", &url, &jobs);
    let config = json!({"search_url": url, "topk": 3, "timeout": 5});
    let compared = compare(&plugin, &config, &jobs, &reference);
    assert_eq!(compared, 12);
    // The toy corpus answered: real passages reached both sides.
    let contents: Vec<&str> = reference
        .iter()
        .flatten()
        .filter_map(|step| step["observations"][0]["content"].as_str())
        .collect();
    assert!(
        contents.iter().any(|c| c.contains(r#"Doc 1: \"Paris"#)),
        "{contents:?}"
    );
}

/// Runs `jobs` through `plugin` and checks every step against `reference`;
/// the number of steps compared.
fn compare(plugin: &Plugin, config: &Value, jobs: &[Value], reference: &[Vec<Value>]) -> usize {
    let mut compared = 0;
    for (job, expected) in jobs.iter().zip(reference) {
        let mut env = plugin.create_env(config, &job["extras"]).unwrap();
        env.init(&[Message::user("q")]).unwrap();
        let actions = job["actions"].as_array().unwrap();
        assert_eq!(actions.len(), expected.len());
        for (action, want) in actions.iter().zip(expected) {
            let got = env.step(action.as_str().unwrap()).unwrap();
            let got = json!({
                "observations": got.observations,
                "reward": got.reward,
                "done": got.done,
                "metadata": got.metadata,
            });
            assert_eq!(&got, want, "action {action}");
            compared += 1;
        }
    }
    compared
}

#[test]
fn searchcode_episodes_agree_with_skyrl_gym() {
    let server = retrieval_server();
    let url = server.retrieve_url();
    let engine = common::shared_engine();
    let tool = search_tool(vec![format!("http://{}", server.addr())]);
    let router = ToolRouter::new(vec![tool, common::load(engine, "python")]).expect("router");
    let plugin = common::load(engine, "searchcode")
        .with_tools(Arc::new(router))
        .unwrap();
    let jobs = vec![
        json!({"extras": {"reward_spec": {"ground_truth": "42"}, "max_turns": 4}, "actions": [
            "<tool><search>capital of France</search></tool>",
            "<tool><python>print(6 * 7)</python></tool>",
            "so #### 42 <solution>42</solution>",
        ]}),
        json!({"extras": {"reward_spec": {"ground_truth": "7"}, "max_turns": 5}, "actions": [
            "<tool><python>x = 1</python></tool>",
            "<tool><python>import sys; sys.stderr.write('boom\\n')</python></tool>",
            "<tool> <search>  Which rivers meet at Lyon </search> </tool>",
            "<solution>#### 8</solution>",
        ]}),
        json!({"extras": {"reward_spec": {"ground_truth": "1"}, "max_turns": 3}, "actions": [
            "<tool><calc>1+1</calc></tool>",
            "no tool here",
            "#### 1",
        ]}),
    ];
    let reference = skyrl_gym_steps("searchcode", &url, &jobs);
    let config = json!({"search_url": url, "topk": 3, "timeout": 5});
    assert_eq!(compare(&plugin, &config, &jobs, &reference), 10);
}

#[test]
fn a_dead_retrieval_server_is_an_observation_and_the_episode_goes_on() {
    let server = retrieval_server();
    let addr = server.addr();
    drop(server);
    let plugin = search_env(vec![format!("http://{addr}")]);
    let config = json!({"search_url": format!("http://{addr}/retrieve"), "timeout": 1.5});
    let mut env = plugin
        .create_env(&config, &extras(&json!(["Paris"]), 3))
        .unwrap();
    env.init(&[Message::user("q")]).unwrap();
    let start = std::time::Instant::now();
    let step = env.step("<search>capital of France</search>").unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
    let observation = &step.observations[0].content;
    assert!(
        observation.starts_with("\n<information>{\"result\": \"Search error: cannot reach"),
        "{observation}"
    );
    let end = env.step("<answer>Paris</answer>").unwrap();
    assert!(end.done);
    assert_eq!(end.reward, 1.0);
}

#[test]
fn without_a_grant_the_search_is_refused_by_name() {
    let server = retrieval_server();
    let plugin = search_env(Vec::new());
    let config = json!({"search_url": server.retrieve_url()});
    let mut env = plugin
        .create_env(&config, &extras(&json!(["Paris"]), 3))
        .unwrap();
    env.init(&[Message::user("q")]).unwrap();
    let step = env.step("<search>capital of France</search>").unwrap();
    let observation = &step.observations[0].content;
    assert!(
        observation.contains("denied") && observation.contains("allowed_hosts"),
        "{observation}"
    );
}
