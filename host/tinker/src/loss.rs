//! Tinker's built-in losses, per token and summed (Tinker's reduction: no
//! mean over tokens or datums). `w` is the datum's `weights`, `lp` the
//! learner's log-prob of the target, `q` the sampler's (`logprobs` input),
//! `A` the advantages:
//! - `cross_entropy`: `-w·lp`
//! - `importance_sampling`: `-w·exp(lp - q)·A`
//! - `ppo`: `-w·min(r·A, clip(r, lo, hi)·A)`, `r = exp(lp - q)`
//! - `cispo`: `-w·sg(clip(r, lo, hi))·lp·A`
//! - `dppo`: `-w·r·A·m`, `m` DPPO's binary-TV mask (skyrl's `dppo_policy_loss`
//!   with the sampler as behaviour policy): 0 where `A > 0` and
//!   `p - exp(q) > delta_high`, or `A < 0` and `exp(q) - p > delta_low`
//!
//! `lo`/`hi` are `loss_fn_config`'s `clip_low_threshold` /
//! `clip_high_threshold` (0.8 / 1.2 by default, as skyrl's Tinker backend);
//! `delta_low` / `delta_high` default to 0.2 (skyrl's `DPPOConfig`).
//! `ppo_critic` trains a value head, which this service's models do not
//! have, and is refused by name.

use std::collections::HashMap;

use skyrl_train::algorithms::masked::safe_exp_delta;
use skyrl_train::algorithms::policy_loss::dppo_dropped;
use skyrl_train::config::DppoConfig;
use tch::{Kind, Tensor};

use crate::error::ApiError;

/// The default PPO/CISPO ratio clip range.
pub const DEFAULT_CLIP_LOW: f64 = 0.8;
pub const DEFAULT_CLIP_HIGH: f64 = 1.2;

/// A loss function with its settings.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum LossFn {
    CrossEntropy,
    ImportanceSampling,
    Ppo { low: f64, high: f64 },
    Cispo { low: f64, high: f64 },
    Dppo { delta_low: f64, delta_high: f64 },
}

/// The names every error lists.
const KNOWN: &str = "cross_entropy, importance_sampling, ppo, cispo or dppo";

