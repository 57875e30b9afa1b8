//! Hugging Face hub names resolved in a fake hub cache holding a real tiny model.

mod common;

use std::path::Path;

use common::cpu;
use skyrl_model::hub::{resolve_in, resolve_path_or_id_in};
use skyrl_model::{Arch, CausalLm, HubError, HubId, RepoType, TinySize, Tokenizer};

const COMMIT: &str = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678";

/// `models--org--tiny` with `refs/main` and `refs/v1` naming one snapshot
/// holding a tiny model; returns the snapshot.
fn fake_cache(cache: &Path) -> std::path::PathBuf {
    let repo = cache.join("models--org--tiny");
    let snapshot = repo.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(snapshot.parent().unwrap()).unwrap();
    skyrl_model::init_tiny_model(Arch::Qwen2, TinySize::Tiny, &snapshot, 0).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), COMMIT).unwrap();
    std::fs::write(repo.join("refs/v1"), format!("{COMMIT}\n")).unwrap();
    snapshot
}

#[test]
fn hub_names_resolve_to_a_loadable_snapshot() {
    let cache = tempfile::tempdir().unwrap();
    let snapshot = fake_cache(cache.path());
    let by_commit = format!("org/tiny@{COMMIT}");
    for name in ["org/tiny", "org/tiny@v1", by_commit.as_str()] {
        let id = HubId::parse(name).unwrap();
        let dir = resolve_in(cache.path(), RepoType::Model, &id).unwrap();
        assert_eq!(dir, snapshot, "{name}");
    }
    let dir = resolve_path_or_id_in(cache.path(), RepoType::Model, "hf://org/tiny").unwrap();
    let model = CausalLm::from_pretrained(&dir, &cpu()).unwrap();
    assert_eq!(model.config().num_hidden_layers, 2);
    Tokenizer::from_dir(&dir).unwrap();

    // An existing local path wins, whatever it looks like.
    let local = snapshot.display().to_string();
    assert_eq!(
        resolve_path_or_id_in(Path::new("/nonexistent"), RepoType::Model, &local).unwrap(),
        snapshot
    );
}

#[test]
fn missing_models_say_where_they_were_looked_for_and_how_to_fetch_them() {
    let cache = tempfile::tempdir().unwrap();
    fake_cache(cache.path());
    let c = cache.path().display().to_string();
    let cases = [
        (
            "org/other",
            "models--org--other",
            "huggingface-cli download org/other`",
        ),
        (
            "org/tiny@v2",
            "models--org--tiny/refs/v2",
            "download org/tiny --revision v2",
        ),
        (
            "org/tiny@0000000000000000000000000000000000000000",
            "snapshots/0000000000000000000000000000000000000000",
            "hf download org/tiny --revision",
        ),
    ];
    for (name, missing, fetch) in cases {
        let err = resolve_path_or_id_in(cache.path(), RepoType::Model, name).unwrap_err();
        assert!(matches!(err, HubError::NotCached { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("model `{name}`")), "{msg}");
        assert!(msg.contains(&c) && msg.contains(missing), "{msg}");
        assert!(msg.contains(fetch), "{msg}");
    }
    let err = resolve_path_or_id_in(cache.path(), RepoType::Model, "/no/such/model").unwrap_err();
    assert!(matches!(err, HubError::NotFound { .. }), "{err:?}");
    assert!(
        err.to_string().contains("/no/such/model does not exist"),
        "{err}"
    );
}
