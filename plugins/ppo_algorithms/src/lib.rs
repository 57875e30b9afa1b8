//! GRPO or GAE advantages and PPO's clipped surrogate loss, written against
//! the `algorithm-plugin` world: the same maths as the host's built-in
//! `grpo`, `gae` and `regular`, so a run with `advantage_estimator=plugin:NAME`
//! and `policy_loss_type=plugin:NAME` can be compared with the built-ins.
//! `trainer.algorithm.plugin_options.NAME.estimator` picks `grpo` (default)
//! or `gae` (needs a critic: set `trainer.critic.model`).
//!
//! The loss returns `d loss / d logp` in closed form (no autograd): where
//! the ratio is inside the clip range (or the unclipped term is the
//! smaller one) it is `-r * A` per token, else 0.

use std::collections::HashMap;

use serde_json::Value;
use skyrl_sdk::{
    AdvantageEstimator, AdvantageInput, AdvantageOutput, Error, LossInput, LossOutput, Matrix,
    PolicyLoss, Result,
};

/// Added to the group std, as the host's estimators.
const EPSILON: f64 = 1e-6;
/// Log-ratios are clamped to +-20 before `exp`, as the host's losses.
const LOG_RATIO_CLIP: f64 = 20.0;

/// The advantage estimator named by `options.estimator`: `grpo` or `gae`.
pub struct Estimators;

impl AdvantageEstimator for Estimators {
    fn compute(input: &AdvantageInput) -> Result<AdvantageOutput> {
        let name = input
            .config
            .get("options")
            .and_then(|o| o.get("estimator"))
            .cloned()
            .unwrap_or(Value::Null);
        match name.as_str() {
            None | Some("grpo") => grpo(input),
            Some("gae") => gae(input),
            _ => Err(Error::config(format!(
                "options.estimator must be grpo or gae, got {name}"
            ))),
        }
    }
}

/// GRPO: `(s - mean_g) / (std_g + eps)` per group of the sequence scores
/// (unbiased std; a group of one: mean 0, std 1), or `s - mean_g` with
/// `grpo_norm_by_std: false`; broadcast over the response mask.
fn grpo(input: &AdvantageInput) -> Result<AdvantageOutput> {
    let rows = input.token_rewards.nrows();
    if input.group_ids.len() != rows {
        return Err(Error::input(format!(
            "{} group ids for {rows} rows",
            input.group_ids.len()
        )));
    }
    let norm_by_std = flag(&input.config, "grpo_norm_by_std", true)?;
    let scores: Vec<f64> = (0..rows)
        .map(|r| input.token_rewards.row(r).iter().map(|&v| v as f64).sum())
        .collect();
    let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
    for (r, id) in input.group_ids.iter().enumerate() {
        groups.entry(id.as_str()).or_default().push(r);
    }
    let mut per_row = vec![0.0; rows];
    for members in groups.values() {
        let n = members.len() as f64;
        let (mean, std) = if members.len() == 1 {
            (0.0, 1.0)
        } else {
            let mean = members.iter().map(|&r| scores[r]).sum::<f64>() / n;
            let var = members
                .iter()
                .map(|&r| (scores[r] - mean).powi(2))
                .sum::<f64>()
                / (n - 1.0);
            (mean, var.sqrt())
        };
        for &r in members {
            per_row[r] = match norm_by_std {
                true => (scores[r] - mean) / (std + EPSILON),
                false => scores[r] - mean,
            };
        }
    }
    let mut advantages = Matrix::zeros(rows, input.token_rewards.ncols());
    for (r, a) in per_row.iter().enumerate() {
        let mask = input.response_mask.row(r);
        for (out, &m) in advantages.row_mut(r).iter_mut().zip(mask) {
            *out = (*a as f32) * m;
        }
    }
    Ok(AdvantageOutput {
        returns: advantages.clone(),
        advantages,
    })
}

/// GAE: `delta_t = r_t + gamma V_{t+1} - V_t`, `A_t = delta_t + gamma lambda A_{t+1}`
/// (`V` past the last column is 0), returns `A + V`, advantages whitened over
/// the mask with the unbiased variance: `(A - mean) / sqrt(var + 1e-8)`.
fn gae(input: &AdvantageInput) -> Result<AdvantageOutput> {
    let values = input
        .values
        .as_ref()
        .ok_or_else(|| Error::config("gae needs critic values: set trainer.critic.model"))?;
    let gamma = number(&input.config, "gamma", 1.0)?;
    let lambd = number(&input.config, "lambd", 1.0)?;
    let (rows, cols) = (input.token_rewards.nrows(), input.token_rewards.ncols());
    let mut adv = vec![0.0f64; rows * cols];
    for r in 0..rows {
        let mut last = 0.0;
        for c in (0..cols).rev() {
            let next = if c + 1 < cols {
                values.at(r, c + 1) as f64
            } else {
                0.0
            };
            let delta = input.token_rewards.at(r, c) as f64 + gamma * next - values.at(r, c) as f64;
            last = delta + gamma * lambd * last;
            adv[r * cols + c] = last;
        }
    }
    let mask = &input.response_mask.data;
    let n: f64 = mask.iter().map(|&m| m as f64).sum();
    if n < 2.0 {
        return Err(Error::input(
            "gae whitening needs at least two response tokens",
        ));
    }
    let mean = adv
        .iter()
        .zip(mask)
        .map(|(a, &m)| a * m as f64)
        .sum::<f64>()
        / n;
    let var = adv
        .iter()
        .zip(mask)
        .map(|(a, &m)| (a - mean).powi(2) * m as f64)
        .sum::<f64>()
        / n
        * (n / (n - 1.0));
    let scale = 1.0 / (var + 1e-8).sqrt();
    let mut advantages = Matrix::zeros(rows, cols);
    let mut returns = Matrix::zeros(rows, cols);
    for (i, a) in adv.iter().enumerate() {
        advantages.data[i] = ((a - mean) * scale) as f32;
        returns.data[i] = (a + values.data[i] as f64) as f32;
    }
    Ok(AdvantageOutput {
        advantages,
        returns,
    })
}

