//! Share skyrl plugins through OCI registries.
//!
//! Plugins travel as CNCF Wasm OCI artifacts (config
//! `application/vnd.wasm.config.v0+json` listing the component's imports and
//! exports, one `application/wasm` layer). References look like
//! `oci://host[:port]/ns/name:1.2.0`, `...:^1.2` (newest compatible version)
//! or `...@sha256:<hex>` (pinned). Pulls land in a content-addressed
//! [`PluginStore`] after digest verification; a [`LockFile`] pins resolved
//! references to digests for reproducible runs.

mod auth;
mod client;
mod error;
pub mod local_registry;
mod lock;
mod reference;
mod select;
mod store;

pub use auth::registry_auth;
pub use client::{ClientOptions, PulledPlugin, PushReport, RegistryClient, TagInfo};
pub use error::{RegistryError, Result};
pub use lock::{LockFile, LockedPlugin, PluginResolver};
pub use reference::{is_oci_tag, tag_version, PluginRef, Selector, OCI_SCHEME};
pub use select::{newest_matching, newest_stable, versions_newest_first};
pub use store::{sha256_digest, PluginStore};

/// Manifest annotation keys skyrl writes on push.
pub mod annotations {
    /// Plugin kind (environment, tool, reward, generator).
    pub const KIND: &str = "dev.skyrl.plugin.kind";
    /// WIT worlds the component implements, comma-separated.
    pub const WORLDS: &str = "dev.skyrl.plugin.worlds";
    /// Standard OCI title (the plugin's name).
    pub const TITLE: &str = "org.opencontainers.image.title";
    /// Standard OCI version (the pushed tag).
    pub const VERSION: &str = "org.opencontainers.image.version";
    /// Standard OCI description.
    pub const DESCRIPTION: &str = "org.opencontainers.image.description";
    /// Standard OCI creation time (RFC 3339).
    pub const CREATED: &str = "org.opencontainers.image.created";
}
