//! Small hand-computed cases for each algorithm.

mod common;

use std::sync::Arc;

use common::assert_near;
use skyrl_train::algorithms::advantage::{critic_value_loss, tensor_2d, AdvantageOutput};
use skyrl_train::algorithms::filters::{
    apply_overlong_filtering, apply_zero_variance_filter, replace_sampling,
    zero_reward_on_non_stop, DynamicSamplingOutcome, FilterSampler, SampleBatch,
};
use skyrl_train::algorithms::kl::{apply_kl_penalty_to_rewards, KlController};
use skyrl_train::algorithms::off_policy::compute_tis_ratio;
use skyrl_train::algorithms::{
    compute_approx_kl, entropy_from_logits, scale_advantages, AdvantageEstimatorRegistry,
    AdvantageInput, AdvantageParams, KlEstimator, LossReduction, PolicyLossInput, PolicyLossOutput,
    PolicyLossRegistry,
};
use skyrl_train::config::{AlgorithmConfig, OffPolicyCorrectionConfig};
use tch::{Kind, Tensor};

fn t(rows: &[&[f32]]) -> Tensor {
    tensor_2d(&rows.iter().map(|r| r.to_vec()).collect::<Vec<_>>()).unwrap()
}

fn v(x: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(x.to_kind(Kind::Double).reshape([-1])).unwrap()
}

