//! skyrl-train: the training side of skyrl — RL algorithms over libtorch
//! tensors, the configuration tree, prompt datasets, an AdamW optimiser whose
//! state can be saved, and atomic checkpoints.

pub mod algorithms;
pub mod checkpoint;
pub mod config;
pub mod custom_generator;
pub mod dataset;
pub mod generator;
pub mod inference;
pub mod metrics;
pub mod model_setup;
pub mod optim;
pub mod rubric;
pub mod sandbox;
pub mod step_wise;
pub mod trainer;
