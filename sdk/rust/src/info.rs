//! Plugin self-description.

/// What a plugin reports from `plugin.info` (name, version, kind,
/// description, tools it calls). Filled in by the export macros.
pub use crate::bindings::skyrl::plugin::types::PluginInfo;
/// The kind of a plugin component.
pub use crate::bindings::skyrl::plugin::types::PluginKind;

impl PluginInfo {
    /// Builds the info record the export macros return from `plugin.info`.
    pub fn new(
        kind: PluginKind,
        name: &str,
        version: &str,
        description: &str,
        uses_tools: &[&str],
    ) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            kind,
            description: description.to_owned(),
            uses_tools: uses_tools.iter().map(|t| (*t).to_owned()).collect(),
        }
    }
}
