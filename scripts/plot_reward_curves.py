#!/usr/bin/env python3
"""Plots the train reward (moving average) of several runs on one chart.

Usage: scripts/plot_reward_curves.py OUT.png LABEL=RUN/logs/metrics.jsonl ...
(matplotlib from the project venv: .deps/venv/bin/python).
"""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WINDOW = 25


def rewards(path: str) -> tuple[list[int], list[float]]:
    steps, values = [], []
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            if "reward/mean" in row:
                steps.append(int(row["step"]))
                values.append(float(row["reward/mean"]))
    return steps, values


def moving_average(values: list[float]) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= WINDOW:
            total -= values[i - WINDOW]
        out.append(total / min(i + 1, WINDOW))
    return out


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = sys.argv[1]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    for spec in sys.argv[2:]:
        label, _, path = spec.partition("=")
        steps, values = rewards(path)
        ax.plot(steps, moving_average(values), label=label, linewidth=1.4)
    ax.set_xlabel("step")
    ax.set_ylabel(f"train reward (moving average of {WINDOW} steps)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main()
