//! Loss reductions from per-token losses to a scalar.

use std::str::FromStr;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use super::masked::{masked_mean, masked_mean_dim};

/// How per-token losses of a mini-batch become one number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossReduction {
    /// Sum over all unmasked tokens / their count.
    TokenMean,
    /// Mean over sequences of per-sequence token means.
    SequenceMean,
    /// Per-sequence token sum / `max_seq_len`, then mean over sequences (Dr. GRPO).
    SeqMeanTokenSumNorm,
}

impl FromStr for LossReduction {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "token_mean" => Self::TokenMean,
            "sequence_mean" => Self::SequenceMean,
            "seq_mean_token_sum_norm" => Self::SeqMeanTokenSumNorm,
            other => bail!(
                "invalid loss reduction '{other}' (expected token_mean, sequence_mean or seq_mean_token_sum_norm)"
            ),
        })
    }
}

/// Reduces `loss` `[B, T]` under `loss_mask` `[B, T]`.
pub fn reduce_loss(
    loss: &Tensor,
    loss_mask: &Tensor,
    reduction: LossReduction,
    max_seq_len: Option<i64>,
) -> Result<Tensor> {
    Ok(match reduction {
        LossReduction::TokenMean => masked_mean(loss, loss_mask),
        LossReduction::SequenceMean => masked_mean_dim(loss, loss_mask, -1).mean(Kind::Float),
        LossReduction::SeqMeanTokenSumNorm => {
            let max_seq_len = max_seq_len.context("seq_mean_token_sum_norm needs max_seq_len")?;
            ((loss * loss_mask).sum_dim_intlist([-1i64].as_slice(), false, Kind::Float)
                / max_seq_len as f64)
                .mean(Kind::Float)
        }
    })
}
