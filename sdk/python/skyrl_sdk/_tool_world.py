"""Exports of the `tool-plugin` world."""

from __future__ import annotations

import json
from typing import Any

from wit_world import exports  # type: ignore[import-not-found]
from wit_world.exports import tool  # type: ignore[import-not-found]

from ._glue import Plugin, guarded
from .plugin import registered
from .types import InputError

__all__ = ["Plugin", "Tool"]

class Tool(exports.Tool):
    def specs(self) -> list[Any]:
        def run() -> list[Any]:
            return [
                tool.ToolSpec(
                    name=s.name,
                    description=s.description,
                    parameters_json=json.dumps(s.parameters),
                )
                for s in registered().cls().specs()
            ]

        return guarded(run)

    def call(self, name: str, args_json: str) -> str:
        def run() -> str:
            try:
                args = json.loads(args_json) if args_json.strip() else {}
            except json.JSONDecodeError as e:
                raise InputError(f"tool arguments are not JSON: {e}") from None
            if not isinstance(args, dict):
                raise InputError("tool arguments must be a JSON object")
            out = registered().cls().call(name, args)
            return out if isinstance(out, str) else json.dumps(out)

        return guarded(run)
