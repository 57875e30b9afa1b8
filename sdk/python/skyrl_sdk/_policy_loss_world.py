"""Exports of the `policy-loss-plugin` world."""

from ._algorithm_glue import Algorithm
from ._loss_glue import PolicyLoss

__all__ = ["Algorithm", "PolicyLoss"]
