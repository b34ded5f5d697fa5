"""How far the planner's estimates are from published measurements: the error it publishes.

Measured on the held-back rows of the calibration set (`tests/calibration_set.py`: published
vLLM runs the efficiency constants were not fitted on), by the kind of estimate: dense or MoE
model, and decode (time per output token), TTFT (time to first token) or saturation (throughput
with requests queued). The figures are generated from the calibration set into
`serving.plan.error_bands` by scripts/fit_speed_constants.py, whose `--check` (run by the tests)
fails when they drift, so they are what the planner measurably does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from serving.plan.error_bands import MEASURED

Phase = Literal["decode", "ttft", "saturation"]


@dataclass(frozen=True)
class ErrorBand:
    """Relative errors (estimate / published - 1) of one kind of estimate."""

    points: int
    median: float = 0.0  # median |error|
    band: float = 0.0  # |error| that 80% of the points stay within
    worst: float = 0.0  # largest error, signed

    def describe(self) -> str:
        if not self.points:
            return "not yet measured against published runs"
        return (
            f"±{self.band:.0%} (80% of {self.points} published runs within; median "
            f"{self.median:.0%}, worst {self.worst:+.0%})"
        )


# (is_moe, phase) -> measured on the held-back rows.
ERROR_BANDS: dict[tuple[bool, str], ErrorBand] = {
    kind: ErrorBand(*figures) for kind, figures in MEASURED.items()
}


def error_band(is_moe: bool, phase: Phase) -> ErrorBand:
    return ERROR_BANDS.get((is_moe, phase), ErrorBand(points=0))
