"""Exports of the `algorithm-plugin` world (advantage estimator and policy loss)."""

from ._advantage_glue import Advantage
from ._algorithm_glue import Algorithm
from ._loss_glue import PolicyLoss

__all__ = ["Advantage", "Algorithm", "PolicyLoss"]
