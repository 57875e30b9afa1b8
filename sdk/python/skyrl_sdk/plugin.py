"""Base classes for plugin authors and the `export_*` registrations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .types import (
    AdvantageInput,
    AdvantageOutput,
    Extras,
    LossInput,
    LossOutput,
    Message,
    StepOutput,
    ToolSpec,
)


class Environment:
    """A skyrl-gym style environment: one instance per episode.

    The host calls `__init__(config, extras)`, then `init(prompt)` once, then
    `step(action)` until a step returns `done`, then `metrics()` and `close()`.
    """

    def __init__(self, config: dict[str, Any], extras: Extras) -> None:
        self.config = config
        self.extras = extras

    def init(self, prompt: list[Message]) -> tuple[list[Message], dict[str, Any]]:
        """The (possibly rewritten) prompt and a metadata object."""
        return prompt, {}

    def step(self, action: str) -> StepOutput:
        raise NotImplementedError

    def metrics(self) -> dict[str, Any]:
        """Episode metrics: numbers or bools, averaged by the host."""
        return {}

    def close(self) -> None:
        """Release resources at the end of the episode."""


class Tool:
    """A set of named tools; one instance serves one call."""

    def specs(self) -> list[ToolSpec]:
        raise NotImplementedError

    def call(self, name: str, args: dict[str, Any]) -> Any:
        """Return text, or any JSON value (sent as JSON text)."""
        raise NotImplementedError


class Reward:
    """A reward function."""

    def score(
        self,
        prompt: list[Message],
        response: str,
        ground_truth: Any,
        extras: Extras,
    ) -> float:
        raise NotImplementedError


class Algorithm:
    """An advantage estimator and/or a policy loss (skyrl's
    `@register_advantage_estimator` / `@register_policy_loss`), selected with
    `advantage_estimator=plugin:NAME` / `policy_loss_type=plugin:NAME`.
    Override what the plugin's manifest kind exports (`advantage`,
    `policy-loss`, or both for `algorithm`). One instance serves many calls.
    """

    def advantages(self, inp: AdvantageInput) -> AdvantageOutput:
        raise NotImplementedError("this plugin has no advantage estimator")

    def policy_loss(self, inp: LossInput) -> LossOutput:
        """The masked-sum loss and its gradient per token (no autograd needed:
        the host back-propagates `sum(stopgrad(grad) * logp)`)."""
        raise NotImplementedError("this plugin has no policy loss")


@dataclass
class Registration:
    """What `export_*` recorded: the plugin class and its self-description."""

    kind: str
    cls: type
    name: str
    version: str
    description: str
    uses_tools: list[str] = field(default_factory=list)


_registered: Registration | None = None


def _register(kind: str, cls: type, base: type, **info: Any) -> type:
    global _registered
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise TypeError(f"export_{kind} expects a subclass of skyrl_sdk.{base.__name__}")
    if _registered is not None and _registered.cls is not cls:
        raise RuntimeError(
            f"one plugin per component: {_registered.cls.__name__} is already exported"
        )
    _registered = Registration(kind=kind, cls=cls, **info)
    return cls


def export_env(cls, *, name: str, version: str, description: str, uses_tools=()):
    """Export `cls` (an `Environment` subclass) as this component's env."""
    return _register(
        "env", cls, Environment, name=name, version=version,
        description=description, uses_tools=list(uses_tools),
    )


def export_tool(cls, *, name: str, version: str, description: str, uses_tools=()):
    """Export `cls` (a `Tool` subclass) as this component's tool set."""
    return _register(
        "tool", cls, Tool, name=name, version=version,
        description=description, uses_tools=list(uses_tools),
    )


def export_reward(cls, *, name: str, version: str, description: str, uses_tools=()):
    """Export `cls` (a `Reward` subclass) as this component's reward."""
    return _register(
        "reward", cls, Reward, name=name, version=version,
        description=description, uses_tools=list(uses_tools),
    )


def export_algorithm(cls, *, name: str, version: str, description: str):
    """Export `cls` (an `Algorithm` subclass) as this component's algorithm."""
    return _register(
        "algorithm", cls, Algorithm, name=name, version=version, description=description,
    )


def registered() -> Registration:
    """The plugin `export_*` registered (the build fails without one)."""
    if _registered is None:
        raise RuntimeError("the plugin module exported nothing: call skyrl_sdk.export_env/tool/reward/algorithm")
    return _registered
