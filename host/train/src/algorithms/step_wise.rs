//! Step-wise advantages (`generator.step_wise_trajectories`): the estimator
//! runs over each trajectory's last step (so groups compare whole
//! trajectories) and every step of a trajectory gets its last step's
//! advantage. The rows come from `skyrl_rollout::step_wise::expand`.

use anyhow::Result;
use tch::{Kind, Tensor};

use super::{AdvantageEstimator, AdvantageInput, AdvantageParams};

/// Step-wise advantages: the estimator runs on each trajectory's last step
/// (grouped as usual), and every step of the trajectory gets that step's mean
/// advantage on its response tokens.
pub fn advantages(
    estimator: &dyn AdvantageEstimator,
    params: &AdvantageParams,
    token_rewards: &Tensor,
    response_mask: &Tensor,
    group_ids: &[String],
    trajectory: &[usize],
    is_last: &[bool],
) -> Result<Tensor> {
    let last_rows: Vec<i64> = (0..is_last.len() as i64)
        .filter(|&r| is_last[r as usize])
        .collect();
    let mut row_of_trajectory = vec![0i64; group_ids.len()];
    for (k, &r) in last_rows.iter().enumerate() {
        row_of_trajectory[trajectory[r as usize]] = k as i64;
    }
    let device = response_mask.device();
    let pick = Tensor::from_slice(&last_rows).to_device(device);
    let last_mask = response_mask.index_select(0, &pick);
    let last_groups: Vec<String> = last_rows
        .iter()
        .map(|&r| group_ids[trajectory[r as usize]].clone())
        .collect();
    let last = estimator.compute(
        &AdvantageInput {
            token_level_rewards: &token_rewards.index_select(0, &pick),
            response_mask: &last_mask,
            group_ids: &last_groups,
            values: None,
        },
        params,
    )?;
    let per_trajectory = (last.advantages * &last_mask).sum_dim_intlist(1, false, Kind::Float)
        / last_mask
            .sum_dim_intlist(1, false, Kind::Float)
            .clamp_min(1.0);
    let rows: Vec<i64> = trajectory.iter().map(|&t| row_of_trajectory[t]).collect();
    let rows = Tensor::from_slice(&rows).to_device(device);
    Ok(per_trajectory.index_select(0, &rows).unsqueeze(1) * response_mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_gets_its_trajectory_advantage() {
        use crate::algorithms::AdvantageEstimatorRegistry;
        // Trajectory 0: two steps, reward 1 at the end; trajectory 1: one step, reward 0.
        let rewards = Tensor::from_slice(&[0.0f32, 0.0, 0.0, 1.0, 0.0, 0.0]).view([3, 2]);
        let mask = Tensor::from_slice(&[1.0f32, 1.0, 1.0, 1.0, 1.0, 0.0]).view([3, 2]);
        let groups = vec!["g".to_string(), "g".to_string()];
        let reg = AdvantageEstimatorRegistry::with_defaults();
        let adv = advantages(
            reg.get("grpo").unwrap().as_ref(),
            &AdvantageParams::from(&crate::config::AlgorithmConfig::default()),
            &rewards,
            &mask,
            &groups,
            &[0, 0, 1],
            &[false, true, true],
        )
        .unwrap();
        let got = Vec::<f32>::try_from(adv.flatten(0, 1)).unwrap();
        // GRPO over {1, 0}: (x - 0.5) / (std 0.7071 + 1e-6).
        let a = 0.5 / (0.5f32.sqrt() + 1e-6);
        let want = [a, a, a, a, -a, 0.0];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-4, "{got:?}");
        }
    }
}
