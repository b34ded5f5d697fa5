"""Fit serving.plan.speed's efficiency constants to the calibration set's `fit` rows.

Least squares on log(estimate / published) over the fit rows only, each constant within a
physically plausible bound; the held rows are printed afterwards, never fitted. Prints the
constants to copy into serving/plan/speed.py and the table of both parts.

    PYTHONPATH=. python scripts/fit_speed_constants.py

It needs scipy, which the development environment has (vLLM depends on it); CI does not run it.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "serving" / "plan")]

from calibration_score import score  # noqa: E402
from calibration_set import ROWS  # noqa: E402
from test_published_measurements import table  # noqa: E402

from serving.plan import collectives as comm  # noqa: E402
from serving.plan import speed  # noqa: E402

# name -> (lower, upper): what the hardware and software allow, not what the rows want.
BOUNDS: dict[str, tuple[float, float]] = {
    "HBM_EFFICIENCY": (0.5, 0.85),
    "EXPERT_HBM_EFFICIENCY": (0.2, 0.85),
    # Decode attention streams paged KV like weights; far below half the bandwidth, a fit would
    # be folding a per-sequence cost into a bandwidth and mispricing long contexts.
    "ATTENTION_HBM_EFFICIENCY": (0.5, 0.85),
    "PREFILL_MFU_AMPERE": (0.3, 0.85),
    "PREFILL_MFU_HOPPER": (0.2, 0.75),
    "DECODE_MFU": (0.1, 0.75),
    "ATTENTION_MFU_HOPPER": (0.15, 0.75),
    "TRITON_ATTENTION_MFU": (0.05, 0.6),
    "EXPERT_MFU_SHARE": (0.2, 1.0),
    "FP8_EXPERT_MATH_SPEEDUP": (1.0, 2.0),
    "STEP_OVERHEAD_S": (0.0, 3e-3),
    "PER_SEQUENCE_STEP_S": (0.0, 100e-6),
    "LAYER_OVERHEAD_S": (0.0, 40e-6),
    "MOE_LAYER_OVERHEAD_S": (0.0, 100e-6),
    "TTFT_FLOOR_S": (0.0, 60e-3),
    "ALLREDUCE_LATENCY_S": (5e-6, 50e-6),
}


# Constants kept per GPU generation: (dict name, compute capability major version).
_BY_GENERATION = {
    "ATTENTION_MFU_HOPPER": ("ATTENTION_MFU", 9),
    "PREFILL_MFU_AMPERE": ("PREFILL_MFU", 8),
    "PREFILL_MFU_HOPPER": ("PREFILL_MFU", 9),
}


def _get(name: str) -> float:
    if name in _BY_GENERATION:
        table_name, generation = _BY_GENERATION[name]
        return float(getattr(speed, table_name)[generation])
    return float(getattr(_home(name), name))


def _set(name: str, value: float) -> None:
    if name in _BY_GENERATION:
        table_name, generation = _BY_GENERATION[name]
        getattr(speed, table_name)[generation] = value
    else:
        setattr(_home(name), name, value)


def _home(name: str) -> object:
    """The module that defines the constant and reads it (speed, or comm for collectives)."""
    return comm if hasattr(comm, name) else speed


def main() -> None:
    names = list(BOUNDS)
    fit_rows = [row for row in ROWS if row.part == "fit"]
    # Scale each constant to its bound so one step size suits them all.
    low = np.array([BOUNDS[n][0] for n in names])
    high = np.array([BOUNDS[n][1] for n in names])

    def residuals(unit: np.ndarray) -> np.ndarray:
        for name, value in zip(names, low + unit * (high - low), strict=True):
            _set(name, float(value))
        return np.array([math.log(s.estimated / s.row.published) for s in score(fit_rows)])

    start = np.clip((np.array([_get(n) for n in names]) - low) / (high - low), 0, 1)
    result = least_squares(residuals, start, bounds=(0, 1), diff_step=1e-2, max_nfev=400)
    residuals(result.x)
    for name in names:
        print(f"{name} = {_get(name):.3g}")
    print(table(score(ROWS)))


if __name__ == "__main__":
    main()
