//! Loss reductions, applied as skyrl 0.3.0 does: the advantages of each
//! mini-batch are scaled per row so that the masked *sum* of a per-token loss
//! linear in them is the chosen mean (`apply_loss_reduction_to_advantages_minibatch`).
//! Every policy loss is then a plain masked sum, so the result does not depend
//! on how the mini-batch is cut into micro-batches or spread over ranks.

use std::collections::BTreeMap;
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

/// How the per-token losses of a mini-batch become one number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossReduction {
    /// Sum over the mini-batch's loss tokens / their count.
    TokenMean,
    /// Token mean of each micro-batch, averaged over the micro-batches
    /// (skyrl-train before 0.3.0; depends on the micro-batch size).
    TokenMeanLegacy,
    /// Mean over sequences of per-sequence token means.
    SequenceMean,
    /// Per-sequence token sum / `max_seq_len`, then mean over sequences (Dr. GRPO).
    SeqMeanTokenSumNorm,
    /// Token mean within each prompt's group of samples, then mean over prompts.
    PromptMean,
}

impl FromStr for LossReduction {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "token_mean" => Self::TokenMean,
            "token_mean_legacy" => Self::TokenMeanLegacy,
            "sequence_mean" => Self::SequenceMean,
            "seq_mean_token_sum_norm" => Self::SeqMeanTokenSumNorm,
            "prompt_mean" => Self::PromptMean,
            other => bail!(
                "invalid loss reduction '{other}' (expected token_mean, token_mean_legacy, \
                 sequence_mean, seq_mean_token_sum_norm or prompt_mean)"
            ),
        })
    }
}

/// One row (sequence) of a mini-batch as a reduction sees it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReductionRow {
    /// Loss tokens of the row (its loss-mask sum).
    pub tokens: f64,
    /// The prompt the row was sampled from (rows of one prompt share it).
    pub prompt: u64,
    /// The micro-batch that trains the row.
    pub micro_batch: u64,
}

/// The factor of each row of one mini-batch: a row's advantages times its
/// factor, summed with any loss linear in them over the masked tokens, gives
/// the reduction. Denominators are clamped to at least 1, as in skyrl.
pub fn advantage_scales(
    reduction: LossReduction,
    rows: &[ReductionRow],
    max_seq_len: Option<i64>,
) -> Result<Vec<f64>> {
    let b = rows.len() as f64;
    let sums = |key: fn(&ReductionRow) -> u64| {
        let mut m: BTreeMap<u64, f64> = BTreeMap::new();
        for r in rows {
            *m.entry(key(r)).or_default() += r.tokens;
        }
        m
    };
    Ok(match reduction {
        LossReduction::TokenMean => {
            let total: f64 = rows.iter().map(|r| r.tokens).sum();
            vec![1.0 / total.max(1.0); rows.len()]
        }
        LossReduction::TokenMeanLegacy => {
            let per_micro = sums(|r| r.micro_batch);
            let n = per_micro.len() as f64;
            rows.iter()
                .map(|r| 1.0 / (per_micro[&r.micro_batch].max(1.0) * n))
                .collect()
        }
        LossReduction::SequenceMean => rows.iter().map(|r| 1.0 / (b * r.tokens.max(1.0))).collect(),
        LossReduction::SeqMeanTokenSumNorm => {
            let max_seq_len = max_seq_len
                .context("seq_mean_token_sum_norm needs trainer.algorithm.max_seq_len")?;
            vec![1.0 / (b * max_seq_len as f64); rows.len()]
        }
        LossReduction::PromptMean => {
            let per_prompt = sums(|r| r.prompt);
            let n = per_prompt.len() as f64;
            rows.iter()
                .map(|r| 1.0 / (n * per_prompt[&r.prompt].max(1.0)))
                .collect()
        }
    })
}

/// Scales `advantages` `[B, T]` of one whole mini-batch held in one process:
/// micro-batches are consecutive runs of `micro_batch_size` rows, `prompts`
/// (one id per row) are needed for `prompt_mean`.
pub fn scale_advantages(
    advantages: &Tensor,
    loss_mask: &Tensor,
    reduction: LossReduction,
    micro_batch_size: i64,
    max_seq_len: Option<i64>,
    prompts: Option<&[u64]>,
) -> Result<Tensor> {
    let tokens: Vec<f64> = Vec::<f64>::try_from(
        loss_mask
            .sum_dim_intlist([-1i64].as_slice(), false, Kind::Double)
            .to_device(tch::Device::Cpu),
    )?;
    if reduction == LossReduction::PromptMean && prompts.is_none() {
        bail!("prompt_mean needs the prompt of every row");
    }
    if let Some(p) = prompts {
        if p.len() != tokens.len() {
            bail!("{} prompt ids for {} rows", p.len(), tokens.len());
        }
    }
    let micro = micro_batch_size.max(1) as u64;
    let rows: Vec<ReductionRow> = tokens
        .iter()
        .enumerate()
        .map(|(i, &t)| ReductionRow {
            tokens: t,
            prompt: prompts.map_or(i as u64, |p| p[i]),
            micro_batch: i as u64 / micro,
        })
        .collect();
    let scales = advantage_scales(reduction, &rows, max_seq_len)?;
    let scales = Tensor::from_slice(&scales)
        .to_kind(advantages.kind())
        .to_device(advantages.device())
        .unsqueeze(-1);
    Ok(advantages * scales)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(tokens: f64, prompt: u64, micro_batch: u64) -> ReductionRow {
        ReductionRow {
            tokens,
            prompt,
            micro_batch,
        }
    }

    #[test]
    fn scales_turn_a_masked_sum_into_each_mean() {
        // Two prompts: rows 0,1 (2 and 4 tokens) and row 2 (0 tokens: clamped).
        let rows = [row(2.0, 7, 0), row(4.0, 7, 0), row(0.0, 9, 1)];
        let s = advantage_scales(LossReduction::TokenMean, &rows, None).unwrap();
        assert_eq!(s, vec![1.0 / 6.0; 3]);
        let s = advantage_scales(LossReduction::TokenMeanLegacy, &rows, None).unwrap();
        assert_eq!(s, vec![1.0 / 12.0, 1.0 / 12.0, 0.5]);
        let s = advantage_scales(LossReduction::SequenceMean, &rows, None).unwrap();
        assert_eq!(s, vec![1.0 / 6.0, 1.0 / 12.0, 1.0 / 3.0]);
        let s = advantage_scales(LossReduction::SeqMeanTokenSumNorm, &rows, Some(8)).unwrap();
        assert_eq!(s, vec![1.0 / 24.0; 3]);
        let s = advantage_scales(LossReduction::PromptMean, &rows, None).unwrap();
        assert_eq!(s, vec![1.0 / 12.0, 1.0 / 12.0, 0.5]);
        assert!(advantage_scales(LossReduction::SeqMeanTokenSumNorm, &rows, None).is_err());
    }

    #[test]
    fn unknown_reductions_are_refused_by_name() {
        let e = "mean".parse::<LossReduction>().unwrap_err().to_string();
        assert!(e.contains("'mean'") && e.contains("prompt_mean"), "{e}");
    }
}
