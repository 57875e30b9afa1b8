"""Runs an unmodified skyrl-gym environment (a ``BaseTextEnv`` subclass) as
this component's environment.

``skyrl plugin build`` calls :func:`export_gym_env` for a folder whose entry
module defines a ``BaseTextEnv`` subclass and exports nothing itself. The env
is built as skyrl-gym builds it, ``cls(env_config, extras)``: ``env_config``
is the plugin's config (``environment.skyrl_gym.<env_class>``) with attribute
access, as the OmegaConf ``DictConfig`` SkyRL passes; ``extras`` is the
dataset row's extras as a dict. Observations, reward, done, metadata and
``get_metrics`` pass through unchanged.
"""

from __future__ import annotations

from typing import Any

from .plugin import Environment, export_env
from .types import ConfigError, Extras, Message, StepOutput


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
