//! Parsing tests with injected variable maps (the process env is never touched).
use super::*;
use std::collections::HashMap;

fn parse(pairs: &[(&str, &str)]) -> Result<Option<LaunchEnv>, DistError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LaunchEnv::from_vars(|name| map.get(name).cloned())
}

fn err_of(pairs: &[(&str, &str)]) -> String {
    parse(pairs).expect_err("should fail").to_string()
}

#[test]
fn nothing_set_is_single_process() {
    assert_eq!(parse(&[]).unwrap(), None);
    assert_eq!(parse(&[("RANK", "")]).unwrap(), None);
    assert_eq!(LaunchEnv::single().world_size, 1);
}

#[test]
fn torchrun_variables() {
    let env = parse(&[
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "2"),
        ("GROUP_RANK", "1"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29500"),
        ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ("TORCHELASTIC_RESTART_COUNT", "2"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(
        (
            env.rank,
            env.world_size,
            env.local_rank,
            env.local_world_size
        ),
        (3, 4, 1, 2)
    );
    assert_eq!(
        (env.group_rank, env.master_port, env.restart_count),
        (1, 29500, 2)
    );
    assert!(env.use_agent_store);
    assert_eq!(env.launcher, Launcher::Env);
    assert_eq!(env.store_host(), "the torchrun agent at 10.0.0.1:29500");
}

#[test]
fn by_hand_defaults_local_rank_and_rank0_store() {
    let env = parse(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "1234"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(
        (env.local_rank, env.local_world_size, env.group_rank),
        (1, 2, 0)
    );
    assert!(!env.use_agent_store);
    assert_eq!(env.store_host(), "rank 0 at 127.0.0.1:1234");
    // A world of one needs no master.
    let env = parse(&[("RANK", "0"), ("WORLD_SIZE", "1")])
        .unwrap()
        .unwrap();
    assert_eq!(
        (env.master_addr.as_str(), env.master_port),
        ("127.0.0.1", 0)
    );
}

#[test]
fn missing_master_is_named() {
    let e = err_of(&[("RANK", "0"), ("WORLD_SIZE", "2")]);
    assert!(
        e.contains("MASTER_ADDR") && e.contains("WORLD_SIZE=2"),
        "{e}"
    );
    let e = err_of(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "h")]);
    assert!(e.starts_with("launch environment: MASTER_PORT"), "{e}");
}

#[test]
fn bad_values_are_named() {
    let base = [("MASTER_ADDR", "h"), ("MASTER_PORT", "1")];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut v: Vec<(&str, &str)> = base.to_vec();
        v.extend_from_slice(extra);
        err_of(&v)
    };
    let e = with(&[("RANK", "2"), ("WORLD_SIZE", "2")]);
    assert!(e.contains("RANK=2 must be below WORLD_SIZE=2"), "{e}");
    let e = with(&[("RANK", "x"), ("WORLD_SIZE", "2")]);
    assert!(
        e.contains("RANK") && e.contains("\"x\" is not a non-negative integer"),
        "{e}"
    );
    let e = with(&[("RANK", "0"), ("WORLD_SIZE", "0")]);
    assert!(e.contains("WORLD_SIZE: must be at least 1"), "{e}");
    let e = with(&[("RANK", "0")]);
    assert!(e.contains("WORLD_SIZE"), "{e}");
    let e = with(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "3"),
        ("LOCAL_WORLD_SIZE", "2"),
    ]);
    assert!(
        e.contains("LOCAL_RANK=3 must be below LOCAL_WORLD_SIZE=2"),
        "{e}"
    );
    let e = err_of(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "99999"),
    ]);
    assert!(e.contains("MASTER_PORT") && e.contains("not a port"), "{e}");
}

#[test]
fn slurm_variables() {
    let env = parse(&[
        ("SLURM_PROCID", "5"),
        ("SLURM_NTASKS", "6"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NODEID", "2"),
        ("SLURM_TASKS_PER_NODE", "2(x2),1"),
        ("MASTER_ADDR", "n0"),
        ("MASTER_PORT", "29400"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(
        (
            env.rank,
            env.world_size,
            env.local_rank,
            env.local_world_size
        ),
        (5, 6, 0, 1)
    );
    assert_eq!((env.group_rank, env.launcher), (2, Launcher::Slurm));
    let env = parse(&[
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_NTASKS_PER_NODE", "2"),
        ("MASTER_ADDR", "n0"),
        ("MASTER_PORT", "29400"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(env.local_world_size, 2);
    let e = err_of(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS_PER_NODE", "2"),
    ]);
    assert!(
        e.contains("MASTER_ADDR") && e.contains("SLURM does not set it"),
        "{e}"
    );
    let e = err_of(&[("SLURM_PROCID", "0")]);
    assert!(e.contains("SLURM_NTASKS"), "{e}");
}

#[test]
fn slurm_task_list() {
    assert_eq!(tasks_on_node("4", 0).unwrap(), 4);
    assert_eq!(tasks_on_node("2(x3),1", 2).unwrap(), 2);
    assert_eq!(tasks_on_node("2(x3),1", 3).unwrap(), 1);
    assert!(tasks_on_node("2(x3),1", 4).is_err());
    assert!(tasks_on_node("2(x", 0).is_err());
}