impl LossFn {
    /// Parses `loss_fn` and its `loss_fn_config`; unknown names and keys are
    /// refused by name (as skyrl's server refuses them).
    pub fn parse(name: &str, config: &HashMap<String, f64>) -> Result<Self, ApiError> {
        let allowed: &[&str] = match name {
            "cross_entropy" | "importance_sampling" => &[],
            "ppo" | "cispo" => &["clip_low_threshold", "clip_high_threshold"],
            "dppo" => &["delta_low", "delta_high"],
            "ppo_critic" => {
                return Err(ApiError::bad_request(format!(
                    "loss_fn `{name}` trains a value head, which this server's models do not \
                     have; use {KNOWN}"
                )))
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "loss_fn `{other}` is unknown; use {KNOWN}"
                )))
            }
        };
        let mut bad: Vec<&String> = config
            .keys()
            .filter(|k| !allowed.contains(&k.as_str()))
            .collect();
        bad.sort();
        if !bad.is_empty() {
            return Err(ApiError::bad_request(format!(
                "loss_fn_config keys {bad:?} are not accepted by loss_fn `{name}` (allowed: {allowed:?})"
            )));
        }
        let low = config
            .get("clip_low_threshold")
            .copied()
            .unwrap_or(DEFAULT_CLIP_LOW);
        let high = config
            .get("clip_high_threshold")
            .copied()
            .unwrap_or(DEFAULT_CLIP_HIGH);
        let clipped = name == "ppo" || name == "cispo";
        if clipped && !(low.is_finite() && high.is_finite() && low <= high) {
            return Err(ApiError::bad_request(format!(
                "loss_fn_config: clip_low_threshold {low} must not exceed clip_high_threshold {high}"
            )));
        }
        let default = DppoConfig::default();
        let delta_low = config
            .get("delta_low")
            .copied()
            .unwrap_or(default.delta_low);
        let delta_high = config
            .get("delta_high")
            .copied()
            .unwrap_or(default.delta_high);
        if !(delta_low.is_finite()
            && delta_high.is_finite()
            && delta_low >= 0.0
            && delta_high >= 0.0)
        {
            return Err(ApiError::bad_request(format!(
                "loss_fn_config: delta_low {delta_low} and delta_high {delta_high} must be finite \
                 and non-negative"
            )));
        }
        Ok(match name {
            "cross_entropy" => LossFn::CrossEntropy,
            "importance_sampling" => LossFn::ImportanceSampling,
            "ppo" => LossFn::Ppo { low, high },
            "cispo" => LossFn::Cispo { low, high },
            _ => LossFn::Dppo {
                delta_low,
                delta_high,
            },
        })
    }

    /// Whether the loss reads the sampler's log-probs and the advantages.
    pub fn needs_policy_inputs(self) -> bool {
        !matches!(self, LossFn::CrossEntropy)
    }

    /// Per-token losses `[N]` (weights applied) of log-probs `lp [N]`, given
    /// `weights`, sampler log-probs `q` and `advantages` (all `[N]`).
    pub fn per_token(
        self,
        lp: &Tensor,
        weights: &Tensor,
        q: &Tensor,
        advantages: &Tensor,
    ) -> Tensor {
        let objective = match self {
            LossFn::CrossEntropy => lp.shallow_clone(),
            LossFn::ImportanceSampling => (lp - q).exp() * advantages,
            LossFn::Ppo { low, high } => {
                let ratio = (lp - q).exp();
                let unclipped = &ratio * advantages;
                let clipped = ratio.clamp(low, high) * advantages;
                unclipped.minimum(&clipped)
            }
            LossFn::Cispo { low, high } => {
                let ratio = (lp - q).exp().clamp(low, high).detach();
                ratio * lp * advantages
            }
            LossFn::Dppo {
                delta_low,
                delta_high,
            } => {
                let config = DppoConfig {
                    delta_low,
                    delta_high,
                    ..DppoConfig::default()
                };
                let dropped = dppo_dropped(lp, q, advantages, &config)
                    .expect("binary_tv is a known DPPO type");
                safe_exp_delta(&(lp - q), 20.0)
                    * advantages
                    * dropped.logical_not().to_kind(Kind::Float)
            }
        };
        -(objective * weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f32]) -> Tensor {
        Tensor::from_slice(v)
    }

    #[test]
    fn losses_follow_tinkers_formulas() {
        let lp = t(&[-1.0, -0.5]);
        let q = t(&[-1.2, -0.1]);
        let a = t(&[2.0, -1.0]);
        let w = t(&[1.0, 0.5]);
        let get = |f: LossFn| Vec::<f32>::try_from(f.per_token(&lp, &w, &q, &a)).unwrap();
        assert_eq!(get(LossFn::CrossEntropy), vec![1.0, 0.25]);
        let r = [(0.2f32).exp(), (-0.4f32).exp()];
        let is = get(LossFn::ImportanceSampling);
        assert!((is[0] + r[0] * 2.0).abs() < 1e-6 && (is[1] - 0.5 * r[1]).abs() < 1e-6);
        // r0 = 1.22 > 1.2 with A > 0: clipped; r1 = 0.67 < 0.8 with A < 0: clipped too.
        let ppo = get(LossFn::Ppo {
            low: 0.8,
            high: 1.2,
        });
        assert!((ppo[0] + 1.2 * 2.0).abs() < 1e-6, "{ppo:?}");
        assert!((ppo[1] - 0.5 * 0.8).abs() < 1e-6, "{ppo:?}");
        let cispo = get(LossFn::Cispo {
            low: 0.8,
            high: 1.2,
        });
        assert!((cispo[0] - 1.2 * 2.0).abs() < 1e-6, "{cispo:?}");
        // p0 - exp(q0) = 0.368 - 0.301 = 0.067 with A > 0: kept at delta_high 0.2,
        // dropped at 0.05; exp(q1) - p1 = 0.905 - 0.607 = 0.298 with A < 0: dropped at
        // delta_low 0.2, kept at 0.5.
        let dppo = |delta_low, delta_high| {
            get(LossFn::Dppo {
                delta_low,
                delta_high,
            })
        };
        let kept = dppo(0.2, 0.2);
        assert!((kept[0] + r[0] * 2.0).abs() < 1e-6, "{kept:?}");
        assert_eq!(kept[1], 0.0, "{kept:?}");
        let flipped = dppo(0.5, 0.05);
        assert_eq!(flipped[0], 0.0, "{flipped:?}");
        assert!((flipped[1] - 0.5 * r[1]).abs() < 1e-6, "{flipped:?}");
    }

    #[test]
    fn unknown_losses_and_keys_are_refused_by_name() {
        let none = HashMap::new();
        assert!(LossFn::parse("ppo_critic", &none)
            .unwrap_err()
            .detail
            .contains("ppo_critic"));
        let deltas = HashMap::from([("delta_high".to_string(), 0.1)]);
        assert_eq!(
            LossFn::parse("dppo", &deltas).unwrap(),
            LossFn::Dppo {
                delta_low: 0.2,
                delta_high: 0.1
            }
        );
        assert!(LossFn::parse("ppo", &deltas)
            .unwrap_err()
            .detail
            .contains("delta_high"));
        assert!(LossFn::parse("mse", &none)
            .unwrap_err()
            .detail
            .contains("mse"));
        let cfg = HashMap::from([("clip_low_threshold".to_string(), 0.5)]);
        let e = LossFn::parse("cross_entropy", &cfg).unwrap_err();
        assert!(e.detail.contains("clip_low_threshold"), "{}", e.detail);
        assert_eq!(
            LossFn::parse("ppo", &cfg).unwrap(),
            LossFn::Ppo {
                low: 0.5,
                high: 1.2
            }
        );
    }
}
