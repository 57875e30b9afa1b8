//! `skyrl plugin push/pull/list/search` and `skyrl train --plugin oci://...`
//! against a real registry (Debian's docker-registry on loopback).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use skyrl_registry::local_registry::LocalRegistry;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn plugin(name: &str) -> String {
    let path = repo().join(format!("artifacts/plugins/{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run scripts/build-plugins",
        path.display()
    );
    path.display().to_string()
}

/// Runs skyrl in the repo with its own registry cache under `cache`.
fn skyrl(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skyrl"))
        .args(args)
        .current_dir(repo())
        .env("SKYRL_CACHE_DIR", cache)
        .env_remove("DOCKER_CONFIG")
        .output()
        .expect("running skyrl")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn push_search_list_pull_and_train_from_a_registry_with_a_lock_file() {
    let reg = LocalRegistry::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let host = reg.address();
    let env_repo = format!("{host}/skyrl/string-transform");
    for tag in ["0.1.0", "0.1.1"] {
        let report: serde_json::Value = serde_json::from_str(&ok(skyrl(
            &cache,
            &[
                "plugin",
                "push",
                &plugin("string_transform"),
                &format!("{env_repo}:{tag}"),
            ],
        )))
        .unwrap();
        assert!(report["manifest_digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"));
    }
    ok(skyrl(
        &cache,
        &[
            "plugin",
            "push",
            &plugin("calculator"),
            &format!("oci://{host}/skyrl/calculator:1.0.0"),
        ],
    ));

    let found = ok(skyrl(&cache, &["plugin", "search", &host, "string"]));
    assert!(
        found.contains("skyrl/string-transform  0.1.1  environment"),
        "{found}"
    );
    assert!(!found.contains("calculator"), "{found}");
    let tags = ok(skyrl(&cache, &["plugin", "list", &env_repo]));
    assert_eq!(
        tags.lines().collect::<Vec<_>>(),
        [format!("{env_repo}:0.1.1"), format!("{env_repo}:0.1.0")]
    );

    let out_file = dir.path().join("calc.wasm");
    let pulled: serde_json::Value = serde_json::from_str(&ok(skyrl(
        &cache,
        &[
            "plugin",
            "pull",
            &format!("{host}/skyrl/calculator:^1"),
            "-o",
            out_file.to_str().unwrap(),
        ],
    )))
    .unwrap();
    assert_eq!(pulled["tag"], "1.0.0");
    assert_eq!(
        std::fs::read(&out_file).unwrap(),
        std::fs::read(plugin("calculator")).unwrap()
    );
    let inspected = ok(skyrl(
        &cache,
        &[
            "plugin",
            "inspect",
            &format!("oci://{host}/skyrl/calculator:1.0.0"),
            "--lock",
            dir.path().join("i.lock").to_str().unwrap(),
        ],
    ));
    assert!(inspected.contains("\"kind\": \"tool\""), "{inspected}");

    // Train one step from the registry; the lock pins ^0.1 to 0.1.1.
    let lock = dir.path().join("skyrl.lock");
    let source = format!("string_transform=oci://{env_repo}:^0.1");
    let overrides = [
        format!("trainer.ckpt_path={}", dir.path().join("ckpts").display()),
        format!(
            "trainer.export_path={}",
            dir.path().join("exports").display()
        ),
        format!("trainer.log_path={}", dir.path().join("logs").display()),
        "trainer.train_batch_size=4".into(),
        "trainer.policy_mini_batch_size=4".into(),
        "trainer.micro_train_batch_size_per_gpu=8".into(),
        "trainer.eval_before_train=false".into(),
        "trainer.eval_interval=100".into(),
        "trainer.ckpt_interval=100".into(),
        "generator.n_samples_per_prompt=2".into(),
    ];
    let train = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "--quiet",
            "--plugin",
            &source,
            "--lock",
            lock.to_str().unwrap(),
            "--config",
            "configs/demo.yaml",
            "--max-steps",
            "1",
        ];
        args.extend_from_slice(extra);
        args.extend(overrides.iter().map(String::as_str));
        skyrl(&cache, &args)
    };
    let first = train(&[]);
    assert!(
        text(&first).contains("trained steps 0..1"),
        "{}",
        text(&first)
    );
    let pinned = std::fs::read_to_string(&lock).unwrap();
    assert!(
        pinned.contains(&format!("{env_repo}:0.1.1@sha256:")),
        "{pinned}"
    );

    // With the registry gone, --locked still trains from the verified cache.
    drop(reg);
    let _ = std::fs::remove_dir_all(dir.path().join("ckpts"));
    let again = train(&["--locked"]);
    assert!(
        text(&again).contains("trained steps 0..1"),
        "{}",
        text(&again)
    );
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        pinned,
        "lock unchanged"
    );
}

#[test]
fn registry_errors_are_clear_cli_errors() {
    let reg = LocalRegistry::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let host = reg.address();

    let out = skyrl(
        &cache,
        &[
            "plugin",
            "push",
            repo().join("README.md").to_str().unwrap(),
            &format!("{host}/skyrl/readme:1.0.0"),
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("not a loadable skyrl plugin"),
        "{}",
        text(&out)
    );

    let out = skyrl(
        &cache,
        &[
            "plugin",
            "push",
            &plugin("calculator"),
            &format!("{host}/skyrl/calculator:^1"),
        ],
    );
    assert!(text(&out).contains("exact tag"), "{}", text(&out));

    let out = skyrl(
        &cache,
        &[
            "env",
            "run",
            "--plugin",
            &format!("oci://{host}/skyrl/nothing:1.0.0"),
            "--prompt",
            "p",
            "--action",
            "a",
            "--lock",
            dir.path().join("l").to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("was not found in the registry"),
        "{}",
        text(&out)
    );
    assert!(
        !dir.path().join("l").exists(),
        "failed resolutions write no lock"
    );

    let out = skyrl(
        &cache,
        &[
            "train",
            "--plugin",
            "oci://not-a-host/x:1.0.0",
            "--config",
            "configs/demo.yaml",
        ],
    );
    assert!(
        text(&out).contains("is not a registry host"),
        "{}",
        text(&out)
    );
}