/// PPO's clipped surrogate `-min(r A, clip(r, 1 - eps_clip_low, 1 + eps_clip_high) A)`,
/// summed over the loss mask (the advantages carry the loss reduction).
pub struct PpoClip;

impl PolicyLoss for PpoClip {
    fn compute(input: &LossInput) -> Result<LossOutput> {
        let low = number(&input.config, "eps_clip_low", 0.2)?;
        let high = number(&input.config, "eps_clip_high", 0.2)?;
        let (rows, cols) = (input.log_probs.nrows(), input.log_probs.ncols());
        let mut grad = Matrix::zeros(rows, cols);
        let (mut loss, mut clipped, mut tokens) = (0.0f64, 0.0f64, 0.0f64);
        for (i, g) in grad.data.iter_mut().enumerate() {
            let m = input.loss_mask.data[i] as f64;
            if m == 0.0 {
                continue;
            }
            let delta = input.log_probs.data[i] as f64 - input.old_log_probs.data[i] as f64;
            let ratio = delta.clamp(-LOG_RATIO_CLIP, LOG_RATIO_CLIP).exp();
            let a = input.advantages.data[i] as f64;
            let unclipped = ratio * a;
            let bounded = ratio.clamp(1.0 - low, 1.0 + high) * a;
            // The smaller term is the objective; its ratio moves with logp
            // unless it is the clipped bound or the log-ratio was clamped.
            let inside = (1.0 - low..=1.0 + high).contains(&ratio);
            let follows = unclipped <= bounded || inside;
            let moving = delta.abs() <= LOG_RATIO_CLIP;
            loss -= m * unclipped.min(bounded);
            if follows && moving {
                *g = (-m * ratio * a) as f32;
            }
            clipped += m * f64::from(u8::from(bounded < unclipped));
            tokens += m;
        }
        Ok(LossOutput {
            loss,
            grad,
            metrics: vec![("clip_ratio".into(), clipped / tokens.max(1.0))],
        })
    }
}

fn number(config: &Value, key: &str, default: f64) -> Result<f64> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .ok_or_else(|| Error::config(format!("{key} must be a number, got {v}"))),
    }
}

fn flag(config: &Value, key: &str, default: bool) -> Result<bool> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_bool()
            .ok_or_else(|| Error::config(format!("{key} must be true or false, got {v}"))),
    }
}

skyrl_sdk::export_algorithm!(
    name = "ppo_algorithms",
    version = "0.1.0",
    description =
        "GRPO or GAE advantages and PPO's clipped loss (as the built-in grpo, gae and regular), in Rust.",
    advantage = Estimators,
    policy_loss = PpoClip,
);

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rows: usize, cols: usize, data: &[f32]) -> Matrix {
        Matrix {
            rows: rows as u32,
            cols: cols as u32,
            data: data.to_vec(),
        }
    }

    #[test]
    fn grpo_normalises_each_group() {
        let input = AdvantageInput {
            token_rewards: m(3, 2, &[0.0, 1.0, 0.0, 0.0, 0.0, 2.0]),
            response_mask: m(3, 2, &[1.0, 1.0, 1.0, 1.0, 1.0, 0.0]),
            group_ids: vec!["a".into(), "a".into(), "b".into()],
            values: None,
            config: Value::Null,
        };
        let out = Estimators::compute(&input).unwrap();
        // Group a: scores 1 and 0, mean 0.5, unbiased std 0.7071.
        let a = 0.5 / (0.5f64.sqrt() + EPSILON);
        assert!((out.advantages.at(0, 0) as f64 - a).abs() < 1e-6);
        assert!((out.advantages.at(1, 1) as f64 + a).abs() < 1e-6);
        // Group of one: (2 - 0) / (1 + eps) on the masked token only.
        assert!((out.advantages.at(2, 0) as f64 - 2.0 / (1.0 + EPSILON)).abs() < 1e-6);
        assert_eq!(out.advantages.at(2, 1), 0.0);
    }

    #[test]
    fn ppo_clip_zeroes_the_gradient_of_clipped_tokens() {
        let lp = (1.5f32).ln();
        let input = LossInput {
            log_probs: m(1, 2, &[lp, 0.0]),
            old_log_probs: m(1, 2, &[0.0, 0.0]),
            rollout_log_probs: None,
            advantages: m(1, 2, &[1.0, -1.0]),
            loss_mask: m(1, 2, &[1.0, 1.0]),
            config: Value::Null,
        };
        let out = PpoClip::compute(&input).unwrap();
        // Token 0: ratio 1.5 > 1.2 with A > 0 is clipped; token 1: ratio 1.
        assert!((out.loss - (-1.2 + 1.0)).abs() < 1e-6);
        assert_eq!(out.grad.at(0, 0), 0.0);
        assert!((out.grad.at(0, 1) - 1.0).abs() < 1e-6);
        assert_eq!(out.metrics[0].1, 0.5);
    }
}
