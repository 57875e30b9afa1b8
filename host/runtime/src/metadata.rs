//! What a plugin says about itself, and which worlds it implements.

use serde::Serialize;
use wasmtime::component::Component;
use wasmtime::Engine;

/// The interface package every world belongs to.
pub(crate) const PACKAGE: &str = "skyrl:plugin";
/// The interface version line this host implements.
pub(crate) const VERSION_LINE: &str = "0.1";

/// Kind of plugin, as declared by the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    Environment,
    Tool,
    Reward,
    Generator,
    /// An advantage estimator and/or a policy loss (`algorithm.info`).
    Algorithm,
}

/// A WIT world a component implements (detected from its exports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum World {
    EnvironmentPlugin,
    ToolPlugin,
    RewardPlugin,
    GeneratorPlugin,
    AdvantagePlugin,
    PolicyLossPlugin,
}

impl World {
    /// The world's WIT name.
    pub fn name(self) -> &'static str {
        match self {
            Self::EnvironmentPlugin => "environment-plugin",
            Self::ToolPlugin => "tool-plugin",
            Self::RewardPlugin => "reward-plugin",
            Self::GeneratorPlugin => "generator-plugin",
            Self::AdvantagePlugin => "advantage-plugin",
            Self::PolicyLossPlugin => "policy-loss-plugin",
        }
    }

    fn interface(self) -> &'static str {
        match self {
            Self::EnvironmentPlugin => "environment",
            Self::ToolPlugin => "tool",
            Self::RewardPlugin => "reward",
            Self::GeneratorPlugin => "generator",
            Self::AdvantagePlugin => "advantage",
            Self::PolicyLossPlugin => "policy-loss",
        }
    }

    const ALL: [World; 6] = [
        Self::EnvironmentPlugin,
        Self::ToolPlugin,
        Self::RewardPlugin,
        Self::GeneratorPlugin,
        Self::AdvantagePlugin,
        Self::PolicyLossPlugin,
    ];
}

/// The plugin's own description (its `plugin.info` export).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginInfo {
    pub name: String,
    pub version: String,
    pub kind: PluginKind,
    pub description: String,
    pub uses_tools: Vec<String>,
}

/// Everything `skyrl plugin inspect` shows.
#[derive(Debug, Clone, Serialize)]
pub struct PluginMetadata {
    pub info: PluginInfo,
    pub worlds: Vec<World>,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// sha256 of the component bytes.
    pub digest: String,
    pub size_bytes: usize,
}

/// Import and export names of a component.
pub(crate) fn interface_names(
    component: &Component,
    engine: &Engine,
) -> (Vec<String>, Vec<String>) {
    let ty = component.component_type();
    let imports = ty
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    let exports = ty
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    (imports, exports)
}

/// The export name of `interface` in our package that this host can use:
/// any `skyrl:plugin/<interface>@0.1.x` (semver-compatible).
pub(crate) fn compatible_export<'a>(exports: &'a [String], interface: &str) -> Option<&'a str> {
    let prefix = format!("{PACKAGE}/{interface}@");
    exports
        .iter()
        .map(String::as_str)
        .find(|name| name.strip_prefix(&prefix).is_some_and(is_compatible))
}

fn is_compatible(version: &str) -> bool {
    version == VERSION_LINE || version.starts_with(&format!("{VERSION_LINE}."))
}

/// Worlds whose characteristic interface the component exports.
pub(crate) fn detect_worlds(exports: &[String]) -> Vec<World> {
    World::ALL
        .into_iter()
        .filter(|world| compatible_export(exports, world.interface()).is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_same_version_line() {
        let exports = vec![
            "skyrl:plugin/environment@0.1.3".to_string(),
            "skyrl:plugin/tool@0.2.0".to_string(),
            "wasi:cli/run@0.2.0".to_string(),
        ];
        assert_eq!(
            compatible_export(&exports, "environment"),
            Some("skyrl:plugin/environment@0.1.3")
        );
        assert_eq!(compatible_export(&exports, "tool"), None);
        assert_eq!(detect_worlds(&exports), vec![World::EnvironmentPlugin]);
        assert!(!is_compatible("0.10.0"));
    }
}
