"""Exports of the `reward-plugin` world."""

from __future__ import annotations

import json
from typing import Any

from wit_world import exports  # type: ignore[import-not-found]

from ._glue import Plugin, from_wit, guarded, json_object
from .plugin import registered
from .types import ConfigError, Extras

__all__ = ["Plugin", "Reward"]

class Reward(exports.Reward):
    def score(self, prompt: list[Any], response: str, ground_truth_json: str, extras_json: str) -> float:
        def run() -> float:
            try:
                truth = json.loads(ground_truth_json) if ground_truth_json.strip() else None
            except json.JSONDecodeError as e:
                raise ConfigError(f"ground truth is not JSON: {e}") from None
            extras = Extras(json_object(extras_json, "extras"))
            return float(registered().cls().score(from_wit(prompt), response, truth, extras))

        return guarded(run)
