//! Functions the skyrl host provides to every plugin.
//!
//! Inside a wasm host they call the `skyrl:plugin/host` imports. In native
//! builds (unit tests) there is no host: [`log`] writes to stderr and
//! [`call_tool`] returns an error.

/// Log lines that end up in the host's `tracing` output.
///
/// The crate-root macros [`trace!`](crate::trace), [`debug!`](crate::debug),
/// [`info!`](crate::info), [`warn!`](crate::warn) and
/// [`error!`](crate::error) take `format!` arguments.
pub mod log {
    /// Log severity.
    pub use crate::bindings::skyrl::plugin::host::LogLevel as Level;

    /// Writes one log line at `level`.
    pub fn write(level: Level, message: &str) {
        #[cfg(target_arch = "wasm32")]
        crate::bindings::skyrl::plugin::host::log(level, message);
        #[cfg(not(target_arch = "wasm32"))]
        eprintln!("[plugin {level:?}] {message}");
    }

    /// Logs at trace level.
    pub fn trace(message: &str) {
        write(Level::Trace, message)
    }

    /// Logs at debug level.
    pub fn debug(message: &str) {
        write(Level::Debug, message)
    }

    /// Logs at info level.
    pub fn info(message: &str) {
        write(Level::Info, message)
    }

    /// Logs at warn level.
    pub fn warn(message: &str) {
        write(Level::Warn, message)
    }

    /// Logs at error level.
    pub fn error(message: &str) {
        write(Level::Error, message)
    }
}

/// Calls the tool `name` (provided by a tool plugin loaded in the host) with
/// a JSON arguments object; returns the tool's output or its error text.
///
/// The calling plugin should list `name` in `uses_tools` of its export macro.
pub fn call_tool(name: &str, args_json: &str) -> Result<String, String> {
    #[cfg(target_arch = "wasm32")]
    {
        crate::bindings::skyrl::plugin::host::call_tool(name, args_json)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = args_json;
        Err(format!(
            "cannot call tool `{name}`: not running inside a skyrl wasm host"
        ))
    }
}

/// Like [`call_tool`], but the call must finish within `timeout` (the tool's
/// own sandbox deadline still applies when it is shorter). A call past the
/// deadline returns an error naming the timeout.
pub fn call_tool_with_timeout(
    name: &str,
    args_json: &str,
    timeout: std::time::Duration,
) -> Result<String, String> {
    let ms = u32::try_from(timeout.as_millis())
        .unwrap_or(u32::MAX)
        .max(1);
    #[cfg(target_arch = "wasm32")]
    {
        crate::bindings::skyrl::plugin::host::call_tool_timeout(name, args_json, ms)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (args_json, ms);
        Err(format!(
            "cannot call tool `{name}`: not running inside a skyrl wasm host"
        ))
    }
}
