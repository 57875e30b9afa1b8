"""Exports of the `advantage-plugin` world."""

from ._advantage_glue import Advantage
from ._algorithm_glue import Algorithm

__all__ = ["Advantage", "Algorithm"]
