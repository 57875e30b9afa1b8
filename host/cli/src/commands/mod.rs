//! One module per `skyrl` subcommand.

pub mod env;
pub mod plugin;
