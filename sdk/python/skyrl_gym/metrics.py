"""``skyrl_gym.metrics``: averaging episode metrics across episodes."""

from __future__ import annotations

from typing import Any, Dict, List


def default_aggregate_metrics(metrics: List[Dict[str, Any]]) -> Dict[str, float]:
    """The mean of every numeric (or bool) key over the episodes that have it."""
    sums: Dict[str, float] = {}
    counts: Dict[str, int] = {}
    for episode in metrics:
        for key, value in episode.items():
            if isinstance(value, (int, float)):
                sums[key] = sums.get(key, 0.0) + float(value)
                counts[key] = counts.get(key, 0) + 1
    return {key: sums[key] / counts[key] for key in sums}
