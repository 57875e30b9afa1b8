//! The state store on both databases it supports: the same scenarios on a
//! SQLite file and on a real Postgres server (started on loopback by the
//! test), a Postgres restart under a running store, and the official
//! client's restart test with the service's state in Postgres; expired
//! checkpoints swept away.

mod common;

use common::postgres::PgServer;
use common::{options, restart_keeps_saved_weights, tiny_model};
use skyrl_tinker::store::FutureState;
use skyrl_tinker::{DbUrl, Store};

/// Finished futures and checkpoints survive a reopen; pending futures and
/// checkpoints are failed with the reason; a duplicate checkpoint is a 400
/// (not a 409, which the official client retries for minutes).
fn restart_keeps_results_and_fails_pending(url: &DbUrl) {
    let (done, pending) = {
        let s = Store::open(url).unwrap();
        let done = s.create_future("optim_step", Some("m")).unwrap();
        let pending = s.create_future("forward_backward", Some("m")).unwrap();
        assert!(pending > done);
        let body: Vec<u8> = (0..=255).collect();
        let ok = FutureState::Completed {
            content_type: "application/x-protobuf".into(),
            body,
        };
        s.finish_future(done, &ok).unwrap();
        s.create_checkpoint("m", "c1", "sampler", None).unwrap();
        s.set_checkpoint_status("m", "c1", "sampler", "completed")
            .unwrap();
        s.create_checkpoint("m", "c2", "training", Some(7200.0))
            .unwrap();
        (done, pending)
    };
    let s = Store::open(url).unwrap();
    match s.future(done).unwrap() {
        Some(FutureState::Completed { content_type, body }) => {
            assert_eq!(content_type, "application/x-protobuf");
            assert_eq!(body, (0..=255).collect::<Vec<u8>>());
        }
        other => panic!("{other:?}"),
    }
    match s.future(pending).unwrap() {
        Some(FutureState::Failed { error, category }) => {
            assert!(error.contains("stopped"), "{error}");
            assert_eq!(category, "server");
        }
        other => panic!("{other:?}"),
    }
    let statuses: Vec<(String, String)> = s
        .checkpoints("m")
        .unwrap()
        .into_iter()
        .map(|c| (c.checkpoint_id, c.status))
        .collect();
    assert_eq!(
        statuses,
        [
            ("c1".into(), "completed".into()),
            ("c2".into(), "failed".into())
        ]
    );
    assert!(s.future(9999).unwrap().is_none());
    assert_eq!(
        s.create_checkpoint("m", "c1", "sampler", None)
            .unwrap_err()
            .status,
        axum::http::StatusCode::BAD_REQUEST
    );
}

/// Sessions keep their first finish reason; models and sampling sessions
/// read back as written.
fn sessions_and_models_read_back(url: &DbUrl) {
    let s = Store::open(url).unwrap();
    s.create_session("s1", "0.38.0", &["a".into()]).unwrap();
    assert!(s.heartbeat("s1").unwrap());
    assert!(!s.heartbeat("nope").unwrap());
    assert_eq!(s.session_finished("s1").unwrap(), None);
    assert!(s.finish_session("s1", "success", Some("done")).unwrap());
    assert!(s.finish_session("s1", "errored", None).unwrap());
    assert_eq!(
        s.session_finished("s1").unwrap().as_deref(),
        Some("success")
    );
    assert!(!s.finish_session("nope", "success", None).unwrap());
    assert_eq!(
        s.session_finished("nope").unwrap_err().status,
        axum::http::StatusCode::NOT_FOUND
    );
    let row = skyrl_tinker::store::ModelRow {
        model_id: "s1:train:0".into(),
        session_id: "s1".into(),
        base_model: "tiny".into(),
        lora_rank: 8,
        lora_seed: u64::MAX - 1,
        created: 0.0,
    };
    s.create_model(&row).unwrap();
    let back = s.model("s1:train:0").unwrap();
    assert_eq!((back.lora_rank, back.lora_seed), (8, u64::MAX - 1));
    assert!(back.created > 0.0);
    assert_eq!(s.session_models("s1").unwrap(), ["s1:train:0"]);
    assert_eq!(s.models().unwrap().len(), 1);
    s.create_sampling_session("s1:sample:0", "s1", 0, None, Some("tinker://x"))
        .unwrap();
    assert_eq!(
        s.sampling_session("s1:sample:0").unwrap(),
        (None, Some("tinker://x".into()))
    );
}

