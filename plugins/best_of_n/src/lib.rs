//! Best-of-n generator: for every prompt, sample `n` first turns in one
//! batch, score each in a fresh environment, and return the best (the first
//! among ties) as the trajectory. Config (`generator.custom_generator.config`):
//! `n` (default 4).

use serde_json::Value;
use skyrl_sdk::generator::{llm, Completion};
use skyrl_sdk::{Env, Error, Generator, Prompt, Result, Sampling, Trajectory};

/// Index of the best score (first among ties).
pub fn best(scores: &[f64]) -> Option<usize> {
    let mut best: Option<usize> = None;
    for (i, s) in scores.iter().enumerate() {
        if best.is_none_or(|b| *s > scores[b]) {
            best = Some(i);
        }
    }
    best
}

/// The best-of-n generator.
pub struct BestOfN;

fn score(p: &Prompt, c: &Completion) -> Result<f64> {
    let env = Env::open(&p.env_class, &p.extras)?;
    env.init(&p.prompt)?;
    Ok(env.step(&c.text)?.reward)
}

impl Generator for BestOfN {
    fn generate(prompts: Vec<Prompt>, sampling: &Sampling) -> Result<Vec<Trajectory>> {
        let n = sampling
            .config
            .get("n")
            .and_then(Value::as_u64)
            .unwrap_or(4);
        if n == 0 {
            return Err(Error::config("best_of_n needs n >= 1"));
        }
        let mut out = Vec::with_capacity(prompts.len());
        for (k, p) in prompts.iter().enumerate() {
            let env = Env::open(&p.env_class, &p.extras)?;
            let chat = env.init(&p.prompt)?;
            let prompt_ids = llm::apply_chat_template(&chat, true);
            let mut params = sampling.params.clone();
            params.seed = params.seed.map(|s| s.wrapping_add(k as u64 * n));
            let candidates = llm::generate_batch(&vec![prompt_ids.clone(); n as usize], &params)?;
            let scores = candidates
                .iter()
                .map(|c| score(p, c))
                .collect::<Result<Vec<f64>>>()?;
            let i = best(&scores).expect("n >= 1");
            skyrl_sdk::debug!(
                "{}: best of {n} is #{i} with {}",
                p.trajectory_id,
                scores[i]
            );
            let mut t = Trajectory::new(prompt_ids);
            t.push_generated(&candidates[i], scores[i] as f32);
            out.push(t);
        }
        Ok(out)
    }
}

skyrl_sdk::export_generator!(
    BestOfN,
    name = "best_of_n",
    version = "0.1.0",
    description = "n samples per prompt, scored by the env; the best is the trajectory"
);

#[cfg(test)]
mod tests {
    use super::best;

    #[test]
    fn picks_the_first_best() {
        assert_eq!(best(&[0.0, 1.0, 1.0, 0.5]), Some(1));
        assert_eq!(best(&[]), None);
    }
}
