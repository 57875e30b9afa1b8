"""Host imports: logging and tool calls. Outside a wasm host, `log` prints to
stderr and tool calls raise `PluginFailure`."""

from __future__ import annotations

import json
import sys
from typing import Any

from .types import PluginFailure

_LEVELS = ("trace", "debug", "info", "warn", "error")


def _host():
    try:
        from wit_world.imports import host  # type: ignore[import-not-found]
    except ImportError:
        return None
    return host


def log(level: str, message: str) -> None:
    """Write a line into the host's `tracing` output (`trace` .. `error`)."""
    if level not in _LEVELS:
        raise ValueError(f"log level must be one of {_LEVELS}")
    host = _host()
    if host is None:
        print(f"[{level}] {message}", file=sys.stderr)
        return
    host.log(host.LogLevel[level.upper()], message)


def _args_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def call_tool(name: str, args: Any) -> str:
    """Call a tool another plugin provides; `args` is a dict or JSON text.
    Raises `PluginFailure` with the host's message when the call fails."""
    host = _host()
    if host is None:
        raise PluginFailure(f"cannot call tool `{name}`: not running inside a skyrl wasm host")
    from componentize_py_types import Err  # type: ignore[import-not-found]

    try:
        return host.call_tool(name, _args_text(args))
    except Err as err:
        raise PluginFailure(str(err.value)) from None


def call_tool_with_timeout(name: str, args: Any, timeout_s: float) -> str:
    """`call_tool` that must finish within `timeout_s` seconds."""
    host = _host()
    if host is None:
        raise PluginFailure(f"cannot call tool `{name}`: not running inside a skyrl wasm host")
    from componentize_py_types import Err  # type: ignore[import-not-found]

    ms = max(1, min(int(timeout_s * 1000), 2**32 - 1))
    try:
        return host.call_tool_timeout(name, _args_text(args), ms)
    except Err as err:
        raise PluginFailure(str(err.value)) from None