#[test]
fn sqlite_store_keeps_state_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    restart_keeps_results_and_fails_pending(&DbUrl::Sqlite(dir.path().join("a.sqlite")));
    sessions_and_models_read_back(&DbUrl::Sqlite(dir.path().join("b.sqlite")));
}

#[test]
fn postgres_store_keeps_state_and_survives_a_database_restart() {
    let mut pg = PgServer::start();
    let url = DbUrl::Postgres(pg.url());
    restart_keeps_results_and_fails_pending(&url);
    // Same database, so a second scenario sees the first one's rows: use
    // ids of its own.
    sessions_and_models_read_back(&url);

    // The database restarts under an open store: the next statement
    // reconnects; while it is down, statements fail with the reason.
    let s = Store::open(&url).unwrap();
    let before = s.create_future("sample", None).unwrap();
    pg.stop();
    let down = s.create_future("sample", None).unwrap_err();
    assert!(
        down.detail.contains("state store") && !down.detail.contains("secret"),
        "{}",
        down.detail
    );
    pg.resume();
    let after = s.create_future("sample", None).unwrap();
    assert!(after > before);

    // A wrong URL fails at open with the reason, password hidden.
    let bad = DbUrl::Postgres(format!(
        "postgres://nobody:secret@127.0.0.1:{}/nowhere",
        url_port(&pg.url())
    ));
    let e = Store::open(&bad).err().expect("no such role").detail;
    assert!(e.contains("nobody:***@") && !e.contains("secret"), "{e}");
}

fn url_port(url: &str) -> &str {
    url.rsplit(':').next().unwrap().split('/').next().unwrap()
}

#[test]
fn the_official_client_restart_test_runs_on_postgres() {
    let pg = PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let data = dir.path().join("data");
    restart_keeps_saved_weights(&model, &data, Some(&pg.url()));
    // Nothing was written to a SQLite file beside the checkpoints.
    assert!(!data.join("tinker.sqlite").exists());
}

#[test]
fn expired_checkpoints_are_swept_with_their_files() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let state = skyrl_tinker::start(&options(&model, &dir.path().join("data"), None)).unwrap();
    let (store, config) = (&state.store, &state.config);
    for (name, ttl) in [("old", Some(-1.0)), ("fresh", Some(3600.0)), ("kept", None)] {
        store.create_checkpoint("m", name, "external", ttl).unwrap();
        store
            .set_checkpoint_status("m", name, "external", "completed")
            .unwrap();
        let d = config.checkpoint_dir("m", "external", name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("adapter_config.json"), b"{}").unwrap();
    }
    // A pending save is never swept, whatever its time.
    store
        .create_checkpoint("m", "writing", "external", Some(-1.0))
        .unwrap();
    assert_eq!(skyrl_tinker::checkpoints::sweep_expired(&state).unwrap(), 1);
    assert!(!config.checkpoint_dir("m", "external", "old").exists());
    assert!(config.checkpoint_dir("m", "external", "fresh").exists());
    let left: Vec<String> = store
        .checkpoints("m")
        .unwrap()
        .into_iter()
        .map(|c| c.checkpoint_id)
        .collect();
    assert_eq!(left, ["fresh", "kept", "writing"]);
    assert_eq!(skyrl_tinker::checkpoints::sweep_expired(&state).unwrap(), 0);
}
