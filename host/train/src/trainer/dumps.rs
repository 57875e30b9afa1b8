//! SkyRL's dumps under `trainer.export_path`: evaluation generations per data
//! source (`dump_eval_results`, skyrl-train's layout and fields), every
//! training batch (`dump_data_batch`, JSON lines where skyrl-train pickles its
//! `TrainingInputBatch`) and the policy in Hugging Face layout every
//! `hf_save_interval` steps (`global_step_N/policy`, as skyrl-train's
//! `save_models`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use skyrl_model::Tokenizer;
use skyrl_rollout::{GeneratorOutput, GeneratorRequest};
use tch::{Kind, Tensor};

use crate::metrics::StepMetrics;

/// One evaluated trajectory, with skyrl-train's field names.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct EvalRecord {
    pub input_prompt: String,
    pub output_response: String,
    /// The trajectory's total reward.
    pub score: f64,
    pub stop_reason: String,
    pub env_class: String,
    pub env_extras: Map<String, Value>,
    pub data_source: String,
}

/// The records of one generation call (`reqs[i]` produced trajectory `i`).
pub(super) fn eval_records(
    tokenizer: &Tokenizer,
    reqs: &[GeneratorRequest],
    out: &GeneratorOutput,
) -> Result<Vec<EvalRecord>> {
    reqs.iter()
        .enumerate()
        .map(|(i, r)| {
            let data_source = r
                .extras
                .get("data_source")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_string();
            Ok(EvalRecord {
                input_prompt: tokenizer.decode(&out.prompt_token_ids[i], false)?,
                output_response: tokenizer.decode(&out.response_ids[i], false)?,
                score: out.rewards[i].iter().map(|&x| x as f64).sum(),
                stop_reason: out.stop_reasons[i].clone(),
                env_class: r.env_class.clone(),
                env_extras: r.extras.clone(),
                data_source,
            })
        })
        .collect()
}

/// `export_path/dumped_evals/global_step_N_evals`.
pub(super) fn eval_dump_dir(export_path: &Path, step: u64) -> PathBuf {
    export_path
        .join("dumped_evals")
        .join(format!("global_step_{step}_evals"))
}

/// Writes `<data_source>.jsonl` per data source (`/` becomes `_`, as
/// skyrl-train's sanitize_data_source) and `aggregated_results.jsonl` with
/// the evaluation's metrics.
pub(super) fn write_eval_dump(
    dir: &Path,
    records: &[EvalRecord],
    metrics: &StepMetrics,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut by_source: BTreeMap<&str, Vec<&EvalRecord>> = BTreeMap::new();
    for r in records {
        by_source.entry(&r.data_source).or_default().push(r);
    }
    for (source, rows) in by_source {
        let path = dir.join(format!("{}.jsonl", source.replace('/', "_")));
        write_lines(
            &path,
            rows.iter()
                .map(|r| serde_json::to_value(r).expect("serialisable")),
        )?;
    }
    let metrics: Map<String, Value> = metrics
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                serde_json::Number::from_f64(*v).map_or(Value::Null, Value::Number),
            )
        })
        .collect();
    write_lines(
        &dir.join("aggregated_results.jsonl"),
        [Value::Object(metrics)],
    )
}

/// What one dumped training sample holds.
pub(super) struct BatchDump<'a> {
    pub out: &'a GeneratorOutput,
    /// The prompt group of each sequence (empty when unknown).
    pub group_ids: &'a [String],
    /// `[N, R]` per response token.
    pub advantages: &'a Tensor,
    pub old_logprobs: &'a Tensor,
    pub ref_logprobs: Option<&'a Tensor>,
}

/// `export_path/dumped_data/global_step_N_training_input.jsonl`: one line per
/// trained sequence (this rank's), its token ids, masks, rewards, and per
/// response token the advantages and log-probs the update used.
pub(super) fn write_batch_dump(
    export_path: &Path,
    step: u64,
    rank: usize,
    d: &BatchDump,
) -> Result<PathBuf> {
    let dir = export_path.join("dumped_data");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let suffix = match rank {
        0 => String::new(),
        r => format!("_rank{r}"),
    };
    let path = dir.join(format!("global_step_{step}_training_input{suffix}.jsonl"));
    let rows = |t: &Tensor| -> Result<Vec<Vec<f32>>> {
        Ok(Vec::<Vec<f32>>::try_from(
            t.to_kind(Kind::Float).to_device(tch::Device::Cpu),
        )?)
    };
    let adv = rows(d.advantages)?;
    let old = rows(d.old_logprobs)?;
    let reference = d.ref_logprobs.map(rows).transpose()?;
    let out = d.out;
    let lines = (0..out.response_ids.len()).map(|i| {
        let n = out.response_ids[i].len();
        let mut v = serde_json::json!({
            "uid": d.group_ids.get(i),
            "prompt_token_ids": out.prompt_token_ids[i],
            "response_ids": out.response_ids[i],
            "loss_mask": out.loss_masks[i],
            "rewards": out.rewards[i],
            "stop_reason": out.stop_reasons[i],
            "rollout_logprobs": out.rollout_logprobs.get(i),
            "advantages": &adv[i][..n.min(adv[i].len())],
            "action_log_probs": &old[i][..n.min(old[i].len())],
        });
        if let Some(r) = &reference {
            v["base_action_log_probs"] = serde_json::json!(&r[i][..n.min(r[i].len())]);
        }
        v
    });
    write_lines(&path, lines)?;
    Ok(path)
}

fn write_lines(path: &Path, lines: impl IntoIterator<Item = Value>) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    for line in lines {
        serde_json::to_writer(&mut w, &line)?;
        w.write_all(b"\n")?;
    }
    w.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}