fn ids(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

fn outcome(name: &str, scores: &[f32], groups: &[&str], params: AdvantageParams) -> Vec<f64> {
    // reward at the last of two response tokens; the mask covers both
    let rows: Vec<Vec<f32>> = scores.iter().map(|s| vec![0.0, *s]).collect();
    let rewards = tensor_2d(&rows).unwrap();
    let mask = rewards.ones_like();
    let g = ids(groups);
    let out: AdvantageOutput = AdvantageEstimatorRegistry::with_defaults()
        .get(name)
        .unwrap()
        .compute(
            &AdvantageInput {
                token_level_rewards: &rewards,
                response_mask: &mask,
                group_ids: &g,
                values: None,
            },
            &params,
        )
        .unwrap();
    // broadcast over the response: both tokens carry the same advantage
    let a = v(&out.advantages);
    for i in 0..scores.len() {
        assert_eq!(a[2 * i], a[2 * i + 1]);
    }
    a.iter().step_by(2).copied().collect()
}

#[test]
fn grpo_normalises_by_unbiased_std_and_handles_singletons() {
    let a = outcome(
        "grpo",
        &[1.0, 0.0, 1.0, 0.0, 2.0],
        &["g", "g", "g", "g", "s"],
        AdvantageParams::default(),
    );
    // mean 0.5, unbiased std sqrt(1/3): 0.5 / 0.57735 = 0.866025
    let e = 0.5 / ((1.0f64 / 3.0).sqrt() + 1e-6);
    for (x, want) in a.iter().zip([e, -e, e, -e]) {
        assert_near("grpo", *x, want, 1e-6);
    }
    // a group of one: mean 0, std 1
    assert_near("grpo singleton", a[4], 2.0 / (1.0 + 1e-6), 1e-6);
    // equal rewards: zero advantage
    let z = outcome("grpo", &[0.3, 0.3], &["x", "x"], AdvantageParams::default());
    assert_eq!(z, vec![0.0, 0.0]);
}

#[test]
fn dr_grpo_rloo_maxrl_by_hand() {
    let p = AdvantageParams {
        grpo_norm_by_std: false,
        ..Default::default()
    };
    let a = outcome("grpo", &[1.0, 0.0, 1.0, 0.0], &["g"; 4], p);
    assert_eq!(a, vec![0.5, -0.5, 0.5, -0.5]);
    let r = outcome(
        "rloo",
        &[1.0, 0.0, 1.0, 0.0, 3.0],
        &["g", "g", "g", "g", "s"],
        AdvantageParams::default(),
    );
    for (x, want) in r
        .iter()
        .zip([2.0 / 3.0, -2.0 / 3.0, 2.0 / 3.0, -2.0 / 3.0, 0.0])
    {
        assert_near("rloo", *x, want, 1e-6);
    }
    let m = outcome(
        "maxrl",
        &[1.0, 0.0, 1.0, 0.0, 3.0],
        &["g", "g", "g", "g", "s"],
        AdvantageParams::default(),
    );
    let e = 0.5 / (0.5 + 1e-6);
    for (x, want) in m.iter().zip([e, -e, e, -e, 3.0]) {
        assert_near("maxrl", *x, want, 1e-6);
    }
}

#[test]
fn reinforce_pp_and_gae_by_hand() {
    let reg = AdvantageEstimatorRegistry::with_defaults();
    let rewards = t(&[&[0.0, 1.0]]);
    let mask = rewards.ones_like();
    let g = ids(&["a"]);
    let input = AdvantageInput {
        token_level_rewards: &rewards,
        response_mask: &mask,
        group_ids: &g,
        values: None,
    };
    let out = reg
        .get("reinforce++")
        .unwrap()
        .compute(
            &input,
            &AdvantageParams {
                gamma: 0.5,
                ..Default::default()
            },
        )
        .unwrap();
    // returns [0.5, 1]; centred ±0.25, unbiased var 0.125
    assert_eq!(v(&out.returns), vec![0.5, 1.0]);
    let w = 0.25 / (0.125f64 + 1e-8).sqrt();
    assert_near("rpp a0", v(&out.advantages)[0], -w, 1e-6);
    assert_near("rpp a1", v(&out.advantages)[1], w, 1e-6);

    let values = t(&[&[0.5, 0.5]]);
    let input = AdvantageInput {
        values: Some(&values),
        ..input
    };
    let out = reg
        .get("gae")
        .unwrap()
        .compute(
            &input,
            &AdvantageParams {
                gamma: 1.0,
                lambd: 0.5,
                ..Default::default()
            },
        )
        .unwrap();
    // A1 = 1 - 0.5 = 0.5; A0 = (0 + 0.5 - 0.5) + 0.5 * 0.5 = 0.25; returns = A + V
    assert_eq!(v(&out.returns), vec![0.75, 1.0]);
    let w = 0.125 / (0.03125f64 + 1e-8).sqrt();
    assert_near("gae a0", v(&out.advantages)[0], -w, 1e-6);
    assert_near("gae a1", v(&out.advantages)[1], w, 1e-6);
    // gae without values is a clear error
    let no_values = AdvantageInput {
        values: None,
        ..input
    };
    let err = reg
        .get("gae")
        .unwrap()
        .compute(&no_values, &AdvantageParams::default())
        .unwrap_err();
    assert!(err.to_string().contains("critic values"), "{err}");
}

#[test]
fn critic_loss_by_hand() {
    let values = t(&[&[1.0, 0.0]]);
    let old = t(&[&[0.0, 0.0]]);
    let returns = t(&[&[1.0, 1.0]]);
    let mask = values.ones_like();
    // token0: clipped 0.2 -> (0.2-1)^2 = .64 vs 0 -> .64; token1: 1 vs 1 -> 1; 0.5 * mean = .41
    let (loss, frac) = critic_value_loss(&values, &old, &returns, &mask, Some(0.2));
    assert_near("critic", loss.double_value(&[]), 0.41, 1e-6);
    assert_near("clipfrac", frac.unwrap(), 0.5, 1e-9);
}

fn ppo(
    name: &str,
    lp: &[f32],
    old: &[f32],
    adv: &[f32],
    cfg: &AlgorithmConfig,
) -> PolicyLossOutput {
    let lp = t(&[lp]);
    let old = t(&[old]);
    let adv = t(&[adv]);
    let mask = lp.ones_like();
    PolicyLossRegistry::with_defaults()
        .get(name)
        .unwrap()
        .compute(
            &PolicyLossInput {
                log_probs: &lp,
                old_log_probs: &old,
                advantages: &adv,
                loss_mask: &mask,
                rollout_logprobs: None,
            },
            cfg,
        )
        .unwrap()
}

#[test]
fn ppo_clip_and_dual_clip_by_hand() {
    let cfg = AlgorithmConfig::default();
    let out = ppo(
        "regular",
        &[0.5, 0.5, 2.0],
        &[0.0, 0.0, 0.0],
        &[1.0, -1.0, -1.0],
        &cfg,
    );
    let l = v(&out.loss);
    assert_near("A>0 clipped at 1.2", l[0], -1.2, 1e-6);
    assert_near("A<0 unclipped", l[1], 0.5f64.exp(), 1e-5);
    assert_near("A<0 large ratio", l[2], 2.0f64.exp(), 1e-5);
    assert_near("clip ratio", out.metrics["clip_ratio"], 1.0 / 3.0, 1e-6);
    let out = ppo(
        "dual_clip",
        &[0.5, 0.5, 2.0],
        &[0.0, 0.0, 0.0],
        &[1.0, -1.0, -1.0],
        &cfg,
    );
    let l = v(&out.loss);
    assert_near("dual clip caps at c|A| = 3", l[2], 3.0, 1e-6);
    assert_near("dual clip leaves small ratio", l[1], 0.5f64.exp(), 1e-5);
}

#[test]
fn sapo_cispo_gspo_cross_entropy_by_hand() {
    let cfg = AlgorithmConfig::default();
    // SAPO: r = 1 -> gate = sigmoid(0) * 4 / tau = 2 / tau
    let out = ppo("sapo", &[-1.0, -1.0], &[-1.0, -1.0], &[1.0, -1.0], &cfg);
    let l = v(&out.loss);
    assert_near("sapo pos", l[0], -2.0, 1e-6);
    assert_near("sapo neg", l[1], 2.0 / 1.05, 1e-6);
    // CISPO: -A * clip(r, 0, 5) * logp with r = e^2 = 7.39 -> 5
    let out = ppo("cispo", &[-1.0], &[-3.0], &[1.0], &cfg);
    assert_near("cispo", v(&out.loss)[0], 5.0, 1e-6);
    // GSPO: token ratio = exp(mean log ratio) for every token of the sequence
    let out = ppo("gspo", &[0.1, 0.3], &[0.0, 0.0], &[1.0, 1.0], &cfg);
    let r = 0.2f64.exp().min(1.2);
    let l = v(&out.loss);
    assert_near("gspo t0", l[0], -r, 1e-6);
    assert_near("gspo t1", l[1], -r, 1e-6);
    let out = ppo(
        "cross_entropy",
        &[-0.5, -2.0],
        &[0.0, 0.0],
        &[0.0, 0.0],
        &cfg,
    );
    assert_eq!(v(&out.loss), vec![0.5, 2.0]);
}

#[test]
fn tis_ratios_by_hand() {
    let old = t(&[&[-1.0, -1.5, -0.5]]);
    let rollout = t(&[&[-1.5, -1.0, -1.5]]);
    let mask = old.ones_like();
    let cfg = OffPolicyCorrectionConfig::default();
    let (r, m) = compute_tis_ratio(&old, &rollout, &mask, "token", &cfg).unwrap();
    let r = v(&r);
    assert_near("tok0", r[0], 0.5f64.exp(), 1e-6);
    assert_near("tok1", r[1], (-0.5f64).exp(), 1e-6);
    assert_near("tok2 capped", r[2], 2.0, 1e-6);
    assert_near(
        "capped frac",
        m["tis_token_clip_high_ratio"],
        1.0 / 3.0,
        1e-6,
    );
    let (r, _) = compute_tis_ratio(&old, &rollout, &mask, "sequence", &cfg).unwrap();
    assert_eq!(r.size(), vec![1, 1]);
    assert_near("seq", v(&r)[0], 1.0f64.exp(), 1e-6);
    assert!(compute_tis_ratio(&old, &rollout, &mask, "bogus", &cfg).is_err());
}

#[test]
fn kl_entropy_reduction_by_hand() {
    let lp = t(&[&[0.0, -1.0]]);
    let base = t(&[&[2f32.ln(), -1.0]]);
    let mask = lp.ones_like();
    let k3 = v(&compute_approx_kl(&lp, &base, Some(&mask), KlEstimator::K3));
    assert_near("k3", k3[0], 2.0 - 2f64.ln() - 1.0, 1e-6);
    assert_eq!(k3[1], 0.0);
    let k1 = v(&compute_approx_kl(&lp, &base, None, KlEstimator::K1));
    assert_near("k1", k1[0], -(2f64.ln()), 1e-6);
    let k2 = v(&compute_approx_kl(&lp, &base, None, KlEstimator::K2));
    assert_near("k2", k2[0], 0.5 * 2f64.ln().powi(2), 1e-6);
    let abs = v(&compute_approx_kl(&lp, &base, None, KlEstimator::Abs));
    assert_near("abs", abs[0], 2f64.ln(), 1e-6);
    // k3 is clamped to 10
    let big = v(&compute_approx_kl(
        &t(&[&[-30.0]]),
        &t(&[&[0.0]]),
        None,
        KlEstimator::K3,
    ));
    assert_eq!(big[0], 10.0);

    let logits = Tensor::zeros([1, 1, 4], (Kind::Float, tch::Device::Cpu));
    assert_near(
        "uniform entropy",
        v(&entropy_from_logits(&logits))[0],
        4f64.ln(),
        1e-6,
    );

    let loss = t(&[&[1.0, 2.0, 3.0], &[4.0, 9.0, 9.0]]);
    let mask = t(&[&[1.0, 1.0, 1.0], &[1.0, 0.0, 0.0]]);
    // A reduction scales the advantages so that their masked sum is the mean.
    let r = |red, micro, prompts: &[u64]| {
        let scaled = scale_advantages(&loss, &mask, red, micro, Some(4), Some(prompts)).unwrap();
        (scaled * &mask).sum(Kind::Float).double_value(&[])
    };
    let same = [0u64, 0];
    assert_near(
        "token_mean",
        r(LossReduction::TokenMean, 2, &same),
        2.5,
        1e-6,
    );
    assert_near(
        "token_mean_legacy",
        r(LossReduction::TokenMeanLegacy, 1, &same),
        3.0,
        1e-6,
    );
    assert_near(
        "sequence_mean",
        r(LossReduction::SequenceMean, 2, &same),
        3.0,
        1e-6,
    );
    assert_near(
        "seq_mean_token_sum_norm",
        r(LossReduction::SeqMeanTokenSumNorm, 2, &same),
        1.25,
        1e-6,
    );
    assert_near(
        "prompt_mean, one prompt",
        r(LossReduction::PromptMean, 2, &same),
        2.5,
        1e-6,
    );
    assert_near(
        "prompt_mean, two",
        r(LossReduction::PromptMean, 2, &[0, 1]),
        3.0,
        1e-6,
    );
    assert!(scale_advantages(
        &loss,
        &mask,
        LossReduction::SeqMeanTokenSumNorm,
        2,
        None,
        None
    )
    .is_err());
    assert!("bogus".parse::<LossReduction>().is_err());
}

#[test]
fn kl_in_reward_and_adaptive_controller() {
    let rewards = t(&[&[0.0, 1.0]]);
    let lp = t(&[&[-1.0, -1.0]]);
    let reference = t(&[&[-1.5, -1.0]]);
    let mask = lp.ones_like();
    let mut ctrl = KlController::Fixed { value: 0.1 };
    let out =
        apply_kl_penalty_to_rewards(&rewards, &lp, &reference, &mask, KlEstimator::K1, &mut ctrl);
    let r = v(&out.token_level_rewards);
    assert_near("penalised r0", r[0], -0.05, 1e-6);
    assert_near("penalised r1", r[1], 1.0, 1e-6);
    assert_near("mean kl", out.mean_kl, 0.25, 1e-6);
    let mut a = KlController::Adaptive {
        value: 0.1,
        target: 0.1,
        horizon: 10.0,
    };
    a.update(1.0, 5); // error clipped to +0.2: value *= 1 + 0.2 * 5 / 10
    assert_near("adaptive", a.value(), 0.11, 1e-12);
}

#[test]
fn registries_accept_custom_entries_and_reject_bad_names() {
    let mut losses = PolicyLossRegistry::with_defaults();
    let custom = |x: &PolicyLossInput, _c: &AlgorithmConfig| -> anyhow::Result<PolicyLossOutput> {
        Ok(PolicyLossOutput {
            loss: x.advantages.neg() * x.log_probs,
            loss_mask: x.loss_mask.shallow_clone(),
            metrics: Default::default(),
        })
    };
    losses.register("reinforce", Arc::new(custom)).unwrap();
    let out = ppo_with(&losses, "reinforce");
    assert_eq!(v(&out.loss), vec![2.0]);
    assert!(losses.register("regular", Arc::new(custom)).is_err());
    let err = losses.get("nope").err().unwrap().to_string();
    assert!(
        err.contains("unknown policy loss 'nope'") && err.contains("regular"),
        "{err}"
    );

    let mut adv = AdvantageEstimatorRegistry::with_defaults();
    let raw = |x: &AdvantageInput, _p: &AdvantageParams| -> anyhow::Result<AdvantageOutput> {
        Ok(AdvantageOutput {
            advantages: x.token_level_rewards.shallow_clone(),
            returns: x.token_level_rewards.shallow_clone(),
        })
    };
    adv.register("raw", Arc::new(raw)).unwrap();
    assert!(adv.names().contains(&"raw".to_string()));
    assert!(adv.register("grpo", Arc::new(raw)).is_err());
    assert!(adv.get("bogus").is_err());
}

fn ppo_with(reg: &PolicyLossRegistry, name: &str) -> PolicyLossOutput {
    let lp = t(&[&[-1.0]]);
    let adv = t(&[&[2.0]]);
    let mask = lp.ones_like();
    reg.get(name)
        .unwrap()
        .compute(
            &PolicyLossInput {
                log_probs: &lp,
                old_log_probs: &lp,
                advantages: &adv,
                loss_mask: &mask,
                rollout_logprobs: None,
            },
            &AlgorithmConfig::default(),
        )
        .unwrap()
}

#[test]
fn zero_variance_overlong_and_non_stop_filters() {
    let uids = ids(&["a", "a", "b", "b", "c"]);
    let rewards = [1.0, 1.0, 0.0, 1.0, 1.0];
    let mut masks = vec![
        vec![1i32, 1],
        vec![1, 0],
        vec![1, 1],
        vec![1, 1],
        vec![1, 1],
    ];
    // group a has zero variance -> masked; b varies; c is a singleton -> kept
    assert_eq!(
        apply_zero_variance_filter(&rewards, &uids, &mut masks, 0.0).unwrap(),
        2
    );
    assert_eq!(masks[0], vec![0, 0]);
    assert_eq!(masks[1], vec![0, 0]);
    assert_eq!(masks[2], vec![1, 1]);
    assert_eq!(masks[4], vec![1, 1]);

    let reasons = ids(&["stop", "length", "stop", "abort", "stop"]);
    let mut masks = vec![vec![1.0f32; 3]; 5];
    assert_eq!(apply_overlong_filtering(&mut masks, &reasons).unwrap(), 2);
    assert_eq!(masks[1], vec![0.0; 3]);
    assert_eq!(masks[0], vec![1.0; 3]);
    let mut r = rewards;
    assert_eq!(zero_reward_on_non_stop(&mut r, &reasons).unwrap(), 2);
    assert_eq!(r, [1.0, 0.0, 0.0, 0.0, 1.0]);
    assert!(apply_overlong_filtering(&mut masks, &reasons[..2]).is_err());
}

#[derive(Debug, Clone, PartialEq)]
struct Rows(Vec<u32>);

impl SampleBatch for Rows {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn select(&self, idx: &[usize]) -> Self {
        Rows(idx.iter().map(|&i| self.0[i]).collect())
    }
    fn concat(parts: Vec<Self>) -> Self {
        Rows(parts.into_iter().flat_map(|p| p.0).collect())
    }
}

#[test]
fn dynamic_sampling_filter_collects_until_full() {
    let mut s = FilterSampler::new(2, 2, 5);
    // round 1: group p1 varies, p2 does not
    let out = s
        .push(
            Rows(vec![10, 11, 20, 21]),
            &[1.0, 0.0, 1.0, 1.0],
            &ids(&["p1", "p1", "p2", "p2"]),
        )
        .unwrap();
    assert!(matches!(out, DynamicSamplingOutcome::KeepSampling));
    // round 2: two more varied groups; the batch is truncated to 2 prompts * 2 samples
    let out = s
        .push(
            Rows(vec![30, 31, 40, 41]),
            &[0.0, 1.0, 0.5, 0.0],
            &ids(&["p3", "p3", "p4", "p4"]),
        )
        .unwrap();
    match out {
        DynamicSamplingOutcome::Ready { batch, uids } => {
            assert_eq!(batch, Rows(vec![10, 11, 30, 31]));
            assert_eq!(uids, ids(&["p1", "p1", "p3", "p3"]));
        }
        DynamicSamplingOutcome::KeepSampling => panic!("should be full"),
    }
    // the round limit is enforced with a clear error
    let mut s = FilterSampler::new(1, 2, 1);
    let err = s
        .push(Rows(vec![1, 2]), &[1.0, 1.0], &ids(&["q", "q"]))
        .err()
        .unwrap();
    assert!(err.to_string().contains("max_sample_batches"), "{err}");
}

#[test]
fn dynamic_sampling_replace_copies_good_groups() {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let uids = ids(&["g", "g", "b", "b", "h", "h"]);
    let out = replace_sampling(
        Rows(vec![1, 2, 3, 4, 5, 6]),
        &[1.0, 0.0, 1.0, 1.0, 0.0, 1.0],
        &uids,
        2,
        0.3,
        &mut rng,
    )
    .unwrap();
    let DynamicSamplingOutcome::Ready { batch, uids: new } = out else {
        panic!("expected replacement")
    };
    // the bad group b (rows 3, 4) now holds a copy of g or h, with its uid
    assert_eq!(&batch.0[..2], &[1, 2]);
    assert_eq!(&batch.0[4..], &[5, 6]);
    assert!(
        batch.0[2..4] == [1, 2] || batch.0[2..4] == [5, 6],
        "{batch:?}"
    );
    assert!(new[2] == new[3] && new[2] != "b");
    // too few good groups -> keep sampling
    let out = replace_sampling(
        Rows(vec![1, 2, 3, 4]),
        &[1.0, 1.0, 0.0, 0.0],
        &ids(&["a", "a", "b", "b"]),
        2,
        0.3,
        &mut rng,
    )
    .unwrap();
    assert!(matches!(out, DynamicSamplingOutcome::KeepSampling));
}

#[test]
fn kl_cov_and_clip_cov_by_hand() {
    let mut cfg = AlgorithmConfig::default();
    cfg.kl_cov.kl_cov_frac = 0.34; // k = max(1, int(3 * 0.34)) = 1 token
                                   // r = [e^0.5, 1, 1]; -A r = [-e^0.5, 0, 1]; covariance is largest at token 0
    let out = ppo(
        "kl_cov",
        &[-0.5, -1.0, -1.0],
        &[-1.0, -1.0, -1.0],
        &[1.0, 0.0, -1.0],
        &cfg,
    );
    let l = v(&out.loss);
    assert_near("kl_cov t0 gets |log r|", l[0], -(0.5f64.exp()) + 0.5, 1e-6);
    assert_eq!((l[1], l[2]), (0.0, 1.0));

    // both tokens have covariance 0.1 in (0.05, 0.2); clip_num = 1 -> one gradient removed
    cfg.clip_cov.clip_ratio = 0.5;
    cfg.clip_cov.clip_cov_lb = 0.05;
    cfg.clip_cov.clip_cov_ub = 0.2;
    let out = ppo("clip_cov", &[-1.0, -1.2], &[-1.0, -1.2], &[1.0, -1.0], &cfg);
    let l = v(&out.loss);
    assert!(l == vec![0.0, 1.0] || l == vec![-1.0, 0.0], "{l:?}");
    assert_near("clip_cov frac", out.metrics["clip_ratio"], 0.5, 1e-9);
}
