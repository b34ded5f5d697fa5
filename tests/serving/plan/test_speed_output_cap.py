"""A generation cap in the drain of a burst (burst.output_scale, drain_phases), worked by
hand: outputs spread exponentially around their mean, and where every request stops at
max_tokens (workload.max_output_tokens), the exponential is cut there with the same mean, so
the batch drains only until the cap and the rest end together."""

from __future__ import annotations

import math

import pytest
from planner_support import spec

from serving.plan.speed.burst import drain_phases, output_scale


def _work(output: int, cap: int | None = None) -> dict[str, int | None]:
    return {"input_tokens": 256, "output_tokens": output, "max_output_tokens": cap}


def test_uncapped_outputs_spread_by_their_mean() -> None:
    """No cap: the scale is the mean, 344, and 100 sequences drain in 344 x ln 100 = 1,584.2
    steps down to one, which outlives them by one mean: 1,928.2 steps."""
    model = spec(workload=_work(344))
    assert output_scale(model) == 344
    assert sum(steps for steps, _ in drain_phases(model, 100, 100)) == pytest.approx(1928.18, 1e-5)


def test_the_cut_exponential_keeps_the_mean() -> None:
    """A mean of 344 under a cap of 512 (AccelMark's suite B): the scale s with s x (1 -
    e^(-512/s)) = 344 is 598.08 (e^(-512/598.08) = 0.4248; 598.08 x 0.5752 = 344.0), so 42% of
    the outputs reach the cap."""
    scale = output_scale(spec(workload=_work(344, 512)))
    assert scale == pytest.approx(598.08, abs=0.01)
    assert scale * (1 - math.exp(-512 / scale)) == pytest.approx(344)


def test_a_capped_batch_drains_only_until_the_cap() -> None:
    """100 sequences under that cap fall to 100 x 0.4248 = 42.5 by step 512, and those end
    together there: 598.08 x ln(100 / 42.48) = 512 steps in all, none at one sequence."""
    phases = drain_phases(spec(workload=_work(344, 512)), 100, 100)
    assert sum(steps for steps, _ in phases) == pytest.approx(512)
    assert phases[0][1] == 98 and phases[-1][1] == 43


def test_one_capped_request_takes_the_mean() -> None:
    """One sequence alone decodes its expected length: 598.08 x (1 - e^(-512/598.08)) = 344."""
    phases = drain_phases(spec(workload=_work(344, 512)), 1, 1)
    assert sum(steps * size for steps, size in phases) == pytest.approx(344)


def test_outputs_all_at_the_cap_end_together() -> None:
    """A mean at the cap leaves every output at it: 100 sequences for 512 steps."""
    model = spec(workload=_work(512, 512))
    assert math.isinf(output_scale(model))
    assert drain_phases(model, 100, 100) == [(512.0, 100)]


def test_a_cap_below_the_mean_is_refused() -> None:
    with pytest.raises(ValueError, match=r"max_output_tokens \(300\) is below output_tokens"):
        spec(workload=_work(344, 300))
