//! The [`Tool`] trait and its glue to the WIT `tool` interface.

use serde_json::Value;

use crate::bindings::exports::skyrl::plugin::tool as wit;
use crate::bindings::skyrl::plugin::types::PluginError;
use crate::{Error, Result};

/// A set of named tools that environments call through the host
/// ([`call_tool`](crate::call_tool)). Tools are stateless functions.
pub trait Tool: 'static {
    /// The tools this plugin provides.
    fn specs() -> Vec<ToolSpec>;

    /// Runs tool `name` with its parsed JSON arguments; returns the output
    /// text. Unknown names and bad arguments should be
    /// [`Error::InvalidInput`].
    fn call(name: &str, args: &Value) -> Result<String>;
}

/// Description of one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Unique tool name.
    pub name: String,
    /// What the tool does (shown to models / users).
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
}

impl ToolSpec {
    /// A tool spec.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

/// Glue for `tool.specs`, used by [`export_tool!`](crate::export_tool).
pub fn specs_of<T: Tool>() -> Vec<wit::ToolSpec> {
    T::specs()
        .into_iter()
        .map(|s| wit::ToolSpec {
            name: s.name,
            description: s.description,
            parameters_json: s.parameters.to_string(),
        })
        .collect()
}

/// Glue for `tool.call`: parses the arguments, rejects unknown tool names,
/// then runs [`Tool::call`]. Used by [`export_tool!`](crate::export_tool).
pub fn call_with<T: Tool>(name: &str, args_json: &str) -> Result<String, PluginError> {
    if !T::specs().iter().any(|s| s.name == name) {
        return Err(Error::input(format!("unknown tool `{name}`")).into());
    }
    let args: Value = serde_json::from_str(args_json)
        .map_err(|e| Error::input(format!("arguments of `{name}` are not valid JSON: {e}")))?;
    Ok(T::call(name, &args)?)
}
