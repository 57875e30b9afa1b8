//! Parity of every algorithm against the PyTorch reference
//! (`tests/reference/skyrl_reference.py`) on seeded random tensors, to 1e-6.

mod common;

use common::{assert_close, Reference};
use serde_json::{json, Value};
use skyrl_train::algorithms::advantage::critic_value_loss;
use skyrl_train::algorithms::loss::{actor_loss, ActorBatch};
use skyrl_train::algorithms::{
    compute_approx_kl, entropy_from_logits, reduce_loss, AdvantageEstimatorRegistry,
    AdvantageInput, AdvantageParams, KlEstimator, LossReduction, PolicyLossRegistry,
};
use skyrl_train::config::AlgorithmConfig;
use tch::{Kind, Tensor};

const TOL: f64 = 1e-6;
const B: i64 = 12;
const T: i64 = 7;

struct Inputs {
    mask: Tensor,
    rewards: Tensor,
    uids: Vec<String>,
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    log_probs: Tensor,
    old_log_probs: Tensor,
    advantages: Tensor,
    rollout: Tensor,
    ref_lp: Tensor,
    logits: Tensor,
}

fn inputs() -> Inputs {
    tch::manual_seed(1234);
    let lens = Tensor::randint_low(2, T + 1, [B, 1], (Kind::Int64, tch::Device::Cpu));
    let pos = Tensor::arange(T, (Kind::Int64, tch::Device::Cpu)).unsqueeze(0);
    let mask = pos.lt_tensor(&lens).to_kind(Kind::Float);
    // groups a(4) b(4, all equal rewards) c(3) d(1)
    let uids: Vec<String> = ["a", "a", "a", "a", "b", "b", "b", "b", "c", "c", "c", "d"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let scores = Tensor::rand([B], (Kind::Float, tch::Device::Cpu));
    let _ = scores.narrow(0, 4, 4).fill_(0.75);
    let last = (&lens - 1).squeeze_dim(-1);
    let rewards = Tensor::zeros([B, T], (Kind::Float, tch::Device::Cpu)).scatter(
        1,
        &last.unsqueeze(-1),
        &scores.unsqueeze(-1),
    );
    let values = Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.5;
    let old_values = &values + Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.3;
    let returns = Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu));
    let log_probs = Tensor::rand([B, T], (Kind::Float, tch::Device::Cpu)) * -2.0 - 0.05;
    let old_log_probs = &log_probs + Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.3;
    let advantages = Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu));
    let rollout = &old_log_probs + Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.2;
    let ref_lp = &log_probs + Tensor::randn([B, T], (Kind::Float, tch::Device::Cpu)) * 0.1;
    let logits = Tensor::randn([B, T, 11], (Kind::Float, tch::Device::Cpu)) * 2.0;
    Inputs {
        mask,
        rewards,
        uids,
        values,
        old_values,
        returns,
        log_probs,
        old_log_probs,
        advantages,
        rollout,
        ref_lp,
        logits,
    }
}

fn py_params(cfg: &AlgorithmConfig, seed: i64) -> Value {
    let opc = &cfg.off_policy_correction;
    json!({
        "policy_loss_type": cfg.policy_loss_type,
        "loss_reduction": cfg.loss_reduction,
        "max_seq_len": cfg.max_seq_len,
        "eps_clip_low": cfg.eps_clip_low,
        "eps_clip_high": cfg.eps_clip_high,
        "clip_ratio_c": cfg.clip_ratio_c,
        "cispo_eps_clip_low": cfg.cispo.cispo_eps_clip_low,
        "cispo_eps_clip_high": cfg.cispo.cispo_eps_clip_high,
        "tau_pos": cfg.sapo.tau_pos,
        "tau_neg": cfg.sapo.tau_neg,
        "clip_ratio": cfg.clip_cov.clip_ratio,
        "clip_cov_lb": cfg.clip_cov.clip_cov_lb,
        "clip_cov_ub": cfg.clip_cov.clip_cov_ub,
        "kl_cov_frac": cfg.kl_cov.kl_cov_frac,
        "ppo_kl_coef": cfg.kl_cov.ppo_kl_coef,
        "rng_seed": seed,
        "use_kl_loss": cfg.use_kl_loss,
        "kl_loss_coef": cfg.kl_loss_coef,
        "kl_estimator_type": cfg.kl_estimator_type,
        "use_entropy_loss": cfg.use_entropy_loss,
        "entropy_loss_coef": cfg.entropy_loss_coef,
        "off_policy_correction": serde_json::to_value(opc).unwrap(),
    })
}

