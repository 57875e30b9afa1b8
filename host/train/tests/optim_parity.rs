//! AdamW, gradient clipping and the warmup schedule against torch.optim.AdamW.

mod common;

use common::{assert_close, run_python};
use serde_json::json;
use skyrl_train::optim::{AdamW, AdamWParams, LrSchedule};
use tch::{Kind, Tensor};

const STEPS: usize = 10;

/// libtorch's RNG is global: tests that seed it must not interleave.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn set_grad(p: &Tensor, g: &Tensor) {
    // d/dp sum(p * g) = g
    (p * g).sum(Kind::Float).backward();
}

#[test]
fn adamw_matches_torch() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(7);
    let names = ["layer.weight", "layer.bias", "emb"];
    let shapes: [&[i64]; 3] = [&[4, 3], &[4], &[5, 2]];
    let init: Vec<Tensor> = shapes
        .iter()
        .map(|s| Tensor::randn(*s, (Kind::Float, tch::Device::Cpu)))
        .collect();
    // grads: large ones at the start (in the warmup) and at step 6 (at full
    // lr) so clipping engages, small ones otherwise
    let grads: Vec<Vec<Tensor>> = (0..STEPS)
        .map(|k| {
            let scale = if k < 2 || k == 6 { 3.0 } else { 0.1 };
            shapes
                .iter()
                .map(|s| Tensor::randn(*s, (Kind::Float, tch::Device::Cpu)) * scale)
                .collect()
        })
        .collect();
    let hp = AdamWParams {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.99,
        eps: 1e-8,
        weight_decay: 0.1,
    };
    let (max_norm, warmup) = (1.0, 3usize);

    let dir = tempfile::tempdir().unwrap();
    let mut inputs: Vec<(String, Tensor)> = Vec::new();
    for (n, p) in names.iter().zip(&init) {
        inputs.push((format!("param.{n}"), p.shallow_clone()));
    }
    for (k, gs) in grads.iter().enumerate() {
        for (n, g) in names.iter().zip(gs) {
            inputs.push((format!("grad.{k}.{n}"), g.shallow_clone()));
        }
    }
    let spec = json!({"lr": hp.lr, "betas": [hp.beta1, hp.beta2], "eps": hp.eps, "weight_decay": hp.weight_decay,
                      "max_grad_norm": max_norm, "warmup": warmup, "steps": STEPS, "names": names});
    let (s, i, o) = (
        dir.path().join("s.json"),
        dir.path().join("i.safetensors"),
        dir.path().join("o.safetensors"),
    );
    std::fs::write(&s, spec.to_string()).unwrap();
    Tensor::write_safetensors(&inputs, &i).unwrap();
    run_python("adamw_reference.py", &[&s, &i, &o]);
    let py: std::collections::HashMap<String, Tensor> =
        Tensor::read_safetensors(&o).unwrap().into_iter().collect();

    let params: Vec<(String, Tensor)> = names
        .iter()
        .zip(&init)
        .map(|(n, p)| (n.to_string(), p.detach().copy().set_requires_grad(true)))
        .collect();
    let mut opt = AdamW::new(
        params,
        hp,
        LrSchedule::ConstantWithWarmup {
            warmup_steps: warmup,
        },
    );
    let mut worst: f64 = 0.0;
    let (mut lrs, mut norms) = (Vec::new(), Vec::new());
    for (k, gs) in grads.iter().enumerate() {
        opt.zero_grad();
        for (n, g) in names.iter().zip(gs) {
            let p = &opt.params().iter().find(|(m, _)| m == n).unwrap().1;
            set_grad(p, g);
        }
        let (norm, lr) = opt.step(max_norm);
        lrs.push(lr);
        norms.push(norm);
        worst = worst.max(assert_close(
            &format!("norm {k}"),
            &Tensor::from_slice(&[norm as f32]),
            &py[&format!("norm{k}")],
            1e-6,
        ));
        for (n, p) in opt.params() {
            worst = worst.max(assert_close(
                &format!("step {k} {n}"),
                p,
                &py[&format!("step{k}.{n}")],
                1e-6,
            ));
        }
    }
    assert!(
        [0, 1, 6].iter().all(|&k| norms[k] > max_norm) && norms[3] < max_norm,
        "clipping engages at steps 0, 1 and 6 only: {norms:?}"
    );
    assert_eq!(lrs[0], 0.0, "warmup starts at lr 0 like HF's schedule");
    assert!(
        (lrs[1] - hp.lr / 3.0).abs() < 1e-15 && lrs[4] == hp.lr,
        "{lrs:?}"
    );
    let state: std::collections::HashMap<String, Tensor> =
        opt.state_tensors().into_iter().collect();
    for n in names {
        for m in ["exp_avg", "exp_avg_sq"] {
            let key = format!("{m}.{n}");
            worst = worst.max(assert_close(&key, &state[&key], &py[&key], 1e-6));
        }
    }
    println!("adamw parity: max relative difference {worst:e} over {STEPS} steps");
}

