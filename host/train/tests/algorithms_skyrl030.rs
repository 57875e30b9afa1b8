//! Parity with skyrl 0.3.0's own functions (the installed wheel, run by
//! `tests/reference/skyrl030_reference.py`), to 1e-6 on seeded random
//! tensors: advantage estimators (maxrl among them), every loss reduction as
//! the advantage scaling of `apply_loss_reduction_to_advantages_minibatch`,
//! and every policy loss (dppo, importance_sampling, rollout_is,
//! cross_entropy, ...) with the off-policy corrections and the KL / entropy
//! terms as skyrl's worker adds them: loss value, gradient and every metric
//! skyrl reports.
//!
//! Where skyrl 0.3.0 changed behaviour, the project follows it:
//! - `token_mean` divides by all loss tokens of the mini-batch, also when the
//!   off-policy masks (geometric, product + outlier, token mask) drop some
//!   (`pl_regular_geo_mask`, `pl_sapo_product_outlier`, `pl_cispo_token_mask`);
//! - kl_cov's KL term is not scaled by the reduction, so it is summed
//!   (`pl_kl_cov`);
//! - clip_cov's covariance bounds see the scaled advantages (`pl_clip_cov`).

mod common;

use std::collections::HashMap;

use common::inputs::{inputs, Inputs, B};
use common::{assert_close, Reference};
use serde_json::json;
use skyrl_train::algorithms::loss::{actor_loss, ActorBatch};
use skyrl_train::algorithms::{
    scale_advantages, AdvantageEstimatorRegistry, AdvantageInput, AdvantageParams, LossReduction,
    PolicyLossRegistry,
};
use skyrl_train::config::AlgorithmConfig;
use tch::{Kind, Tensor};

const TOL: f64 = 1e-6;

/// One policy-loss case: the config, whether rollout logprobs are given, and
/// the micro-batch size (for `token_mean_legacy`).
struct Case {
    name: &'static str,
    cfg: AlgorithmConfig,
    rollout: bool,
    micro: i64,
}

fn case(name: &'static str, loss: &str, edit: impl FnOnce(&mut AlgorithmConfig)) -> Case {
    let mut cfg = AlgorithmConfig {
        policy_loss_type: loss.into(),
        use_kl_loss: false,
        max_seq_len: Some(10),
        ..AlgorithmConfig::default()
    };
    edit(&mut cfg);
    Case {
        name,
        cfg,
        rollout: true,
        micro: B,
    }
}

fn cases() -> Vec<Case> {
    let mut v = vec![
        case("regular", "regular", |_| {}),
        case("regular_seqmean", "regular", |c| {
            c.loss_reduction = "sequence_mean".into()
        }),
        case("regular_drgrpo_norm", "regular", |c| {
            c.loss_reduction = "seq_mean_token_sum_norm".into()
        }),
        case("regular_prompt_mean", "regular", |c| {
            c.loss_reduction = "prompt_mean".into()
        }),
        case("dual_clip_tight", "dual_clip", |c| c.clip_ratio_c = 1.1),
        case("gspo_seqmean", "gspo", |c| {
            c.loss_reduction = "sequence_mean".into()
        }),
        case("cispo", "cispo", |_| {}),
        case("cispo_tight", "cispo", |c| {
            c.cispo.cispo_eps_clip_low = 0.2;
            c.cispo.cispo_eps_clip_high = 0.2;
        }),
        case("sapo", "sapo", |_| {}),
        case("clip_cov", "clip_cov", |c| {
            c.clip_cov.clip_ratio = 0.2;
            c.clip_cov.clip_cov_lb = -0.02;
            c.clip_cov.clip_cov_ub = 0.02;
        }),
        case("kl_cov", "kl_cov", |_| {}),
        case("cross_entropy", "cross_entropy", |_| {}),
        case("rollout_is", "rollout_is", |_| {}),
        case("rollout_is_token_tis", "rollout_is", |c| {
            c.off_policy_correction.tis_ratio_type = Some("token".into());
            c.off_policy_correction.token_tis_ratio_clip_high = 1.1;
        }),
        case("dppo_tv", "dppo", |c| c.dppo.delta_high = 0.1),
        case("dppo_kl", "dppo", |c| {
            c.dppo.dppo_type = "binary_kl".into();
            c.dppo.delta_low = 0.05;
            c.dppo.delta_high = 0.05;
        }),
        case("dppo_prompt_mean_seq_tis", "dppo", |c| {
            c.loss_reduction = "prompt_mean".into();
            c.off_policy_correction.tis_ratio_type = Some("sequence".into());
            c.off_policy_correction.sequence_tis_ratio_clip_high = 1.5;
        }),
        case("importance_sampling", "importance_sampling", |_| {}),
        case(
            "importance_sampling_prompt_mean",
            "importance_sampling",
            |c| c.loss_reduction = "prompt_mean".into(),
        ),
        case("regular_geo_mask", "regular", |c| {
            c.off_policy_correction.sequence_mask_metric = Some("geometric".into());
            c.off_policy_correction.geo_mask_low = 0.95;
            c.off_policy_correction.geo_mask_high = 1.05;
        }),
        case("sapo_product_outlier", "sapo", |c| {
            c.off_policy_correction.sequence_mask_metric = Some("product".into());
            c.off_policy_correction.outlier_token_is_threshold_low = Some(0.75);
            c.off_policy_correction.outlier_token_is_threshold_high = Some(1.4);
        }),
        case("regular_outlier_only", "regular", |c| {
            c.off_policy_correction.outlier_token_is_threshold_high = Some(1.3);
        }),
        case("cispo_token_mask", "cispo", |c| {
            c.off_policy_correction.tis_ratio_type = Some("token".into());
            c.off_policy_correction.token_mask_is_threshold_low = Some(0.85);
            c.off_policy_correction.token_mask_is_threshold_high = Some(1.2);
        }),
        case("regular_kl_entropy", "regular", |c| {
            c.use_kl_loss = true;
            c.kl_loss_coef = 0.05;
            c.use_entropy_loss = true;
            c.entropy_loss_coef = 0.01;
        }),
        case("gspo_k2_loss", "gspo", |c| {
            c.use_kl_loss = true;
            c.kl_estimator_type = "k2".into();
            c.kl_loss_coef = 0.3;
        }),
    ];
    let mut legacy = case("regular_token_mean_legacy", "regular", |c| {
        c.loss_reduction = "token_mean_legacy".into()
    });
    legacy.micro = 4;
    v.push(legacy);
    let mut dppo = case("dppo_tv_old_logprobs", "dppo", |c| c.dppo.delta_high = 0.1);
    dppo.rollout = false;
    v.push(dppo);
    v
}

