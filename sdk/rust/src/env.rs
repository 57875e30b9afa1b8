//! The [`Environment`] trait and its glue to the WIT `environment` interface.

use std::cell::RefCell;

use serde_json::{Map, Value};

use crate::bindings::exports::skyrl::plugin::environment as wit;
use crate::bindings::skyrl::plugin::types::PluginError;
use crate::extras::parse_object;
use crate::{Error, Extras, Message, Result};

/// A skyrl-gym style text environment: one instance per episode.
///
/// The host calls [`create`](Environment::create), then
/// [`init`](Environment::init) once, then [`step`](Environment::step) with
/// each model response until a step returns `done`, then
/// [`metrics`](Environment::metrics) and [`close`](Environment::close).
pub trait Environment: Sized + 'static {
    /// Builds an episode from the env config (a JSON object, `{}` when none
    /// is configured) and the dataset row's extras.
    fn create(config: &Value, extras: &Extras) -> Result<Self>;

    /// Returns the (possibly rewritten) prompt and a metadata object.
    /// Default: the prompt unchanged and `{}`.
    fn init(&mut self, prompt: Vec<Message>) -> Result<(Vec<Message>, Value)> {
        Ok((prompt, Value::Object(Map::new())))
    }

    /// Consumes one model response.
    fn step(&mut self, action: &str) -> Result<StepOutput>;

    /// Episode metrics: a JSON object of numbers or bools, averaged by the
    /// host across episodes. Default: `{}`.
    fn metrics(&self) -> Value {
        Value::Object(Map::new())
    }

    /// Releases resources at the end of the episode. Default: nothing.
    fn close(&mut self) {}
}

/// The result of one [`Environment::step`].
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutput {
    /// Messages appended to the conversation (e.g. tool results, feedback).
    pub observations: Vec<Message>,
    /// Reward for this turn.
    pub reward: f64,
    /// Whether the episode is over.
    pub done: bool,
    /// Free-form JSON object.
    pub metadata: Value,
}

impl StepOutput {
    /// A final step: `done`, no observations.
    pub fn done(reward: f64) -> Self {
        Self {
            observations: Vec::new(),
            reward,
            done: true,
            metadata: Value::Object(Map::new()),
        }
    }

    /// A non-final step that shows `observations` to the model.
    pub fn next(observations: Vec<Message>, reward: f64) -> Self {
        Self {
            observations,
            reward,
            done: false,
            metadata: Value::Object(Map::new()),
        }
    }

    /// Replaces the metadata object.
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }
}

/// The WIT `env` resource wrapping an [`Environment`]. WIT resource methods
/// take `&self`, so the episode state lives in a `RefCell`.
#[doc(hidden)]
pub struct EnvResource<T: Environment> {
    state: RefCell<T>,
}

impl<T: Environment> EnvResource<T> {
    fn with_state<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R> {
        let mut state = self
            .state
            .try_borrow_mut()
            .map_err(|_| Error::failed("environment re-entered while busy"))?;
        Ok(f(&mut state))
    }
}

impl<T: Environment> wit::GuestEnv for EnvResource<T> {
    fn create(config_json: String, extras_json: String) -> Result<wit::Env, PluginError> {
        let config = Value::Object(parse_object(&config_json, "env config")?);
        let extras = Extras::from_json(&extras_json)?;
        let env = T::create(&config, &extras)?;
        Ok(wit::Env::new(EnvResource {
            state: RefCell::new(env),
        }))
    }

    fn init(&self, prompt: Vec<Message>) -> Result<wit::InitOutput, PluginError> {
        let (prompt, metadata) = self.with_state(|env| env.init(prompt))??;
        Ok(wit::InitOutput {
            prompt,
            metadata_json: metadata_json(&metadata),
        })
    }

    fn step(&self, action: String) -> Result<wit::StepOutput, PluginError> {
        let out = self.with_state(|env| env.step(&action))??;
        Ok(wit::StepOutput {
            metadata_json: metadata_json(&out.metadata),
            observations: out.observations,
            reward: out.reward,
            done: out.done,
        })
    }

    fn close(&self) {
        // A re-entrant close has nothing safe to do; ignore it.
        let _ = self.with_state(|env| env.close());
    }

    fn metrics(&self) -> String {
        match self.with_state(|env| env.metrics()) {
            Ok(metrics @ Value::Object(_)) => metrics.to_string(),
            Ok(other) => {
                crate::log::warn(&format!(
                    "metrics must be a JSON object, got {other}; reporting {{}}"
                ));
                "{}".to_owned()
            }
            Err(_) => "{}".to_owned(),
        }
    }
}

/// Metadata as JSON text; `null` becomes `{}` (the WIT contract is an object).
fn metadata_json(metadata: &Value) -> String {
    if metadata.is_null() {
        "{}".to_owned()
    } else {
        metadata.to_string()
    }
}
