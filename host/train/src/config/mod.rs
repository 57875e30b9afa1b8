//! Configuration: typed tree ([`types`]), YAML + dotted-override loading
//! ([`load`]) and validation ([`validate`]).

pub mod legacy;
pub mod load;
pub mod strategy;
pub mod types;
pub mod validate;

pub use load::{
    load_config, load_config_str, parse_tree, read_config_file, ConfigError, ConfigTree,
};
pub use strategy::Strategy;
pub use types::*;
