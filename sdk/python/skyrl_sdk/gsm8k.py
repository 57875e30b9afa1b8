"""GSM8K answer extraction and scoring, as skyrl-gym's
`skyrl_gym.envs.gsm8k.utils` (`method="strict"`)."""

from __future__ import annotations

import re

_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")


def extract_answer(response: str) -> str | None:
    """The FIRST `#### <number>` answer with `,` and `$` removed, or None."""
    match = _ANSWER.search(response)
    if match is None:
        return None
    return match.group(1).replace(",", "").replace("$", "")


def compute_score(response: str, ground_truth: str, format_score: float = 0.0, score: float = 1.0) -> float:
    """No answer -> 0.0; answer == ground_truth (as strings) -> score; else format_score."""
    answer = extract_answer(response)
    if answer is None:
        return 0.0
    return score if answer == ground_truth else format_score
