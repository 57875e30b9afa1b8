//! Parity of the advantage estimators, the critic loss, KL estimators,
//! entropy and advantage normalisation against the PyTorch restatement of
//! skyrl-train 0.3.1 (`tests/reference/skyrl_reference.py`) on seeded random
//! tensors, to 1e-6. Policy losses and reductions are held against skyrl
//! 0.3.0's own functions in `algorithms_skyrl030.rs`.

mod common;

use common::inputs::inputs;
use common::{assert_close, Reference};
use serde_json::json;
use skyrl_train::algorithms::advantage::critic_value_loss;
use skyrl_train::algorithms::{
    compute_approx_kl, entropy_from_logits, AdvantageEstimatorRegistry, AdvantageInput,
    AdvantageParams, KlEstimator,
};
use tch::Tensor;

const TOL: f64 = 1e-6;

#[test]
fn algorithms_match_pytorch_reference() {
    let x = inputs();
    let mut r = Reference::default();
    for (k, t) in [
        ("mask", &x.mask),
        ("rewards", &x.rewards),
        ("values", &x.values),
        ("old_values", &x.old_values),
        ("returns", &x.returns),
        ("log_probs", &x.log_probs),
        ("old_log_probs", &x.old_log_probs),
        ("advantages", &x.advantages),
        ("rollout", &x.rollout),
        ("ref_lp", &x.ref_lp),
        ("logits", &x.logits),
    ] {
        r.input(k, t);
    }
    let uids = json!(x.uids);
    let adv_in = [("rewards", "rewards"), ("mask", "mask")];
    r.case("grpo", "grpo", json!({"uids": uids}), &adv_in);
    r.case(
        "drgrpo",
        "grpo",
        json!({"uids": uids, "norm_by_std": false}),
        &adv_in,
    );
    r.case("rloo", "rloo", json!({"uids": uids}), &adv_in);
    r.case("maxrl", "maxrl", json!({"uids": uids}), &adv_in);
    r.case("rpp", "reinforce++", json!({"gamma": 0.9}), &adv_in);
    r.case(
        "gae",
        "gae",
        json!({"gamma": 0.95, "lambd": 0.9}),
        &[
            ("rewards", "rewards"),
            ("mask", "mask"),
            ("values", "values"),
        ],
    );
    r.case(
        "critic",
        "critic",
        json!({"value_clip": 0.2}),
        &[
            ("values", "values"),
            ("old_values", "old_values"),
            ("returns", "returns"),
            ("mask", "mask"),
        ],
    );
    for kind in ["k1", "abs", "k2", "k3"] {
        r.case(
            &format!("kl_{kind}"),
            "kl",
            json!({"kind": kind}),
            &[
                ("log_probs", "log_probs"),
                ("base", "ref_lp"),
                ("mask", "mask"),
            ],
        );
    }
    r.case(
        "batchnorm",
        "batch_normalize",
        json!({}),
        &[("advantages", "advantages"), ("mask", "mask")],
    );
    r.case("entropy", "entropy", json!({}), &[("logits", "logits")]);
    let py = r.run();
    let get = |k: &str| {
        py.get(k)
            .unwrap_or_else(|| panic!("reference output `{k}` missing"))
    };
    let mut worst: Vec<(String, f64)> = Vec::new();
    let mut check = |what: &str, a: &Tensor, key: &str| {
        worst.push((what.to_string(), assert_close(what, a, get(key), TOL)));
    };

    // advantages
    let reg = AdvantageEstimatorRegistry::with_defaults();
    let input = AdvantageInput {
        token_level_rewards: &x.rewards,
        response_mask: &x.mask,
        group_ids: &x.uids,
        values: Some(&x.values),
    };
    for (case, name, params) in [
        ("grpo", "grpo", AdvantageParams::default()),
        (
            "drgrpo",
            "grpo",
            AdvantageParams {
                grpo_norm_by_std: false,
                ..Default::default()
            },
        ),
        ("rloo", "rloo", AdvantageParams::default()),
        ("maxrl", "maxrl", AdvantageParams::default()),
        (
            "rpp",
            "reinforce++",
            AdvantageParams {
                gamma: 0.9,
                ..Default::default()
            },
        ),
        (
            "gae",
            "gae",
            AdvantageParams {
                gamma: 0.95,
                lambd: 0.9,
                ..Default::default()
            },
        ),
    ] {
        let out = reg.get(name).unwrap().compute(&input, &params).unwrap();
        check(
            &format!("{case} advantages"),
            &out.advantages,
            &format!("{case}/advantages"),
        );
        check(
            &format!("{case} returns"),
            &out.returns,
            &format!("{case}/returns"),
        );
    }
    let (closs, clipfrac) =
        critic_value_loss(&x.values, &x.old_values, &x.returns, &x.mask, Some(0.2));
    check("critic loss", &closs, "critic/loss");
    let py_clip = get("critic/metric/clipfrac").double_value(&[]);
    assert!(
        (clipfrac.unwrap() - py_clip).abs() < 1e-6,
        "critic clipfrac {clipfrac:?} vs {py_clip}"
    );

    for (kind, est) in [
        ("k1", KlEstimator::K1),
        ("abs", KlEstimator::Abs),
        ("k2", KlEstimator::K2),
        ("k3", KlEstimator::K3),
    ] {
        let kl = compute_approx_kl(&x.log_probs, &x.ref_lp, Some(&x.mask), est);
        check(&format!("kl {kind}"), &kl, &format!("kl_{kind}/kl"));
    }
    check(
        "advantage batch normalize",
        &skyrl_train::algorithms::advantage::normalize_advantages(&x.advantages, &x.mask),
        "batchnorm/advantages",
    );
    check(
        "entropy",
        &entropy_from_logits(&x.logits),
        "entropy/entropy",
    );
    worst.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("{} comparisons; largest differences:", worst.len());
    for (w, d) in worst.iter().take(8) {
        println!("  {d:.3e}  {w}");
    }
}
