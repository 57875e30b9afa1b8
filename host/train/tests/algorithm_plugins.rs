//! Algorithm plugins (`advantage_estimator=plugin:NAME`,
//! `policy_loss_type=plugin:NAME`) against the built-ins they re-implement:
//! the Rust example (`plugins/ppo_algorithms`: grpo or gae + regular) and the Python
//! one (`plugins/python_algorithms`: maxrl + dppo) agree to 1e-6 in
//! advantages, loss values, gradients (autograd of the built-in vs the
//! plugin's returned dL/dlogp through the host's surrogate) and clip
//! ratios; a misbehaving plugin fails the call with an error naming it.
//!
//! Needs `artifacts/plugins/{ppo_algorithms,python_algorithms,bad_algorithm}.wasm`
//! (run `scripts/build-plugins`).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::inputs::{inputs, Inputs};
use serde_json::json;
use skyrl_runtime::{Plugin, PluginEngine, PluginError, SandboxLimits};
use skyrl_train::algorithms::loss::{actor_loss, ActorBatch};
use skyrl_train::algorithms::{
    register_algorithm_plugins, AdvantageEstimatorRegistry, AdvantageInput, AdvantageParams,
    AlgorithmPluginError, PolicyLossRegistry,
};
use skyrl_train::config::AlgorithmConfig;
use tch::Tensor;

const TOL: f64 = 1e-6;

fn plugin(name: &str) -> Plugin {
    plugin_on(&PluginEngine::shared().unwrap(), name)
}

fn plugin_on(engine: &PluginEngine, name: &str) -> Plugin {
    let wasm = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../artifacts/plugins")
        .join(format!("{name}.wasm"));
    assert!(
        wasm.is_file(),
        "{} is missing: build the plugins first with scripts/build-plugins",
        wasm.display()
    );
    Plugin::load(engine, &wasm).unwrap()
}

