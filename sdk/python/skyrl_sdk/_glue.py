"""Shared glue between the WIT bindings componentize-py generates
(`wit_world`) and the plugin class registered with `export_*`. The per-world
modules (`_env_world`, `_tool_world`, `_reward_world`) hold the exported
classes; `skyrl plugin build` generates the `app` (and for envs the
`environment`) module that re-exports them."""

from __future__ import annotations

import json
import traceback
from typing import Any, Callable, TypeVar

from componentize_py_types import Err  # type: ignore[import-not-found]
from wit_world import exports  # type: ignore[import-not-found]
from wit_world.imports import types as wit  # type: ignore[import-not-found]

from .plugin import registered
from .types import ConfigError, InputError, Message

T = TypeVar("T")

_KINDS = {
    "env": wit.PluginKind.ENVIRONMENT,
    "tool": wit.PluginKind.TOOL,
    "reward": wit.PluginKind.REWARD,
}


def guarded(f: Callable[[], T]) -> T:
    """Run plugin code, turning its exceptions into WIT `plugin-error`s."""
    try:
        return f()
    except Err:
        raise
    except ConfigError as e:
        raise Err(wit.PluginError_InvalidConfig(str(e))) from None
    except InputError as e:
        raise Err(wit.PluginError_InvalidInput(str(e))) from None
    except Exception:  # noqa: BLE001 - every failure goes back to the host
        raise Err(wit.PluginError_Failed(traceback.format_exc(limit=8))) from None


def json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{what} must be a JSON object")
    return value


def to_wit(messages: list[Message]) -> list[Any]:
    return [wit.Message(role=m.role, content=m.content) for m in messages]


def from_wit(messages: list[Any]) -> list[Message]:
    return [Message(m.role, m.content) for m in messages]


def metadata_json(value: Any) -> str:
    return "{}" if value is None else json.dumps(value)


class _NoPluginExport:
    """Stands in for `exports.Plugin` in the algorithm worlds (no `plugin`
    export there; they describe themselves through `algorithm.info`)."""


class Plugin(getattr(exports, "Plugin", _NoPluginExport)):  # type: ignore[misc]
    def info(self) -> Any:
        reg = registered()
        return wit.PluginInfo(
            name=reg.name,
            version=reg.version,
            kind=_KINDS[reg.kind],
            description=reg.description,
            uses_tools=list(reg.uses_tools),
        )