/// Numeric prompt ids of the rows (equal uids, equal ids).
fn prompt_ids(uids: &[String]) -> Vec<u64> {
    let mut ids: HashMap<&str, u64> = HashMap::new();
    uids.iter()
        .map(|u| {
            let next = ids.len() as u64;
            *ids.entry(u.as_str()).or_insert(next)
        })
        .collect()
}

fn register_inputs(r: &mut Reference, x: &Inputs) {
    for (k, t) in [
        ("mask", &x.mask),
        ("rewards", &x.rewards),
        ("values", &x.values),
        ("log_probs", &x.log_probs),
        ("old_log_probs", &x.old_log_probs),
        ("advantages", &x.advantages),
        ("rollout", &x.rollout),
        ("ref_lp", &x.ref_lp),
        ("logits", &x.logits),
    ] {
        r.input(k, t);
    }
}

const POLICY_INPUTS: [(&str, &str); 7] = [
    ("log_probs", "log_probs"),
    ("old_log_probs", "old_log_probs"),
    ("advantages", "advantages"),
    ("loss_mask", "mask"),
    ("rollout_logprobs", "rollout"),
    ("ref_log_probs", "ref_lp"),
    ("logits", "logits"),
];

const REDUCTIONS: [&str; 5] = [
    "token_mean",
    "token_mean_legacy",
    "sequence_mean",
    "seq_mean_token_sum_norm",
    "prompt_mean",
];

