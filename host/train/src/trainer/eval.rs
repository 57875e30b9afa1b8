//! Evaluation over the validation split with `generator.eval_sampling_params`
//! (greedy by default): mean reward and env metrics. With several ranks each
//! generates every `world`-th trajectory (with that trajectory's own sample
//! stream) and the results are gathered; with `trainer.dump_eval_results`
//! rank 0 writes every trajectory (see [`super::dumps`]).

use anyhow::Result;
use skyrl_rollout::{GeneratorRequest, RolloutParams};

use super::dumps::{eval_dump_dir, eval_records, write_eval_dump, EvalRecord};
use super::eval_metrics::{eval_metrics, EvalSample};
use super::step_metrics::mean;
use super::work::derive_seed;
use super::Trainer;
use crate::dataset::expand_home;
use crate::metrics::{MeanSums, StepMetrics};

impl Trainer {
    /// Evaluates the current policy on the validation split.
    pub fn evaluate(&self) -> Result<StepMetrics> {
        let g = &self.cfg.generator;
        let sp = g
            .eval_sampling_params
            .clone()
            .unwrap_or_else(|| g.sampling_params.clone());
        let phase = self.progress.begin(super::Phase::Eval, self.global_step);
        let dump = self.cfg.trainer.dump_eval_results;
        let mut records: Vec<EvalRecord> = Vec::new();
        let mut samples: Vec<EvalSample> = Vec::new();
        let mut rewards = Vec::new();
        let mut env_sums = MeanSums::default();
        let all: Vec<usize> = (0..self.val_data.len()).collect();
        let chunk_size = self.cfg.trainer.eval_batch_size.max(1);
        for (k, chunk) in all.chunks(chunk_size).enumerate() {
            let all = self.requests(chunk, &self.val_data, g.eval_n_samples_per_prompt);
            let (rank, world) = (self.dist.rank(), self.dist.world());
            let reqs: Vec<_> = all
                .into_iter()
                .enumerate()
                .filter(|(i, _)| i % world == rank)
                .map(|(i, r)| GeneratorRequest {
                    stream: Some(i as u64),
                    ..r
                })
                .collect();
            if reqs.is_empty() {
                continue;
            }
            let seed = derive_seed(self.cfg.trainer.seed, self.global_step, 1000 + k as u64);
            let params = RolloutParams::from_config(g, &sp, Some(seed));
            let n = g.eval_n_samples_per_prompt.max(1);
            let first = k * chunk_size;
            let sources: Vec<(u64, String)> = reqs
                .iter()
                .map(|r| {
                    let i = r.stream.unwrap_or(0) as usize;
                    let ds = r
                        .extras
                        .get("data_source")
                        .and_then(|v| v.as_str())
                        .unwrap_or("unknown");
                    ((first + i / n) as u64, ds.to_string())
                })
                .collect();
            let out = self
                .generator
                .generate(&self.rollout, &self.tokenizer, &reqs, &params)?;
            env_sums.add_means(&out.env_metrics, reqs.len() as f64);
            if dump {
                records.extend(eval_records(&self.tokenizer, &reqs, &out)?);
            }
            rewards.extend(out.sequence_rewards());
            for ((uid, ds), r) in sources.iter().zip(&out.rewards) {
                samples.push(EvalSample::new(*uid, ds, r));
            }
        }
        let mut rewards_all = Vec::new();
        let mut env_all = MeanSums::default();
        let mut samples_all = Vec::new();
        for (r, sums, s) in self.dist.all_gather_json(&(rewards, env_sums, samples))? {
            rewards_all.extend(r);
            env_all.merge(sums);
            samples_all.extend(s);
        }
        self.progress
            .end(phase, rewards_all.len() as f64, "samples");
        let mut m = StepMetrics::new();
        m.insert("eval/reward_mean".into(), mean(&rewards_all));
        m.insert("eval/num_samples".into(), rewards_all.len() as f64);
        for (k, v) in env_all.means() {
            m.insert(format!("eval/env/{k}"), v);
        }
        m.extend(eval_metrics(
            &samples_all,
            g.eval_n_samples_per_prompt.max(1),
        ));
        if dump {
            let all: Vec<EvalRecord> = self
                .dist
                .all_gather_json(&records)?
                .into_iter()
                .flatten()
                .collect();
            if self.dist.is_main() {
                let export = expand_home(&self.cfg.trainer.export_path);
                let dir = match self.eval_only {
                    true => export.join("dumped_evals").join("eval_only"),
                    false => eval_dump_dir(&export, self.global_step),
                };
                write_eval_dump(&dir, &all, &m)?;
                tracing::info!(dir = %dir.display(), "dumped the evaluation");
            }
        }
        Ok(m)
    }
}