#[test]
fn optimizer_state_round_trips_and_resumes_identically() {
    let _rng = RNG.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(3);
    let mk = || {
        vec![(
            "w".to_string(),
            Tensor::randn([3, 3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true),
        )]
    };
    let p0 = mk();
    let hp = AdamWParams {
        lr: 0.1,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
    };
    let g1 = Tensor::randn([3, 3], (Kind::Float, tch::Device::Cpu));
    let g2 = Tensor::randn([3, 3], (Kind::Float, tch::Device::Cpu));
    let copy = |p: &[(String, Tensor)]| {
        vec![(
            "w".to_string(),
            p[0].1.detach().copy().set_requires_grad(true),
        )]
    };

    let mut a = AdamW::new(copy(&p0), hp, LrSchedule::Constant);
    set_grad(&a.params()[0].1, &g1);
    a.step(0.0);
    let saved = a.state_tensors();
    let weights = copy(a.params());
    a.zero_grad();
    set_grad(&a.params()[0].1, &g2);
    a.step(0.0);

    let mut b = AdamW::new(weights, hp, LrSchedule::Constant);
    b.load_state_tensors(saved).unwrap();
    assert_eq!(b.step_count(), 1);
    set_grad(&b.params()[0].1, &g2);
    b.step(0.0);
    assert_eq!(
        Vec::<f32>::try_from(a.params()[0].1.reshape([-1])).unwrap(),
        Vec::<f32>::try_from(b.params()[0].1.reshape([-1])).unwrap()
    );

    // a state for the wrong shape is rejected with the key named
    let mut c = AdamW::new(
        vec![(
            "w".into(),
            Tensor::zeros([2], (Kind::Float, tch::Device::Cpu)),
        )],
        hp,
        LrSchedule::Constant,
    );
    let err = c
        .load_state_tensors(a.state_tensors())
        .unwrap_err()
        .to_string();
    assert!(err.contains("exp_avg.w"), "{err}");
}

/// Every schedule `optimizer_config.scheduler` accepts, against transformers'
/// get_scheduler with skyrl-train's arguments (warmup steps, total training
/// steps), past the end of the run too.
#[test]
fn lr_schedules_match_transformers_get_scheduler() {
    use skyrl_train::config::OptimizerConfig;
    use skyrl_train::optim::SCHEDULERS;
    let dir = tempfile::tempdir().unwrap();
    let (total, steps, lr) = (20usize, 26usize, 1e-4);
    let mut cases = Vec::new();
    let mut ours = Vec::new();
    for name in SCHEDULERS {
        for warmup in [0usize, 3] {
            cases.push(
                json!({"name": name, "lr": lr, "warmup": warmup, "total": total, "steps": steps}),
            );
            let c = OptimizerConfig {
                lr,
                scheduler: name.to_string(),
                num_warmup_steps: warmup,
                ..OptimizerConfig::default()
            };
            let s = LrSchedule::from_config(&c, total).unwrap();
            ours.push((
                name,
                warmup,
                (0..=steps).map(|k| s.factor(k)).collect::<Vec<f64>>(),
            ));
        }
    }
    let spec = dir.path().join("spec.json");
    let out = dir.path().join("out.json");
    std::fs::write(&spec, serde_json::to_string(&cases).unwrap()).unwrap();
    run_python("lr_schedule_reference.py", &[&spec, &out]);
    let theirs: Vec<Vec<f64>> =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    for ((name, warmup, mine), want) in ours.iter().zip(&theirs) {
        for (k, (a, b)) in mine.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() < 1e-9,
                "{name} warmup {warmup} step {k}: {a} vs transformers {b}"
            );
        }
    }
    // Schedules that need arguments skyrl's config cannot give are refused.
    let c = OptimizerConfig {
        scheduler: "cosine_with_min_lr".into(),
        ..OptimizerConfig::default()
    };
    assert!(LrSchedule::from_config(&c, total).is_err());
}
