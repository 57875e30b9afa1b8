"""Exports of the `environment-plugin` world."""

from __future__ import annotations

import json
from typing import Any

from wit_world import exports  # type: ignore[import-not-found]
from wit_world.exports import environment  # type: ignore[import-not-found]

from ._glue import Plugin, from_wit, guarded, json_object, metadata_json, to_wit
from .plugin import registered
from .types import Extras, StepOutput

__all__ = ["Plugin", "Environment", "Env"]

class Environment(exports.Environment):
    pass


class Env(environment.Env):
    """The WIT `env` resource wrapping the registered `Environment`."""

    @classmethod
    def create(cls, config_json: str, extras_json: str) -> "Env":
        def build() -> "Env":
            config = json_object(config_json, "env config")
            extras = Extras(json_object(extras_json, "extras"))
            env = cls()
            env.inner = registered().cls(config, extras)
            return env

        return guarded(build)

    def init(self, prompt: list[Any]) -> Any:
        def run() -> Any:
            messages, metadata = self.inner.init(from_wit(prompt))
            return environment.InitOutput(
                prompt=to_wit(messages), metadata_json=metadata_json(metadata)
            )

        return guarded(run)

    def step(self, action: str) -> Any:
        def run() -> Any:
            out = self.inner.step(action)
            if not isinstance(out, StepOutput):
                raise TypeError(f"step must return skyrl_sdk.StepOutput, got {type(out).__name__}")
            return environment.StepOutput(
                observations=to_wit(out.observations),
                reward=float(out.reward),
                done=bool(out.done),
                metadata_json=metadata_json(out.metadata),
            )

        return guarded(run)

    def close(self) -> None:
        try:
            self.inner.close()
        except Exception:  # noqa: BLE001 - close cannot report errors
            pass

    def metrics(self) -> str:
        try:
            value = self.inner.metrics()
        except Exception:  # noqa: BLE001
            return "{}"
        return json.dumps(value) if isinstance(value, dict) else "{}"