/// Registries with `plugins` registered under `plugin:NAME` for `cfg`.
fn registries(
    plugins: &[(&str, Plugin)],
    cfg: &AlgorithmConfig,
) -> (AdvantageEstimatorRegistry, PolicyLossRegistry) {
    let map: BTreeMap<String, Plugin> = plugins
        .iter()
        .map(|(n, p)| (n.to_string(), p.clone()))
        .collect();
    let mut adv = AdvantageEstimatorRegistry::with_defaults();
    let mut losses = PolicyLossRegistry::with_defaults();
    register_algorithm_plugins(&map, cfg, &mut adv, &mut losses).unwrap();
    (adv, losses)
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

fn config(edit: impl FnOnce(&mut AlgorithmConfig)) -> AlgorithmConfig {
    let mut cfg = AlgorithmConfig {
        use_kl_loss: false,
        ..AlgorithmConfig::default()
    };
    edit(&mut cfg);
    cfg
}

/// The estimator `name` on the shared inputs (advantages, returns).
fn estimate(
    reg: &AdvantageEstimatorRegistry,
    name: &str,
    x: &Inputs,
    cfg: &AlgorithmConfig,
    values: bool,
) -> (Tensor, Tensor) {
    let out = reg
        .get(name)
        .unwrap()
        .compute(
            &AdvantageInput {
                token_level_rewards: &x.rewards,
                response_mask: &x.mask,
                group_ids: &x.uids,
                values: values.then_some(&x.values),
            },
            &AdvantageParams::from(cfg),
        )
        .unwrap();
    (out.advantages, out.returns)
}

/// Outcome estimators: advantages (equal to the returns).
fn advantages(
    reg: &AdvantageEstimatorRegistry,
    name: &str,
    x: &Inputs,
    cfg: &AlgorithmConfig,
) -> Tensor {
    let (advantages, returns) = estimate(reg, name, x, cfg, false);
    assert_eq!(max_diff(&advantages, &returns), 0.0);
    advantages
}

/// The masked-sum loss of `cfg.policy_loss_type`, its gradient with respect
/// to the log-probs (autograd), and its clip ratio.
fn loss_and_grad(
    reg: &PolicyLossRegistry,
    cfg: &AlgorithmConfig,
    x: &Inputs,
    rollout: bool,
) -> (f64, Tensor, f64) {
    let lp = x.log_probs.detach().set_requires_grad(true);
    let out = actor_loss(
        reg,
        cfg,
        &ActorBatch {
            log_probs: &lp,
            old_log_probs: &x.old_log_probs,
            advantages: &x.advantages,
            loss_mask: &x.mask,
            rollout_logprobs: rollout.then_some(&x.rollout),
            ref_log_probs: None,
            logits: None,
            aux_weight: 1.0,
        },
    )
    .unwrap();
    out.loss.backward();
    (
        out.loss.double_value(&[]),
        lp.grad(),
        out.metrics["clip_ratio"],
    )
}

/// Built-in `builtin` and `plugin:NAME` agree in value, gradient and clip
/// ratio; returns the clip ratio (so cases can check the clip bites).
fn check_loss(
    plugins: &[(&str, Plugin)],
    builtin: &str,
    name: &str,
    cfg: AlgorithmConfig,
    rollout: bool,
) -> f64 {
    let (_, reg) = registries(plugins, &cfg);
    let with = |loss: &str| {
        let cfg = AlgorithmConfig {
            policy_loss_type: loss.into(),
            ..cfg.clone()
        };
        loss_and_grad(&reg, &cfg, &inputs(), rollout)
    };
    let (v0, g0, c0) = with(builtin);
    let (v1, g1, c1) = with(&format!("plugin:{name}"));
    assert!(
        (v0 - v1).abs() < TOL,
        "{builtin} vs plugin:{name}: loss {v0} vs {v1}"
    );
    let dg = max_diff(&g0, &g1);
    assert!(
        dg < TOL,
        "{builtin} vs plugin:{name}: gradients differ by {dg}"
    );
    assert!(
        g0.abs().sum(tch::Kind::Float).double_value(&[]) > 0.1,
        "no gradient"
    );
    assert!(
        (c0 - c1).abs() < TOL,
        "{builtin} vs plugin:{name}: clip ratio {c0} vs {c1}"
    );
    c0
}

#[test]
fn rust_plugin_matches_grpo_gae_and_ppo_clip() {
    let plugins = [("ppo", plugin("ppo_algorithms"))];
    for norm in [true, false] {
        let cfg = config(|c| c.grpo_norm_by_std = norm);
        let (reg, _) = registries(&plugins, &cfg);
        let x = inputs();
        let d = max_diff(
            &advantages(&reg, "grpo", &x, &cfg),
            &advantages(&reg, "plugin:ppo", &x, &cfg),
        );
        assert!(d < TOL, "grpo (norm_by_std={norm}) vs plugin: {d}");
    }
    // GAE on the critic's values, picked by the plugin's options.
    let cfg = config(|c| {
        c.gamma = 0.95;
        c.lambd = 0.9;
        c.plugin_options
            .insert("ppo".into(), json!({ "estimator": "gae" }));
    });
    let (reg, _) = registries(&plugins, &cfg);
    let x = inputs();
    let (a0, r0) = estimate(&reg, "gae", &x, &cfg, true);
    let (a1, r1) = estimate(&reg, "plugin:ppo", &x, &cfg, true);
    let (da, dr) = (max_diff(&a0, &a1), max_diff(&r0, &r1));
    assert!(
        da < TOL && dr < TOL,
        "gae vs plugin: advantages {da}, returns {dr}"
    );
    let clip = check_loss(&plugins, "regular", "ppo", config(|_| {}), false);
    assert!(clip > 0.0, "the test inputs never clip");
    let asymmetric = config(|c| {
        c.eps_clip_low = 0.1;
        c.eps_clip_high = 0.28;
    });
    check_loss(&plugins, "regular", "ppo", asymmetric, false);
}

#[test]
fn python_plugin_matches_maxrl_and_dppo() {
    let plugins = [("py", plugin("python_algorithms"))];
    let cfg = config(|_| {});
    let (reg, _) = registries(&plugins, &cfg);
    let x = inputs();
    let d = max_diff(
        &advantages(&reg, "maxrl", &x, &cfg),
        &advantages(&reg, "plugin:py", &x, &cfg),
    );
    assert!(d < TOL, "maxrl vs plugin: {d}");
    for kind in ["binary_tv", "binary_kl"] {
        for rollout in [false, true] {
            let cfg = config(|c| {
                c.dppo.dppo_type = kind.into();
                if kind == "binary_kl" {
                    c.dppo.delta_low = 0.02;
                    c.dppo.delta_high = 0.02;
                }
            });
            let dropped = check_loss(&plugins, "dppo", "py", cfg, rollout);
            assert!(
                dropped > 0.0,
                "{kind}: the test inputs never trip the DPPO mask"
            );
        }
    }
}

/// The policy loss of plugin `bad` with `options`, once per entry of `calls`
/// (results in order).
fn bad_loss_calls(
    options: serde_json::Value,
    limits: Option<SandboxLimits>,
    calls: usize,
) -> Vec<anyhow::Result<f64>> {
    let p = match limits {
        // Fuel limits need a metering engine.
        Some(limits) => {
            plugin_on(&PluginEngine::shared_metered().unwrap(), "bad_algorithm").with_limits(limits)
        }
        None => plugin("bad_algorithm"),
    };
    let cfg = config(|c| {
        c.policy_loss_type = "plugin:bad".into();
        c.plugin_options.insert("bad".into(), options);
    });
    let (_, reg) = registries(&[("bad", p)], &cfg);
    let x = inputs();
    (0..calls)
        .map(|_| {
            actor_loss(
                &reg,
                &cfg,
                &ActorBatch {
                    log_probs: &x.log_probs,
                    old_log_probs: &x.old_log_probs,
                    advantages: &x.advantages,
                    loss_mask: &x.mask,
                    rollout_logprobs: None,
                    ref_log_probs: None,
                    logits: None,
                    aux_weight: 1.0,
                },
            )
            .map(|l| l.loss.double_value(&[]))
        })
        .collect()
}

/// The typed error of a failed plugin call.
fn plugin_error(result: &anyhow::Result<f64>) -> &PluginError {
    let err = result.as_ref().expect_err("the plugin call should fail");
    let typed = err
        .downcast_ref::<AlgorithmPluginError>()
        .unwrap_or_else(|| panic!("not an AlgorithmPluginError: {err:#}"));
    assert!(
        err.to_string().contains("policy loss plugin `bad` failed"),
        "{err}"
    );
    let AlgorithmPluginError::Call { source, .. } = typed;
    source
}

#[test]
fn misbehaving_plugins_fail_the_call_with_a_typed_error_naming_them() {
    let one = |mode: &str| bad_loss_calls(json!({ "mode": mode }), None, 1).remove(0);
    assert!(matches!(
        plugin_error(&one("trap")),
        PluginError::Trap { .. }
    ));
    assert!(matches!(
        plugin_error(&one("wrong_shape")),
        PluginError::BadOutput { reason, .. } if reason.contains("expected 12x7")
    ));
    assert!(matches!(
        plugin_error(&one("nan")),
        PluginError::BadOutput { reason, .. } if reason.contains("not finite")
    ));
    assert!(matches!(
        plugin_error(&one("error")),
        PluginError::Guest { .. }
    ));
    let small_fuel = SandboxLimits {
        fuel_per_call: Some(50_000_000),
        ..SandboxLimits::default()
    };
    let looping = bad_loss_calls(json!({ "mode": "loop" }), Some(small_fuel), 1);
    assert!(matches!(
        plugin_error(&looping[0]),
        PluginError::OutOfFuel { .. }
    ));

    // Good, then a trap (the instance is dropped), then good again on a fresh
    // instance: one failure does not poison later steps.
    let calls = bad_loss_calls(json!({ "mode": "trap", "fail_after": 1 }), None, 3);
    let (first, third) = (calls[0].as_ref().unwrap(), calls[2].as_ref().unwrap());
    assert!(matches!(plugin_error(&calls[1]), PluginError::Trap { .. }));
    assert!((first - third).abs() < TOL && first.is_finite());
}

#[test]
fn plugin_options_for_an_unknown_plugin_are_refused_by_name() {
    let cfg = config(|c| {
        c.plugin_options.insert("nope".into(), json!({}));
    });
    let mut adv = AdvantageEstimatorRegistry::with_defaults();
    let mut losses = PolicyLossRegistry::with_defaults();
    let err =
        register_algorithm_plugins(&BTreeMap::new(), &cfg, &mut adv, &mut losses).unwrap_err();
    assert!(
        err.to_string()
            .contains("trainer.algorithm.plugin_options.nope"),
        "{err}"
    );
}
