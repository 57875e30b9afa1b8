//! Core WebAssembly module (WASI preview 1, as C and Go toolchains emit) to
//! component: embed the world's WIT, then adapt preview 1 imports to
//! preview 2 with wasmtime's reactor adapter.

use anyhow::Context;
use wit_component::{ComponentEncoder, StringEncoding};
use wit_parser::Resolve;

use super::WIT;

/// The component for `core` implementing `world` of the embedded WIT package.
pub fn componentize(core: &[u8], world: &str) -> anyhow::Result<Vec<u8>> {
    let mut module = core.to_vec();
    let mut resolve = Resolve::default();
    let package = resolve
        .push_str("plugin.wit", WIT)
        .context("parsing the embedded WIT package")?;
    let world_id = resolve
        .select_world(&[package], Some(world))
        .with_context(|| format!("world {world} not in the WIT package"))?;
    wit_component::embed_component_metadata(&mut module, &resolve, world_id, StringEncoding::UTF8)
        .context("embedding the world's WIT into the module")?;
    ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .context("the module does not match the world")?
        .adapter(
            "wasi_snapshot_preview1",
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .context("loading the WASI preview 1 adapter")?
        .encode()
        .context("encoding the component")
}
