"""Glue shared by the algorithm worlds (`advantage-plugin`,
`policy-loss-plugin`, `algorithm-plugin`): WIT matrices to and from
`skyrl_sdk.Matrix`, the `algorithm.info` export, and one long-lived instance
of the registered `Algorithm` class."""

from __future__ import annotations

import math
from typing import Any

from wit_world import exports  # type: ignore[import-not-found]
from wit_world.exports import algorithm as wit_alg  # type: ignore[import-not-found]

from ._glue import json_object
from .plugin import registered
from .types import InputError, Matrix

_instance: Any = None


def instance() -> Any:
    """The registered `Algorithm`, created on first use and kept."""
    global _instance
    if _instance is None:
        _instance = registered().cls()
    return _instance


def from_wit(m: Any) -> Matrix:
    return Matrix(int(m.rows), int(m.cols), list(m.data))


def maybe_from_wit(m: Any) -> Matrix | None:
    return None if m is None else from_wit(m)


def to_wit(m: Matrix, what: str) -> Any:
    if not isinstance(m, Matrix):
        raise InputError(f"{what} must be a skyrl_sdk.Matrix, got {type(m).__name__}")
    return wit_alg.Matrix(rows=m.rows, cols=m.cols, data=[float(v) for v in m.data])


def config(text: str) -> dict[str, Any]:
    return json_object(text, "config")


def finite(value: float, what: str) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise InputError(f"{what} is not finite: {value}")
    return value


class Algorithm(exports.Algorithm):
    def info(self) -> Any:
        reg = registered()
        return wit_alg.AlgorithmInfo(
            name=reg.name, version=reg.version, description=reg.description
        )
