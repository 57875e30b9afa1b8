//! Step-wise trajectories (`generator.step_wise_trajectories`): every turn of
//! a multi-turn trajectory becomes its own training sample. Its prompt is
//! everything the model saw before that turn (the prompt, earlier turns and
//! observations); its response is the turn's generated tokens. The
//! trajectory's total reward sits on the last token of its last step.
//! The trainer computes advantages over last steps
//! (`skyrl_train::algorithms::step_wise`).

use crate::output::GeneratorOutput;

/// Samples after expansion, with where each came from.
#[derive(Debug, Clone, Default)]
pub struct StepWise {
    /// One row per step.
    pub out: GeneratorOutput,
    /// Index of the trajectory each row came from.
    pub trajectory: Vec<usize>,
    /// Whether the row is its trajectory's last step.
    pub is_last: Vec<bool>,
}

/// Splits every trajectory of `out` into its turns. A trajectory without a
/// generated turn (e.g. its env failed at init) stays one row.
pub fn expand(out: &GeneratorOutput) -> StepWise {
    let mut sw = StepWise::default();
    for i in 0..out.len() {
        let spans = out.turn_spans.get(i).cloned().unwrap_or_default();
        let spans = if spans.is_empty() {
            vec![(0, out.response_ids[i].len())]
        } else {
            spans
        };
        let total: f32 = out.rewards[i].iter().sum();
        for (k, &(start, end)) in spans.iter().enumerate() {
            let last = k + 1 == spans.len();
            let mut prompt = out.prompt_token_ids[i].clone();
            prompt.extend_from_slice(&out.response_ids[i][..start]);
            let len = end - start;
            let mut rewards = vec![0.0; len];
            if last {
                if let Some(r) = rewards.last_mut() {
                    *r = total;
                }
            }
            let o = &mut sw.out;
            o.prompt_token_ids.push(prompt);
            o.response_ids
                .push(out.response_ids[i][start..end].to_vec());
            o.loss_masks.push(out.loss_masks[i][start..end].to_vec());
            o.rollout_logprobs
                .push(out.rollout_logprobs[i][start..end].to_vec());
            o.rewards.push(rewards);
            o.stop_reasons.push(out.stop_reasons[i].clone());
            o.num_turns.push(out.num_turns[i]);
            if let Some(v) = out.policy_versions.get(i) {
                o.policy_versions.push(*v);
            }
            o.turn_spans.push(vec![(0, len)]);
            sw.trajectory.push(i);
            sw.is_last.push(last);
        }
    }
    sw.out.env_metrics = out.env_metrics.clone();
    sw.out.reward_metrics = out.reward_metrics.clone();
    sw
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_turns() -> GeneratorOutput {
        // prompt [1 2]; turn 1 = [10 11], observation [50], turn 2 = [12]
        GeneratorOutput {
            prompt_token_ids: vec![vec![1, 2], vec![3]],
            response_ids: vec![vec![10, 11, 50, 12], vec![20]],
            rewards: vec![vec![0.0, 0.25, 0.0, 0.5], vec![1.0]],
            loss_masks: vec![vec![1.0, 1.0, 0.0, 1.0], vec![1.0]],
            stop_reasons: vec!["stop".into(), "length".into()],
            rollout_logprobs: vec![vec![-0.1, -0.2, 0.0, -0.3], vec![-0.4]],
            num_turns: vec![2, 1],
            policy_versions: vec![3, 4],
            turn_spans: vec![vec![(0, 2), (3, 4)], vec![(0, 1)]],
            ..Default::default()
        }
    }

    #[test]
    fn every_turn_becomes_a_sample_with_its_context_as_prompt() {
        let sw = expand(&two_turns());
        assert_eq!(sw.trajectory, vec![0, 0, 1]);
        assert_eq!(sw.is_last, vec![false, true, true]);
        let o = &sw.out;
        assert_eq!(o.prompt_token_ids[0], vec![1, 2]);
        assert_eq!(o.response_ids[0], vec![10, 11]);
        assert_eq!(o.prompt_token_ids[1], vec![1, 2, 10, 11, 50]);
        assert_eq!(o.response_ids[1], vec![12]);
        assert_eq!(o.rollout_logprobs[1], vec![-0.3]);
        // The whole trajectory's reward (0.25 + 0.5) on its last step only.
        assert_eq!(o.rewards[0], vec![0.0, 0.0]);
        assert_eq!(o.rewards[1], vec![0.75]);
        assert_eq!(o.rewards[2], vec![1.0]);
        assert_eq!(o.stop_reasons, vec!["stop", "stop", "length"]);
        assert_eq!(o.policy_versions, vec![3, 3, 4]);
    }
}
