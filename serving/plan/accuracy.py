"""How far the planner's estimates are from published measurements: the error it publishes.

Measured on the held-back rows of the calibration set (`tests/calibration_set.py`: published
vLLM runs the efficiency constants were not fitted on), by the kind of estimate: dense or MoE
model, and decode (time per output token), TTFT (time to first token) or saturation (throughput
with requests queued). `test_published_measurements` recomputes every figure here from the
calibration set and fails when they drift, so this table is what the planner measurably does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


# (is_moe, phase) -> measured on the held-back rows; regenerate with
# `python -m pytest tests/serving/plan/test_published_measurements.py -s`.
ERROR_BANDS: dict[tuple[bool, Phase], ErrorBand] = {
    (False, "decode"): ErrorBand(points=6, median=0.07, band=0.09, worst=-0.14),
    (True, "decode"): ErrorBand(points=3, median=0.08, band=0.47, worst=-0.47),
    (False, "ttft"): ErrorBand(points=4, median=0.23, band=0.41, worst=0.41),
    (True, "ttft"): ErrorBand(points=3, median=0.12, band=0.54, worst=-0.54),
    (False, "saturation"): ErrorBand(points=5, median=0.12, band=0.12, worst=-0.14),
    (True, "saturation"): ErrorBand(points=10, median=0.08, band=0.18, worst=0.7),
}


def error_band(is_moe: bool, phase: Phase) -> ErrorBand:
    return ERROR_BANDS.get((is_moe, phase), ErrorBand(points=0))
