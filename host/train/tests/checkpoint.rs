//! Checkpoints: round trip, atomic layout, latest marker, pruning, resume modes.

use skyrl_train::checkpoint::{
    list_checkpoints, load_checkpoint, resolve_resume, save_checkpoint, CheckpointData,
    TrainerState, LATEST_FILE,
};
use skyrl_train::dataset::DataPosition;
use skyrl_train::optim::{AdamW, AdamWParams, LrSchedule};
use tch::{Kind, Tensor};

fn state(step: u64) -> TrainerState {
    TrainerState {
        global_step: step,
        data_position: DataPosition {
            epoch: 1,
            batch: step as usize,
        },
        seed: 42,
        kl_ctrl_value: Some(0.001),
        metrics: [("reward".to_string(), 0.5)].into_iter().collect(),
        extra: serde_json::json!({"note": "x"}),
    }
}

#[test]
fn save_load_round_trip_with_optimizer_and_pruning() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ckpts");
    let w = Tensor::arange(6, (Kind::Float, tch::Device::Cpu))
        .reshape([2, 3])
        .set_requires_grad(true);
    let mut opt = AdamW::new(
        vec![("w".into(), w.shallow_clone())],
        AdamWParams {
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        },
        LrSchedule::Constant,
    );
    (&w * &w).sum(Kind::Float).backward();
    opt.step(1.0);
    let model = vec![("w".to_string(), w.detach())];
    let critic = vec![(
        "v".to_string(),
        Tensor::ones([2], (Kind::Float, tch::Device::Cpu)),
    )];
    for step in [10u64, 20, 30] {
        let s = state(step);
        save_checkpoint(
            &root,
            &CheckpointData {
                model: &model,
                optimizer: &opt.state_tensors(),
                extra: &[("critic", &critic)],
                state: &s,
            },
            2,
        )
        .unwrap();
    }
    assert_eq!(
        list_checkpoints(&root).unwrap(),
        vec![20, 30],
        "keeps the newest 2"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(LATEST_FILE)).unwrap(),
        "30"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");

    let latest = resolve_resume(&root, Some("latest"), None)
        .unwrap()
        .unwrap();
    let ck = load_checkpoint(&latest).unwrap();
    assert_eq!(ck.state, state(30));
    assert_eq!(ck.model[0].0, "w");
    assert!(ck.model[0].1.equal(&w.detach()));
    assert!(ck.extra["critic"][0].1.equal(&critic[0].1));
    let mut fresh = AdamW::new(
        vec![("w".into(), w.detach().copy())],
        opt.hp,
        LrSchedule::Constant,
    );
    fresh.load_state_tensors(ck.optimizer).unwrap();
    assert_eq!(fresh.step_count(), 1);
}

#[test]
fn resume_modes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    assert!(
        resolve_resume(root, Some("latest"), None)
            .unwrap()
            .is_none(),
        "nothing to resume yet"
    );
    assert!(resolve_resume(root, None, None).unwrap().is_none());
    assert!(resolve_resume(root, Some("none"), None).unwrap().is_none());
    let p = save_checkpoint(
        root,
        &CheckpointData {
            model: &[],
            optimizer: &[],
            extra: &[],
            state: &state(5),
        },
        -1,
    )
    .unwrap();
    assert_eq!(
        resolve_resume(root, Some("latest"), None).unwrap(),
        Some(p.clone())
    );
    let s = p.display().to_string();
    assert_eq!(
        resolve_resume(root, Some("from_path"), Some(&s)).unwrap(),
        Some(p.clone())
    );
    let e = resolve_resume(root, Some("from_path"), Some("/nonexistent"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a checkpoint directory"), "{e}");
    assert!(resolve_resume(root, Some("bogus"), None).is_err());
    // a marker pointing at a missing checkpoint is an error, not a silent fresh start
    std::fs::write(root.join(LATEST_FILE), "99").unwrap();
    let e = resolve_resume(root, Some("latest"), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("99"), "{e}");
    // a corrupt state file is reported with its path
    std::fs::write(p.join("trainer_state.json"), "{").unwrap();
    let e = format!("{:#}", load_checkpoint(&p).err().unwrap());
    assert!(e.contains("trainer_state.json"), "{e}");
}