fn base_cfg(loss: &str) -> AlgorithmConfig {
    AlgorithmConfig {
        policy_loss_type: loss.into(),
        use_kl_loss: false,
        max_seq_len: Some(10),
        ..AlgorithmConfig::default()
    }
}

fn policy_cases() -> Vec<(&'static str, AlgorithmConfig)> {
    let mut v: Vec<(&'static str, AlgorithmConfig)> = Vec::new();
    for name in [
        "regular",
        "dual_clip",
        "gspo",
        "cispo",
        "sapo",
        "kl_cov",
        "cross_entropy",
        "rollout_is",
    ] {
        v.push((name, base_cfg(name)));
    }
    let mut c = base_cfg("clip_cov");
    c.clip_cov.clip_ratio = 0.2;
    c.clip_cov.clip_cov_lb = -0.5;
    c.clip_cov.clip_cov_ub = 0.5;
    v.push(("clip_cov", c));
    let mut c = base_cfg("cispo");
    c.cispo.cispo_eps_clip_low = 0.2;
    c.cispo.cispo_eps_clip_high = 0.2;
    v.push(("cispo_tight", c));
    let mut c = base_cfg("dual_clip");
    c.clip_ratio_c = 1.1;
    v.push(("dual_clip_tight", c));
    let mut c = base_cfg("gspo");
    c.loss_reduction = "sequence_mean".into();
    v.push(("gspo_seqmean", c));
    let mut c = base_cfg("regular");
    c.loss_reduction = "sequence_mean".into();
    v.push(("regular_seqmean", c));
    let mut c = base_cfg("regular");
    c.loss_reduction = "seq_mean_token_sum_norm".into();
    v.push(("regular_drgrpo_norm", c));
    let mut c = base_cfg("regular");
    c.eps_clip_high = 0.28;
    c.off_policy_correction.tis_ratio_type = Some("token".into());
    c.off_policy_correction.token_tis_ratio_clip_high = 1.1;
    v.push(("regular_token_tis", c));
    let mut c = base_cfg("dual_clip");
    c.off_policy_correction.tis_ratio_type = Some("sequence".into());
    c.off_policy_correction.sequence_tis_ratio_clip_high = 1.5;
    v.push(("dual_clip_seq_tis", c));
    let mut c = base_cfg("regular");
    c.off_policy_correction.sequence_mask_metric = Some("geometric".into());
    c.off_policy_correction.geo_mask_low = 0.95;
    c.off_policy_correction.geo_mask_high = 1.05;
    v.push(("regular_geo_mask", c));
    let mut c = base_cfg("sapo");
    c.off_policy_correction.sequence_mask_metric = Some("product".into());
    c.off_policy_correction.outlier_token_is_threshold_low = Some(0.75);
    c.off_policy_correction.outlier_token_is_threshold_high = Some(1.4);
    v.push(("sapo_product_mask_outlier", c));
    let mut c = base_cfg("cispo");
    c.off_policy_correction.tis_ratio_type = Some("token".into());
    c.off_policy_correction.token_mask_is_threshold_low = Some(0.85);
    c.off_policy_correction.token_mask_is_threshold_high = Some(1.2);
    v.push(("cispo_token_mask", c));
    let mut c = base_cfg("regular");
    c.use_kl_loss = true;
    c.kl_loss_coef = 0.05;
    c.use_entropy_loss = true;
    c.entropy_loss_coef = 0.01;
    v.push(("regular_kl_entropy", c));
    let mut c = base_cfg("gspo");
    c.use_kl_loss = true;
    c.kl_estimator_type = "k2".into();
    c.kl_loss_coef = 0.3;
    v.push(("gspo_k2_loss", c));
    v
}

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
    for red in ["token_mean", "sequence_mean", "seq_mean_token_sum_norm"] {
        r.case(
            &format!("reduce_{red}"),
            "reduce",
            json!({"reduction": red, "max_seq_len": 9}),
            &[("loss", "advantages"), ("mask", "mask")],
        );
    }
    let cases = policy_cases();
    for (i, (name, cfg)) in cases.iter().enumerate() {
        r.case(
            &format!("pl_{name}"),
            "policy",
            py_params(cfg, 100 + i as i64),
            &[
                ("log_probs", "log_probs"),
                ("old_log_probs", "old_log_probs"),
                ("advantages", "advantages"),
                ("loss_mask", "mask"),
                ("rollout_logprobs", "rollout"),
                ("ref_log_probs", "ref_lp"),
                ("logits", "logits"),
            ],
        );
    }
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
    for (red, r) in [
        ("token_mean", LossReduction::TokenMean),
        ("sequence_mean", LossReduction::SequenceMean),
        (
            "seq_mean_token_sum_norm",
            LossReduction::SeqMeanTokenSumNorm,
        ),
    ] {
        let v = reduce_loss(&x.advantages, &x.mask, r, Some(9)).unwrap();
        check(&format!("reduce {red}"), &v, &format!("reduce_{red}/loss"));
    }

    // policy losses: per-token loss, mask, reduced loss, total loss and gradient
    let losses = PolicyLossRegistry::with_defaults();
    let mut nontrivial: Vec<(String, f64, f64)> = Vec::new();
    for (i, (name, cfg)) in cases.iter().enumerate() {
        let lp = x.log_probs.detach().set_requires_grad(true);
        tch::manual_seed(100 + i as i64);
        let logits = x.logits.detach();
        let batch = ActorBatch {
            log_probs: &lp,
            old_log_probs: &x.old_log_probs,
            advantages: &x.advantages,
            loss_mask: &x.mask,
            rollout_logprobs: Some(&x.rollout),
            ref_log_probs: Some(&x.ref_lp),
            logits: if cfg.use_entropy_loss {
                Some(&logits)
            } else {
                None
            },
        };
        // per-token loss straight from the registry (same RNG state for clip_cov)
        tch::manual_seed(100 + i as i64);
        let out = losses
            .get(&cfg.policy_loss_type)
            .unwrap()
            .compute(
                &skyrl_train::algorithms::PolicyLossInput {
                    log_probs: &lp,
                    old_log_probs: &x.old_log_probs,
                    advantages: &x.advantages,
                    loss_mask: &x.mask,
                    rollout_logprobs: Some(&x.rollout),
                },
                cfg,
            )
            .unwrap();
        let key = format!("pl_{name}");
        check(
            &format!("{key} per-token loss"),
            &out.loss.detach(),
            &format!("{key}/loss"),
        );
        check(
            &format!("{key} loss mask"),
            &out.loss_mask,
            &format!("{key}/loss_mask"),
        );
        let py_clip = get(&format!("{key}/metric/clip_ratio")).double_value(&[]);
        let clip = out.metrics["clip_ratio"];
        let kept = out.loss_mask.sum(Kind::Float).double_value(&[]);
        println!(
            "{key}: clip_ratio {clip:.4} kept tokens {kept} of {}",
            x.mask.sum(Kind::Float).double_value(&[])
        );
        nontrivial.push((key.clone(), clip, kept));
        assert!(
            (clip - py_clip).abs() < 1e-6,
            "{key} clip_ratio {clip} vs {py_clip}"
        );

        tch::manual_seed(100 + i as i64);
        let total = actor_loss(&losses, cfg, &batch).unwrap();
        check(
            &format!("{key} reduced"),
            &Tensor::from(total.metrics["policy_loss"]),
            &format!("{key}/reduced"),
        );
        check(
            &format!("{key} total"),
            &total.loss.detach(),
            &format!("{key}/total"),
        );
        total.loss.backward();
        check(&format!("{key} grad"), &lp.grad(), &format!("{key}/grad"));
    }

    // the cases must exercise clipping and masking, not just pass through
    let all = x.mask.sum(Kind::Float).double_value(&[]);
    let find = |k: &str| nontrivial.iter().find(|(n, _, _)| n == k).cloned().unwrap();
    for k in ["pl_regular", "pl_clip_cov", "pl_cispo_tight", "pl_gspo"] {
        assert!(find(k).1 > 0.0, "{k} clips nothing; the case is too easy");
    }
    for k in [
        "pl_regular_geo_mask",
        "pl_sapo_product_mask_outlier",
        "pl_cispo_token_mask",
    ] {
        assert!(find(k).2 < all, "{k} masks nothing; the case is too easy");
    }
    let d1 = get("pl_dual_clip_tight/loss");
    let d0 = get("pl_regular/loss");
    assert!(
        (d1 - d0).abs().max().double_value(&[]) > 1e-3,
        "dual clip never engages"
    );
    worst.sort_by(|a, b| b.1.total_cmp(&a.1));
    println!("{} comparisons; largest differences:", worst.len());
    for (w, d) in worst.iter().take(8) {
        println!("  {d:.3e}  {w}");
    }
}
