"""Runs unmodified skyrl-gym code as this component: an environment (a
``BaseTextEnv`` subclass) or a tool plugin (a ``ToolGroup`` subclass, one
tool per ``@tool`` method).

``skyrl plugin build`` calls :func:`export_gym_env` / :func:`export_gym_tools`
for a folder whose entry module defines such a class and exports nothing
itself. The env
is built as skyrl-gym builds it, ``cls(env_config, extras)``: ``env_config``
is the plugin's config (``environment.skyrl_gym.<env_class>``) with attribute
access, as the OmegaConf ``DictConfig`` SkyRL passes; ``extras`` is the
dataset row's extras as a dict. Observations, reward, done, metadata and
``get_metrics`` pass through unchanged.
"""

from __future__ import annotations

import inspect
from typing import Any

from .plugin import Environment, Tool, export_env, export_tool
from .types import ConfigError, Extras, InputError, Message, StepOutput, ToolSpec


class AttrDict(dict):
    """A dict whose keys also read as attributes (``config.search_url``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _attrs(value: Any) -> Any:
    if isinstance(value, dict):
        return AttrDict({k: _attrs(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_attrs(v) for v in value]
    return value


def _messages(conversation: Any, what: str) -> list[Message]:
    out = []
    for message in conversation or []:
        if not (isinstance(message, dict) and "role" in message and "content" in message):
            raise TypeError(f"{what} must be a list of {{'role', 'content'}} dicts, got {message!r}")
        out.append(Message(str(message["role"]), str(message["content"])))
    return out


def _dicts(messages: list[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def export_gym_env(gym_cls: type, *, name: str, version: str, description: str) -> type:
    """Exports the skyrl-gym env class ``gym_cls`` as this component's env."""

    class GymEnv(Environment):
        def __init__(self, config: dict[str, Any], extras: Extras) -> None:
            super().__init__(config, extras)
            try:
                self.env = gym_cls(_attrs(config), dict(extras))
            except (AssertionError, KeyError) as e:
                # skyrl-gym envs check their extras with assert / indexing.
                raise ConfigError(f"{gym_cls.__name__}: {type(e).__name__}: {e}") from e

        def init(self, prompt: list[Message]) -> tuple[list[Message], dict[str, Any]]:
            conversation, metadata = self.env.init(_dicts(prompt))
            return _messages(conversation, "init's prompt"), dict(metadata or {})

        def step(self, action: str) -> StepOutput:
            out = self.env.step(action)
            if not isinstance(out, dict):
                raise TypeError(f"{gym_cls.__name__}.step must return a BaseTextEnvStepOutput dict")
            rewritten = out.get("postprocessed_action")
            if rewritten is not None and rewritten != action:
                raise NotImplementedError(
                    "postprocessed_action is not supported: skyrl keeps the model's action as generated"
                )
            return StepOutput(
                observations=_messages(out.get("observations"), "observations"),
                reward=float(out.get("reward", 0.0)),
                done=bool(out.get("done", False)),
                metadata=dict(out.get("metadata") or {}),
            )

        def metrics(self) -> dict[str, Any]:
            return dict(self.env.get_metrics() or {})

        def close(self) -> None:
            self.env.close()

    GymEnv.__name__ = GymEnv.__qualname__ = f"Gym{gym_cls.__name__}"
    return export_env(GymEnv, name=name, version=version, description=description)


def _schema(func: Any) -> dict[str, Any]:
    """A JSON schema of ``func``'s parameters (after ``self``): each one a
    property, those without a default required."""
    properties: dict[str, Any] = {}
    required = []
    params = list(inspect.signature(func).parameters.values())[1:]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        properties[p.name] = {}
        if p.default is p.empty:
            required.append(p.name)
    return {"type": "object", "properties": properties, "required": required}


def export_gym_tools(group_cls: type, *, name: str, version: str, description: str) -> type:
    """Exports the skyrl-gym ``ToolGroup`` subclass ``group_cls`` as this
    component's tools: ``group_cls()`` per call, each ``@tool`` method a
    tool called with the JSON arguments as keywords."""
    from skyrl_gym.tools.core import tool as gym_tool

    def tool_funcs() -> dict[str, Any]:
        found = {}
        for attr in dir(group_cls):
            raw = getattr(group_cls, attr, None)
            if isinstance(raw, gym_tool):
                found[raw.name] = raw.func
        return found

    class GymTools(Tool):
        def specs(self) -> list[ToolSpec]:
            return [
                ToolSpec(name=n, description=inspect.getdoc(f) or n, parameters=_schema(f))
                for n, f in sorted(tool_funcs().items())
            ]

        def call(self, tool_name: str, args: dict[str, Any]) -> Any:
            if tool_name not in tool_funcs():
                raise InputError(f"{group_cls.__name__} has no tool {tool_name!r}")
            try:
                inspect.signature(tool_funcs()[tool_name]).bind(None, **args)
            except TypeError as e:
                raise InputError(f"{tool_name}: {e}") from None
            return group_cls().execute_tool(tool_name, **args)

    GymTools.__name__ = GymTools.__qualname__ = f"Gym{group_cls.__name__}"
    return export_tool(GymTools, name=name, version=version, description=description)
