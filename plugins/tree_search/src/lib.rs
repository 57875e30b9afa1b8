//! Tree-search generator: beam search over multi-turn episodes. Every turn,
//! each live beam samples `branch` continuations; each child is scored by
//! replaying its actions in a fresh environment (envs cannot be copied) and
//! the `width` children with the highest cumulative reward survive. The best
//! finished (or deepest) beam is the trajectory. Config
//! (`generator.custom_generator.config`): `width` (2), `branch` (2).

use serde_json::Value;
use skyrl_sdk::generator::llm;
use skyrl_sdk::{Env, EnvStep, Generator, Message, Prompt, Result, Sampling, Trajectory};

/// One node of the search.
#[derive(Clone)]
struct Beam {
    actions: Vec<String>,
    trajectory: Trajectory,
    score: f64,
    done: bool,
}

/// Token ids of `observations` continuing a conversation (the chat template
/// of a fixed base plus the observations, minus the base), as the host does.
fn observation_ids(observations: &[Message]) -> Vec<u32> {
    let base = vec![
        Message::system("You are a helpful assistant."),
        Message::user("I am a user."),
    ];
    let base_ids = llm::apply_chat_template(&base, false);
    let mut all = base;
    all.extend_from_slice(observations);
    let ids = llm::apply_chat_template(&all, true);
    ids[base_ids.len().min(ids.len())..].to_vec()
}

/// Replays `actions` in a fresh env; returns the last step.
fn replay(p: &Prompt, actions: &[String]) -> Result<EnvStep> {
    let env = Env::open(&p.env_class, &p.extras)?;
    env.init(&p.prompt)?;
    let mut last = None;
    for a in actions {
        last = Some(env.step(a)?);
    }
    Ok(last.expect("at least one action"))
}

/// Keeps the `width` best beams (stable: earlier beams win ties).
fn prune(mut beams: Vec<Beam>, width: usize) -> Vec<Beam> {
    beams.sort_by(|a, b| b.score.total_cmp(&a.score));
    beams.truncate(width);
    beams
}

/// The tree-search generator.
pub struct TreeSearch;

impl Generator for TreeSearch {
    fn generate(prompts: Vec<Prompt>, sampling: &Sampling) -> Result<Vec<Trajectory>> {
        let cfg = |k: &str, d: u64| sampling.config.get(k).and_then(Value::as_u64).unwrap_or(d);
        let (width, branch) = (
            cfg("width", 2).max(1) as usize,
            cfg("branch", 2).max(1) as usize,
        );
        let mut out = Vec::with_capacity(prompts.len());
        for (k, p) in prompts.iter().enumerate() {
            // The root env only renders the prompt; it closes at the end of this block.
            let chat = Env::open(&p.env_class, &p.extras)?.init(&p.prompt)?;
            let prompt_ids = llm::apply_chat_template(&chat, true);
            let mut beams = vec![Beam {
                actions: Vec::new(),
                trajectory: Trajectory::new(prompt_ids.clone()),
                score: 0.0,
                done: false,
            }];
            for turn in 0..sampling.max_turns.max(1) {
                let (finished, live): (Vec<Beam>, Vec<Beam>) =
                    beams.into_iter().partition(|b| b.done);
                if live.is_empty() {
                    beams = finished;
                    break;
                }
                let mut children = finished;
                for (j, beam) in live.iter().enumerate() {
                    let mut context = prompt_ids.clone();
                    context.extend_from_slice(&beam.trajectory.response_ids);
                    if context.len() as u32 > sampling.max_input_length {
                        let mut b = beam.clone();
                        b.done = true;
                        b.trajectory.stop_reason = "length".into();
                        children.push(b);
                        continue;
                    }
                    let mut params = sampling.params.clone();
                    params.seed = params
                        .seed
                        .map(|s| s.wrapping_add((k as u64) << 32 | (turn as u64) << 16 | j as u64));
                    let samples = llm::generate_batch(&vec![context; branch], &params)?;
                    for c in samples {
                        let mut child = beam.clone();
                        child.actions.push(c.text.clone());
                        let step = replay(p, &child.actions)?;
                        child.trajectory.push_generated(&c, step.reward as f32);
                        child.score += step.reward;
                        child.done = step.done || turn + 1 >= sampling.max_turns;
                        if !child.done {
                            child
                                .trajectory
                                .push_observation(&observation_ids(&step.observations));
                        }
                        children.push(child);
                    }
                }
                beams = prune(children, width);
            }
            let best = prune(beams, 1).remove(0);
            skyrl_sdk::debug!("{}: best beam scores {}", p.trajectory_id, best.score);
            out.push(best.trajectory);
        }
        Ok(out)
    }
}

skyrl_sdk::export_generator!(
    TreeSearch,
    name = "tree_search",
    version = "0.1.0",
    description = "beam search over multi-turn episodes, scored by replaying actions in fresh envs"
);

#[cfg(test)]
mod tests {
    use super::*;

    fn beam(score: f64) -> Beam {
        Beam {
            actions: vec![],
            trajectory: Trajectory::new(vec![1]),
            score,
            done: false,
        }
    }

    #[test]
    fn prune_keeps_the_best_stably() {
        let kept = prune(vec![beam(0.1), beam(0.5), beam(0.5), beam(0.2)], 2);
        assert_eq!(
            kept.iter().map(|b| b.score).collect::<Vec<_>>(),
            vec![0.5, 0.5]
        );
    }
}
