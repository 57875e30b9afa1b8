//! # skyrl-sdk: write skyrl plugins in Rust
//!
//! skyrl runs environments, tools and reward functions as sandboxed
//! WebAssembly components implementing the `skyrl:plugin@0.1.2` WIT package
//! (`wit/plugin.wit`). This crate hides the generated bindings behind three
//! small traits and one export macro per plugin kind:
//!
//! | kind        | trait           | export macro         | WIT world            |
//! |-------------|-----------------|----------------------|----------------------|
//! | environment | [`Environment`] | [`export_env!`]      | `environment-plugin` |
//! | tool        | [`Tool`]        | [`export_tool!`]     | `tool-plugin`        |
//! | reward      | [`Reward`]      | [`export_reward!`]   | `reward-plugin`      |
//! | generator   | [`Generator`]   | [`export_generator!`] | `generator-plugin`  |
//! | advantage estimator | [`AdvantageEstimator`] | [`export_algorithm!`] | `advantage-plugin` |
//! | policy loss | [`PolicyLoss`]  | [`export_algorithm!`] | `policy-loss-plugin` (both: `algorithm-plugin`) |
//!
//! ```ignore
//! use skyrl_sdk::{Environment, Extras, Result, StepOutput};
//!
//! struct Echo { target: String }
//!
//! impl Environment for Echo {
//!     fn create(_config: &serde_json::Value, extras: &Extras) -> Result<Self> {
//!         Ok(Echo { target: extras.ground_truth_str()? })
//!     }
//!     fn step(&mut self, action: &str) -> Result<StepOutput> {
//!         Ok(StepOutput::done(if action.trim() == self.target { 1.0 } else { 0.0 }))
//!     }
//! }
//!
//! skyrl_sdk::export_env!(Echo, name = "echo", version = "0.1.0", description = "Repeat the answer.");
//! ```
//!
//! Build a plugin with `cargo build --release --target wasm32-wasip2`; the
//! result in `target/wasm32-wasip2/release/<crate>.wasm` is a component the
//! skyrl host loads directly. Plugin crates use `crate-type = ["cdylib",
//! "rlib"]` so their logic can also be unit-tested natively (`cargo test`);
//! outside a wasm host [`log`] prints to stderr and [`call_tool`] returns an
//! error.

extern crate self as skyrl_sdk;

mod algorithm;
pub mod bindings;
#[cfg(feature = "code")]
pub mod code;
mod env;
mod error;
mod extras;
pub mod generator;
#[cfg(feature = "gsm8k")]
pub mod gsm8k;
mod host;
#[cfg(feature = "http")]
pub mod http;
mod info;
mod macros;
mod message;
pub mod pystr;
mod reward;
mod tool;

pub use algorithm::{
    advantage_with, info_of, loss_with, AdvantageEstimator, AdvantageInput, AdvantageOutput,
    AlgorithmInfo, LossInput, LossOutput, Matrix, PolicyLoss,
};
pub use env::{EnvResource, Environment, StepOutput};
pub use error::{Error, Result};
pub use extras::{parse_config, Extras};
pub use generator::{generate_with, Env, EnvStep, Generator, Prompt, Sampling, Trajectory};
pub use host::{call_tool, call_tool_with_timeout, log};
pub use info::{PluginInfo, PluginKind};
pub use message::Message;
pub use reward::{score_with, Reward};
pub use serde_json;
pub use tool::{call_with, specs_of, Tool, ToolSpec};

/// Support code used by the export macros; not part of the public API.
#[doc(hidden)]
pub mod __rt {
    pub use wit_bindgen;

    macro_rules! world_type {
        ($len:ident, $bytes:ident, $file:literal) => {
            pub const $len: usize = include_bytes!(concat!(env!("OUT_DIR"), "/", $file)).len();
            pub const $bytes: [u8; $len] = *include_bytes!(concat!(env!("OUT_DIR"), "/", $file));
        };
    }
    world_type!(
        ENV_WORLD_LEN,
        ENV_WORLD,
        "environment-plugin.component-type"
    );
    world_type!(TOOL_WORLD_LEN, TOOL_WORLD, "tool-plugin.component-type");
    world_type!(
        REWARD_WORLD_LEN,
        REWARD_WORLD,
        "reward-plugin.component-type"
    );
    world_type!(
        GENERATOR_WORLD_LEN,
        GENERATOR_WORLD,
        "generator-plugin.component-type"
    );
    world_type!(
        ADVANTAGE_WORLD_LEN,
        ADVANTAGE_WORLD,
        "advantage-plugin.component-type"
    );
    world_type!(
        POLICY_LOSS_WORLD_LEN,
        POLICY_LOSS_WORLD,
        "policy-loss-plugin.component-type"
    );
    world_type!(
        ALGORITHM_WORLD_LEN,
        ALGORITHM_WORLD,
        "algorithm-plugin.component-type"
    );
}