#[test]
fn algorithms_match_skyrl_0_3_0_functions() {
    let x = inputs();
    let prompts = prompt_ids(&x.uids);
    let mut r = Reference::default();
    register_inputs(&mut r, &x);
    let adv_cases = [
        ("grpo", json!({})),
        ("rloo", json!({})),
        ("maxrl", json!({})),
        ("reinforce++", json!({"gamma": 0.9})),
        ("gae", json!({"gamma": 0.95, "lambd": 0.9})),
    ];
    for (est, extra) in &adv_cases {
        let mut p = json!({"estimator": est, "uids": x.uids});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        r.case(
            &format!("adv_{est}"),
            "advantage",
            p,
            &[
                ("rewards", "rewards"),
                ("mask", "mask"),
                ("values", "values"),
            ],
        );
    }
    r.case(
        "adv_drgrpo",
        "advantage",
        json!({"estimator": "grpo", "uids": x.uids, "norm_by_std": false}),
        &[("rewards", "rewards"), ("mask", "mask")],
    );
    for red in REDUCTIONS {
        let cfg = AlgorithmConfig {
            loss_reduction: red.into(),
            max_seq_len: Some(9),
            ..AlgorithmConfig::default()
        };
        r.case(
            &format!("scale_{red}"),
            "scale",
            json!({"config": cfg, "uids": x.uids, "micro_batch_size": 4}),
            &[("advantages", "advantages"), ("loss_mask", "mask")],
        );
    }
    let cases = cases();
    for (i, c) in cases.iter().enumerate() {
        r.case(
            &format!("pl_{}", c.name),
            "policy",
            json!({
                "config": c.cfg,
                "uids": x.uids,
                "micro_batch_size": c.micro,
                "rollout": c.rollout,
                "seed": 100 + i as i64,
            }),
            &POLICY_INPUTS,
        );
    }
    let py = r.run_script("skyrl030_reference.py");
    let get = |k: &str| {
        py.get(k)
            .unwrap_or_else(|| panic!("skyrl output `{k}` missing"))
    };
    let compared = std::cell::Cell::new(0usize);
    let check = |what: &str, a: &Tensor, key: &str| {
        assert_close(what, a, get(key), TOL);
        compared.set(compared.get() + 1);
    };

    // advantage estimators
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
            "reinforce++",
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
            &format!("adv_{case}/advantages"),
        );
        check(
            &format!("{case} returns"),
            &out.returns,
            &format!("adv_{case}/returns"),
        );
    }

    // reductions as advantage scaling
    for red in REDUCTIONS {
        let reduction: LossReduction = red.parse().unwrap();
        let scaled = scale_advantages(
            &x.advantages,
            &x.mask,
            reduction,
            4,
            Some(9),
            Some(&prompts),
        )
        .unwrap();
        check(
            &format!("scale {red}"),
            &scaled,
            &format!("scale_{red}/advantages"),
        );
    }

    // policy losses: loss, total objective, gradient and metrics
    let losses = PolicyLossRegistry::with_defaults();
    let mut seen: HashMap<&str, skyrl_train::algorithms::Metrics> = HashMap::new();
    for (i, c) in cases.iter().enumerate() {
        let key = format!("pl_{}", c.name);
        let reduction: LossReduction = c.cfg.loss_reduction.parse().unwrap();
        let scaled = scale_advantages(
            &x.advantages,
            &x.mask,
            reduction,
            c.micro,
            c.cfg.max_seq_len,
            Some(&prompts),
        )
        .unwrap();
        let lp = x.log_probs.detach().set_requires_grad(true);
        let logits = x.logits.detach();
        tch::manual_seed(100 + i as i64);
        let out = actor_loss(
            &losses,
            &c.cfg,
            &ActorBatch {
                log_probs: &lp,
                old_log_probs: &x.old_log_probs,
                advantages: &scaled,
                loss_mask: &x.mask,
                rollout_logprobs: c.rollout.then_some(&x.rollout),
                ref_log_probs: Some(&x.ref_lp),
                logits: c.cfg.use_entropy_loss.then_some(&logits),
                aux_weight: 1.0,
            },
        )
        .unwrap();
        check(
            &format!("{key} policy loss"),
            &Tensor::from(out.metrics["policy_loss"]).to_kind(Kind::Float),
            &format!("{key}/policy_loss"),
        );
        check(
            &format!("{key} total"),
            &out.loss.detach(),
            &format!("{key}/total"),
        );
        out.loss.backward();
        check(&format!("{key} grad"), &lp.grad(), &format!("{key}/grad"));
        // Every metric skyrl reports, under skyrl's name.
        let prefix = format!("{key}/metric/");
        for (k, v) in py.iter().filter(|(k, _)| k.starts_with(&prefix)) {
            let name = &k[prefix.len()..];
            let ours = out
                .metrics
                .get(name)
                .unwrap_or_else(|| panic!("{key}: metric `{name}` missing"));
            let theirs = v.double_value(&[]);
            assert!(
                (ours - theirs).abs() <= TOL * theirs.abs().max(1.0),
                "{key} metric {name}: {ours} vs skyrl {theirs}"
            );
            compared.set(compared.get() + 1);
        }
        seen.insert(c.name, out.metrics);
    }

    // The cases must clip and mask, not just pass through.
    let metric = |case: &str, name: &str| seen[case].get(name).copied().unwrap_or(0.0);
    for k in [
        "regular",
        "clip_cov",
        "cispo_tight",
        "dppo_tv",
        "dppo_kl",
        "rollout_is",
    ] {
        assert!(
            metric(k, "clip_ratio") > 0.0,
            "{k} clips nothing; the case is too easy"
        );
    }
    for (k, m) in [
        ("regular_geo_mask", "geo_sequence_mask_masked_ratio"),
        ("sapo_product_outlier", "outlier_seq_masked_ratio"),
        ("sapo_product_outlier", "product_sequence_mask_masked_ratio"),
        ("cispo_token_mask", "token_mask_ratio"),
        ("regular_outlier_only", "outlier_seq_masked_ratio"),
    ] {
        assert!(metric(k, m) > 0.0, "{k}: {m} is 0; the case masks nothing");
    }
    println!(
        "{} cases, {} comparisons with skyrl 0.3.0, all within {TOL:e}",
        cases.len(),
        compared.get()
    );
}
