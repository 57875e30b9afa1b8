//! Reward rubrics (`environment.reward_rubric`): the env's reward composed
//! with reward plugins. A trajectory's reward becomes `env_weight` times its
//! env reward (every per-token reward is scaled) plus, on its last token, the
//! weighted sum of each component's score of the generated text. Each
//! component's mean raw score is reported as `reward/<name>`.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use skyrl_runtime::{Message, Plugin};
use tracing::warn;

use crate::config::RubricConfig;

/// A rubric with its reward plugins loaded.
#[derive(Clone)]
pub struct Rubric {
    env_weight: f64,
    components: Vec<(String, f64, Plugin)>,
}

/// What scoring one trajectory needs.
pub struct ScoreJob {
    pub prompt: Vec<Message>,
    pub response: String,
    pub extras: serde_json::Map<String, Value>,
}

impl Rubric {
    /// Binds `cfg`'s components to the reward plugins in `plugins` (by name),
    /// checking that each is a loadable reward plugin.
    pub fn new(cfg: &RubricConfig, plugins: &BTreeMap<String, Plugin>) -> Result<Self> {
        let mut components = Vec::new();
        for c in &cfg.components {
            let plugin = plugins.get(&c.name).with_context(|| {
                format!(
                    "reward_rubric component `{}` has no reward plugin (registered: {:?}); \
                     pass --reward {}=PATH",
                    c.name,
                    plugins.keys().collect::<Vec<_>>(),
                    c.name
                )
            })?;
            if !c.weight.is_finite() {
                bail!(
                    "reward_rubric component `{}` has weight {}",
                    c.name,
                    c.weight
                );
            }
            plugin
                .create_reward()
                .with_context(|| format!("reward plugin `{}` cannot score", c.name))?;
            components.push((c.name.clone(), c.weight, plugin.clone()));
        }
        if !cfg.env_weight.is_finite() {
            bail!("reward_rubric.env_weight is {}", cfg.env_weight);
        }
        Ok(Self {
            env_weight: cfg.env_weight,
            components,
        })
    }

    /// Weight of the env's own reward.
    pub fn env_weight(&self) -> f64 {
        self.env_weight
    }

    /// Scores one trajectory with every component: `(name, raw score)`.
    /// A failing component scores 0 (and is logged); its name gets an `/errors` count.
    pub fn score(&self, job: &ScoreJob) -> Vec<(String, f64, bool)> {
        let truth = job
            .extras
            .get("reward_spec")
            .and_then(|r| r.get("ground_truth"))
            .cloned()
            .unwrap_or(Value::Null);
        let extras = Value::Object(job.extras.clone());
        self.components
            .iter()
            .map(|(name, _, plugin)| {
                let scored = plugin
                    .create_reward()
                    .and_then(|mut r| r.score(&job.prompt, &job.response, &truth, &extras));
                match scored {
                    Ok(x) if x.is_finite() => (name.clone(), x, false),
                    Ok(x) => {
                        warn!(component = %name, "reward plugin returned {x}; scoring 0");
                        (name.clone(), 0.0, true)
                    }
                    Err(e) => {
                        warn!(component = %name, "reward plugin failed, scoring 0: {e}");
                        (name.clone(), 0.0, true)
                    }
                }
            })
            .collect()
    }

    /// The extra reward for `scores` (weighted sum).
    pub fn bonus(&self, scores: &[(String, f64, bool)]) -> f64 {
        self.components
            .iter()
            .zip(scores)
            .map(|((_, w, _), (_, s, _))| w * s)
            .sum()
    }
}
