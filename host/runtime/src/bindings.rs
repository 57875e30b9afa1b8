//! Host-side bindings generated from `wit/plugin.wit`.
//!
//! The environment world is generated first; the other worlds reuse its
//! `types` and `host` interfaces so one host implementation serves all.

pub mod env_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "environment-plugin",
    });
}

pub mod tool_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "tool-plugin",
        with: {
            "skyrl:plugin/types": super::env_world::skyrl::plugin::types,
            "skyrl:plugin/host": super::env_world::skyrl::plugin::host,
        },
    });
}

pub mod reward_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "reward-plugin",
        with: {
            "skyrl:plugin/types": super::env_world::skyrl::plugin::types,
            "skyrl:plugin/host": super::env_world::skyrl::plugin::host,
        },
    });
}

pub mod generator_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "generator-plugin",
        with: {
            "skyrl:plugin/types": super::env_world::skyrl::plugin::types,
            "skyrl:plugin/host": super::env_world::skyrl::plugin::host,
            "skyrl:plugin/envs.env-handle": crate::generator::EnvHandle,
        },
    });
}

pub use env_world::skyrl::plugin::{host, types};

pub mod advantage_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "advantage-plugin",
        with: {
            "skyrl:plugin/types": super::env_world::skyrl::plugin::types,
            "skyrl:plugin/host": super::env_world::skyrl::plugin::host,
        },
    });
}

pub mod policy_loss_world {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "policy-loss-plugin",
        with: {
            "skyrl:plugin/types": super::env_world::skyrl::plugin::types,
            "skyrl:plugin/host": super::env_world::skyrl::plugin::host,
        },
    });
}
