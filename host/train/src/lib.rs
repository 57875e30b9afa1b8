//! skyrl-train: the training side of skyrl.
//!
//! It owns the configuration tree ([`config`], composing the `generator` and
//! `environment` sections of skyrl-rollout and the `inference_engine` section
//! of skyrl-inference), prompt datasets ([`dataset`]), the RL algorithms over
//! libtorch tensors ([`algorithms`]), the optimiser ([`optim`]), checkpoints
//! ([`checkpoint`]), the roles as workers ([`workers`]: policy, reference,
//! each distributed over the ranks by its strategy), the ranks themselves
//! ([`dist`], on skyrl-distributed's c10d process group) and the trainer
//! loop that sequences them ([`trainer`]), reporting to experiment
//! trackers ([`tracking`]). Supervised fine-tuning ([`sft`]) reuses the
//! same pieces.
//!
//! Rollouts come from skyrl-rollout, engines and weight sync from
//! skyrl-inference; this crate never serves HTTP and never parses a command
//! line.

pub mod algorithms;
pub mod batch;
pub mod checkpoint;
pub mod config;
pub mod dataset;
pub mod dist;
pub mod metrics;
pub mod model_setup;
pub mod optim;
pub mod sft;
pub mod tracking;
pub mod trainer;
pub mod workers;
