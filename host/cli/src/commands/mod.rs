//! One module per `skyrl` subcommand.

pub mod build;
pub mod data;
pub mod env;
pub mod model;
pub mod plugin;
pub mod retrieval_serve;
pub mod serve;
pub mod sft;
pub mod tinker_serve;
pub mod train;
