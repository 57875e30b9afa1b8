//! Encodes the component type of each plugin world (`environment-plugin`,
//! `tool-plugin`, `reward-plugin`, `generator-plugin` and the algorithm
//! worlds) into `OUT_DIR`.
//!
//! The export macros embed the matching encoding as a `component-type:*`
//! custom section in the plugin's core module, which is how
//! `wasm-component-ld` learns which world the plugin implements.

use std::path::PathBuf;

use wit_component::StringEncoding;
use wit_parser::Resolve;

/// WIT package directory, relative to this crate.
const WIT_DIR: &str = "../../wit";
const WORLDS: [&str; 7] = [
    "environment-plugin",
    "tool-plugin",
    "reward-plugin",
    "generator-plugin",
    "advantage-plugin",
    "policy-loss-plugin",
    "algorithm-plugin",
];

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let wit_dir = manifest_dir.join(WIT_DIR);
    println!("cargo:rerun-if-changed={}", wit_dir.display());

    let mut resolve = Resolve::default();
    let (package, _) = resolve
        .push_path(&wit_dir)
        .unwrap_or_else(|e| panic!("failed to parse WIT in {}: {e:?}", wit_dir.display()));
    for world in WORLDS {
        let world_id = resolve
            .select_world(&[package], Some(world))
            .unwrap_or_else(|e| panic!("world `{world}` missing from WIT: {e:?}"));
        let encoded =
            wit_component::metadata::encode(&resolve, world_id, StringEncoding::UTF8, None)
                .unwrap_or_else(|e| panic!("failed to encode world `{world}`: {e:?}"));
        let path = out_dir.join(format!("{world}.component-type"));
        std::fs::write(&path, encoded)
            .unwrap_or_else(|e| panic!("failed to write {}: {e}", path.display()));
    }
}
