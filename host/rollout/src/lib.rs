//! skyrl-rollout: turns prompts into trajectories.
//!
//! It owns the rollout generator ([`Generator`]): skyrl-gym's multi-turn loop
//! over sandboxed env plugins ([`agent_loop`]), generator plugins that replace
//! it ([`custom_generator`]), reward rubrics that compose plugin scores with
//! the env reward ([`rubric`]), step-wise expansion of multi-turn
//! trajectories ([`step_wise`]), skyrl-train's re-tokenizing path for custom
//! rollout chat templates, and the per-plugin sandbox settings from the
//! config ([`sandbox`]). Its input is a list of [`GeneratorRequest`]s, its
//! output a [`GeneratorOutput`] (skyrl's, in input order); the `generator` and
//! `environment` config sections ([`config`]) are defined here.
//!
//! It samples through `skyrl-inference`'s rollout engine and runs plugins
//! through `skyrl-runtime`. It knows nothing about optimizers, losses,
//! checkpoints or ranks: the trainer decides what to generate and what to do
//! with the result.

pub mod agent_loop;
mod blocking;
pub mod config;
pub mod custom_generator;
pub mod generator;
pub mod output;
pub mod plugin_set;
mod retokenize;
pub mod rubric;
pub mod sandbox;
pub mod step_wise;

pub use generator::Generator;
pub use output::{GeneratorOutput, GeneratorRequest, RolloutJob, RolloutParams, ENV_ERROR};
pub use plugin_set::PluginSet;
