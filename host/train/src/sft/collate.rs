//! Tokenised conversations as training tensors: the RL side's
//! [`TrainingBatch`] (the tokens before the action window left-padded, the
//! window right-padded after them), with the loss mask pre-scaled by
//! 1 / (loss tokens of the whole step batch) as skyrl 0.3.0's
//! `DefaultCollator` does, so the masked sums of every micro-batch on every
//! rank add up to the per-token mean over the batch.

use skyrl_rollout::GeneratorOutput;
use tch::Device;

use super::tokenize::SftExample;
use crate::batch::TrainingBatch;

/// `examples` as one padded batch, each loss-mask entry times `scale`.
pub fn collate(examples: &[&SftExample], scale: f32, pad: i64, device: Device) -> TrainingBatch {
    let mut out = GeneratorOutput::default();
    for e in examples {
        let split = e.input_ids.len() - e.num_actions;
        out.prompt_token_ids.push(e.input_ids[..split].to_vec());
        out.response_ids.push(e.input_ids[split..].to_vec());
        out.loss_masks
            .push(e.loss_mask.iter().map(|&m| m as f32 * scale).collect());
        out.rewards.push(vec![0.0; e.num_actions]);
        out.rollout_logprobs.push(vec![0.0; e.num_actions]);
    }
    TrainingBatch::from_output(&out, pad, device)
}

/// Rows `start..start+len` of `batch` (same widths).
pub fn rows(batch: &TrainingBatch, start: i64, len: i64) -> TrainingBatch {
    TrainingBatch {
        input_ids: batch.input_ids.narrow(0, start, len),
        attention_mask: batch.attention_mask.narrow(0, start, len),
        prompt_len: batch.prompt_len,
        response_mask: batch.response_mask.narrow(0, start, len),
        token_rewards: batch.token_rewards.narrow(0, start, len),
        rollout_logprobs: batch.rollout_logprobs.narrow(0, start, len),
    }
}

/// This rank's micro-batches of `examples` (its share of a step): `micro`
/// rows each, padded to their own longest row (`own_padding`) or all to the
/// longest row of `examples`.
pub fn micro_batches(
    examples: &[&SftExample],
    micro: usize,
    own_padding: bool,
    scale: f32,
    pad: i64,
    device: Device,
) -> Vec<TrainingBatch> {
    let micro = micro.max(1);
    if own_padding {
        return examples
            .chunks(micro)
            .map(|c| collate(c, scale, pad, device))
            .collect();
    }
    let all = collate(examples, scale, pad, device);
    let n = examples.len() as i64;
    (0..n)
        .step_by(micro)
        .map(|s| rows(&all, s, (micro as i64).min(n - s)))
        .collect()
}

/// The rows of a step batch of `real` conversations that rank `rank` of
/// `world` trains on: the `rank`-th of `world` equal contiguous parts of the
/// batch padded to `batch_size` rows (0.3.0 pads a short last batch), less
/// the padding. May be empty.
pub fn rank_share(
    real: usize,
    batch_size: usize,
    rank: usize,
    world: usize,
) -> std::ops::Range<usize> {
    let per = batch_size / world.max(1);
    let start = (rank * per).min(real);
    let end = ((rank + 1) * per).min(real);
    start..end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(ids: &[i64], mask: &[u8]) -> SftExample {
        SftExample {
            input_ids: ids.to_vec(),
            num_actions: mask.len(),
            loss_mask: mask.to_vec(),
        }
    }

    #[test]
    fn the_action_window_follows_the_left_padded_rest() {
        let (a, b) = (ex(&[5, 6, 7, 8], &[1, 0]), ex(&[9, 10, 11], &[1, 1, 1]));
        let batch = collate(&[&a, &b], 0.25, 0, Device::Cpu);
        assert_eq!(batch.prompt_len, 2);
        let ids = Vec::<i64>::try_from(batch.input_ids.view([-1])).unwrap();
        assert_eq!(ids, vec![5, 6, 7, 8, 0, 0, 0, 9, 10, 11]);
        let mask = Vec::<f32>::try_from(batch.response_mask.view([-1])).unwrap();
        assert_eq!(mask, vec![0.25, 0.0, 0.0, 0.25, 0.25, 0.25]);
        let attn = Vec::<i64>::try_from(batch.attention_mask.view([-1])).unwrap();
        assert_eq!(attn, vec![1, 1, 1, 1, 0, 0, 0, 1, 1, 1]);
        // Micro-batches padded to their own rows are narrower (the part
        // before the window is at least one column wide).
        let own = micro_batches(&[&a, &b], 1, true, 1.0, 0, Device::Cpu);
        assert_eq!(own[1].input_ids.size(), vec![1, 4]);
        let shared = micro_batches(&[&a, &b], 1, false, 1.0, 0, Device::Cpu);
        assert_eq!(shared[1].input_ids.size(), vec![1, 5]);
    }

    #[test]
    fn a_short_last_batch_leaves_later_ranks_less_or_nothing() {
        assert_eq!(rank_share(8, 8, 1, 2), 4..8);
        assert_eq!(rank_share(5, 8, 1, 2), 4..5);
        assert_eq!(rank_share(3, 8, 1, 2), 3..3);
        assert_eq!(rank_share(3, 8, 0, 1), 0..3);
    }
}
