//! Sampling one token per row when the rows have their own settings:
//! rows are grouped by sampling settings, penalties are applied per row, and
//! raw log-probs (and top alternatives) come from the unpenalised logits.

use tch::{Kind, Tensor};

use super::sequence::Sequence;
use crate::sampling::{sample_next_with_raw, SamplingParams};

/// One row to sample: its sequence and its `[V]` fp32 logits.
pub struct Row<'a> {
    pub seq: &'a Sequence,
    pub logits: &'a Tensor,
}

/// What was sampled for one row.
pub struct Sampled {
    pub token: i64,
    pub logprob: f32,
    /// The top alternatives, when the row's settings ask for them.
    pub top: Option<Vec<(i64, f32)>>,
}

/// Settings that change how a row is sampled (everything else is per row).
fn same_sampler(a: &SamplingParams, b: &SamplingParams) -> bool {
    a.temperature == b.temperature
        && a.top_p == b.top_p
        && a.top_k == b.top_k
        && a.min_p == b.min_p
        && a.logprob_mode == b.logprob_mode
        && a.top_logprobs == b.top_logprobs
}

/// Samples every row with uniform `uniforms[i]`, in row order.
pub fn sample_rows(rows: &[Row<'_>], uniforms: &[f64]) -> Vec<Sampled> {
    let mut out: Vec<Option<Sampled>> = (0..rows.len()).map(|_| None).collect();
    let mut todo: Vec<usize> = (0..rows.len()).collect();
    while let Some(&first) = todo.first() {
        let params = rows[first].seq.params.clone();
        let (group, rest): (Vec<usize>, Vec<usize>) = todo
            .into_iter()
            .partition(|&i| same_sampler(&rows[i].seq.params, &params));
        todo = rest;
        let raw = Tensor::stack(
            &group.iter().map(|&i| rows[i].logits).collect::<Vec<_>>(),
            0,
        );
        let penalised = group
            .iter()
            .any(|&i| rows[i].seq.params.has_penalties() || rows[i].seq.holds_stop_tokens());
        let processed = if penalised {
            let p = raw.copy();
            for (r, &i) in group.iter().enumerate() {
                apply_penalties(&p.get(r as i64), rows[i].seq);
            }
            p
        } else {
            raw.shallow_clone()
        };
        let u: Vec<f64> = group.iter().map(|&i| uniforms[i]).collect();
        let (tokens, logprobs) = sample_next_with_raw(&processed, &raw, &params, &u);
        let tokens = Vec::<i64>::try_from(tokens.to_device(tch::Device::Cpu)).unwrap_or_default();
        let logprobs =
            Vec::<f32>::try_from(logprobs.to_device(tch::Device::Cpu)).unwrap_or_default();
        let mut tops = (params.top_logprobs > 0).then(|| {
            top_k_rows(
                &raw.log_softmax(-1, Kind::Float),
                params.top_logprobs as i64,
            )
            .into_iter()
        });
        for (r, &i) in group.iter().enumerate() {
            out[i] = Some(Sampled {
                token: tokens[r],
                logprob: logprobs[r],
                top: tops.as_mut().and_then(Iterator::next),
            });
        }
    }
    out.into_iter()
        .map(|s| s.expect("every row sampled"))
        .collect()
}

/// The `k` largest entries of each row of `logp [n, V]` as `(token, value)`.
pub fn top_k_rows(logp: &Tensor, k: i64) -> Vec<Vec<(i64, f32)>> {
    let n = logp.size()[0] as usize;
    if k <= 0 {
        return vec![Vec::new(); n];
    }
    let k = k.min(logp.size()[1]);
    let (values, indices) = logp.topk(k, -1, true, true);
    let values =
        Vec::<f32>::try_from(values.to_device(tch::Device::Cpu).reshape([-1])).unwrap_or_default();
    let indices =
        Vec::<i64>::try_from(indices.to_device(tch::Device::Cpu).reshape([-1])).unwrap_or_default();
    indices
        .chunks(k as usize)
        .zip(values.chunks(k as usize))
        .map(|(ids, vals)| ids.iter().copied().zip(vals.iter().copied()).collect())
        .collect()
}

/// Repetition penalty (vLLM / HF: over prompt and output tokens), then
/// frequency and presence penalties (OpenAI: over output tokens), then, before
/// `min_tokens`, stop tokens masked out (vLLM's min-tokens processor); in place
/// on one row of logits `[V]`.
fn apply_penalties(row: &Tensor, seq: &Sequence) {
    let p = &seq.params;
    let device = row.device();
    let mut row = row.shallow_clone();
    if seq.holds_stop_tokens() {
        let vocab = row.size()[0];
        let ids: Vec<i64> = seq
            .stop_ids
            .iter()
            .copied()
            .filter(|&t| (0..vocab).contains(&t))
            .collect();
        let _ = row.index_fill_(
            0,
            &Tensor::from_slice(&ids).to_device(device),
            f64::NEG_INFINITY,
        );
    }
    if p.repetition_penalty != 1.0 {
        let mut seen: Vec<i64> = seq.prompt.iter().chain(&seq.output).copied().collect();
        seen.sort_unstable();
        seen.dedup();
        let ids = Tensor::from_slice(&seen).to_device(device);
        let vals = row.index_select(0, &ids);
        // Negative logits are multiplied, positive ones divided.
        let penalised = (&vals * p.repetition_penalty)
            .where_self(&vals.lt(0.0), &(&vals / p.repetition_penalty));
        let _ = row.index_copy_(0, &ids, &penalised);
    }
    if (p.presence_penalty != 0.0 || p.frequency_penalty != 0.0) && !seq.output_counts.is_empty() {
        let (ids, deltas): (Vec<i64>, Vec<f32>) = seq
            .output_counts
            .iter()
            .map(|(&t, &c)| {
                (
                    t,
                    -(p.presence_penalty + p.frequency_penalty * c as f64) as f32,
                )
            })
            .unzip();
        let ids = Tensor::from_slice(&ids).to_device(device);
        let deltas = Tensor::from_slice(&deltas).to_device(device);
        let _ = row.index_add_(0, &ids, &deltas);
    }
}
