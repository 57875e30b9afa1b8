"""Plain-Python data types shared by every plugin kind."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


class ConfigError(Exception):
    """The env config or the dataset row's extras are unusable."""


class InputError(Exception):
    """The call's input (an action, tool arguments) is unusable."""


class PluginFailure(Exception):
    """Anything else that went wrong inside the plugin."""


@dataclass
class Message:
    """One OpenAI-style chat message."""

    role: str
    content: str

    @staticmethod
    def user(content: str) -> "Message":
        return Message("user", content)

    @staticmethod
    def assistant(content: str) -> "Message":
        return Message("assistant", content)

    @staticmethod
    def system(content: str) -> "Message":
        return Message("system", content)


@dataclass
class StepOutput:
    """The result of one `Environment.step`."""

    observations: list[Message] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def final(reward: float, metadata: dict[str, Any] | None = None) -> "StepOutput":
        """A final step: done, no observations."""
        return StepOutput([], float(reward), True, metadata or {})

    @staticmethod
    def next(observations: list[Message], reward: float = 0.0) -> "StepOutput":
        """A non-final step that shows `observations` to the model."""
        return StepOutput(list(observations), float(reward), False, {})


@dataclass
class ToolSpec:
    """One tool's name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


class Extras(dict):
    """The dataset row's extras: every column except `prompt` and `env_class`."""

    @staticmethod
    def from_json(text: str) -> "Extras":
        value = json.loads(text) if text.strip() else {}
        if not isinstance(value, dict):
            raise ConfigError(f"extras must be a JSON object, got {text[:80]}")
        return Extras(value)

    @property
    def reward_spec(self) -> dict[str, Any]:
        spec = self.get("reward_spec") or {}
        return spec if isinstance(spec, dict) else {}

    @property
    def extra_info(self) -> dict[str, Any]:
        info = self.get("extra_info") or {}
        return info if isinstance(info, dict) else {}

    def ground_truth(self) -> Any:
        """`reward_spec.ground_truth`, or None."""
        return self.reward_spec.get("ground_truth")

    def ground_truth_str(self) -> str:
        """`reward_spec.ground_truth` as text (numbers in their JSON spelling)."""
        value = self.ground_truth()
        if value is None:
            raise ConfigError("extras.reward_spec.ground_truth is required")
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return json.dumps(value)
        if isinstance(value, str):
            return value
        raise ConfigError(
            f"extras.reward_spec.ground_truth must be a string or number, got {json.dumps(value)}"
        )

    def max_turns(self, default: int) -> int:
        """`max_turns` (set by the generator), else `extra_info.max_turns`, else `default`."""
        value = self.get("max_turns", self.extra_info.get("max_turns"))
        if value is None:
            return default
        try:
            turns = int(value)
        except (TypeError, ValueError):
            turns = 0
        if turns < 1:
            raise ConfigError(f"max_turns must be a positive integer, got {value!r}")
        return turns


@dataclass
class Matrix:
    """A `rows x cols` matrix of floats, row-major: one row per sequence, one
    column per response token (algorithm plugins)."""

    rows: int
    cols: int
    data: list[float]

    @staticmethod
    def zeros(rows: int, cols: int) -> "Matrix":
        return Matrix(rows, cols, [0.0] * (rows * cols))

    @staticmethod
    def from_rows(rows: list[list[float]]) -> "Matrix":
        cols = len(rows[0]) if rows else 0
        if any(len(r) != cols for r in rows):
            raise InputError("rows of different lengths")
        return Matrix(len(rows), cols, [float(v) for r in rows for v in r])

    def row(self, r: int) -> list[float]:
        return self.data[r * self.cols : (r + 1) * self.cols]

    def to_rows(self) -> list[list[float]]:
        return [self.row(r) for r in range(self.rows)]

    def at(self, r: int, c: int) -> float:
        return self.data[r * self.cols + c]


@dataclass
class AdvantageInput:
    """What an advantage estimator reads: per-token rewards (an outcome reward
    on the last response token), the response mask, one group id per row,
    critic values when a critic is trained, and `trainer.algorithm` as a dict
    (this plugin's `plugin_options` under `options`)."""

    token_rewards: Matrix
    response_mask: Matrix
    group_ids: list[str]
    values: Matrix | None
    config: dict[str, Any]


@dataclass
class AdvantageOutput:
    advantages: Matrix
    returns: Matrix


@dataclass
class LossInput:
    """One micro-batch for a policy loss. The advantages are already scaled by
    the loss reduction: the loss is the masked sum over tokens."""

    log_probs: Matrix
    old_log_probs: Matrix
    rollout_log_probs: Matrix | None
    advantages: Matrix
    loss_mask: Matrix
    config: dict[str, Any]


@dataclass
class LossOutput:
    """The loss, `d loss / d log_probs` (shape of `log_probs`) and metrics."""

    loss: float
    grad: Matrix
    metrics: dict[str, float] = field(default_factory=dict)
