"""The capacity sweep's curves from given points: per level the median and min–max over
repetitions, the knee (the lowest concurrency at 90% of the highest median), whether the sweep
ended still rising, and the capacities' ratios with their spreads; and the bare server the
sweep holds the paths against is the simulated engine at zero cost."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo import REPO

from infra.cli.capacity import curve_table, ratio_table
from serving.local.bench import loadgen
from serving.local.bench.bare_engine import running_bare_engine
from serving.local.bench.capacity import (
    OUTPUT_TOKENS,
    Point,
    capacity_ratios,
    capacity_requests,
    curves,
    zero_cost,
)
from serving.local.bench.stats import RequestResult
from serving.local.engine.simulation import FINGERPRINT_PREFIX
from serving.spec.loading import load_profile

ON = "fast-paths-on"
OFF = "fast-paths-off"


def _points(configuration: str, by_level: dict[int, list[float]]) -> list[Point]:
    return [
        Point(
            configuration=configuration, concurrency=level, repetition=repetition,  # type: ignore[arg-type]
            requests_per_s=per_s, finished=round(per_s * 4), failed=0, latency_p50_s=level / per_s,
        )
        for level, values in by_level.items()
        for repetition, per_s in enumerate(values)
    ]  # fmt: skip


ON_LEVELS = {1: [50.0, 40.0, 45.0], 2: [90.0, 80.0, 85.0], 4: [150.0, 140.0, 160.0],
             8: [165.0, 150.0, 170.0], 16: [160.0, 155.0, 150.0]}  # fmt: skip
OFF_LEVELS = {1: [20.0, 22.0, 21.0], 2: [35.0, 30.0, 33.0], 4: [40.0, 38.0, 45.0]}


def test_the_knee_is_the_lowest_level_at_nine_tenths_of_the_highest_median() -> None:
    on, off = curves(_points(ON, ON_LEVELS) + _points(OFF, OFF_LEVELS))
    assert on.configuration == ON and off.configuration == OFF
    # Medians 45, 85, 150, 165, 155: 90% of 165 is 148.5, first reached at 4.
    assert [level.requests_per_s.median for level in on.levels] == [45, 85, 150, 165, 155]
    assert on.peak.concurrency == 8 and on.knee == 4
    assert (on.peak.requests_per_s.low, on.peak.requests_per_s.high) == (150.0, 170.0)
    assert not on.still_rising
    # Medians 21, 33, 40: 90% of 40 is 36, at 4, still rising past 1.05x at the last level.
    assert off.knee == 4 and off.still_rising


def test_a_curve_that_fell_and_came_back_a_little_has_stopped_rising() -> None:
    (curve,) = curves(_points(ON, {1: [100.0], 2: [300.0], 4: [200.0], 8: [220.0]}))
    assert curve.peak.concurrency == 2 and not curve.still_rising


def test_capacity_ratios_are_the_median_of_the_repetitions_ratios() -> None:
    ratios = capacity_ratios(_points(ON, ON_LEVELS) + _points(OFF, OFF_LEVELS))
    figure = ratios["capacity: fast paths on/off"]
    # Capacities per repetition: on 165, 155, 170; off 40, 38, 45: ratios 4.12, 4.08, 3.78.
    assert figure.median == pytest.approx(155 / 38)
    assert figure.low == pytest.approx(170 / 45) and figure.high == pytest.approx(165 / 40)
    assert figure.differs is True
    assert "capacity: fast paths on/bare engine" not in ratios  # no bare engine measured


def test_the_tables_show_each_level_the_knee_and_the_ratio_with_its_spread() -> None:
    points = _points(ON, ON_LEVELS) + _points(OFF, OFF_LEVELS)
    document = {"repetitions": 3, "points": [p.model_dump() for p in points]}
    table = curve_table(document).splitlines()
    assert table[0] == "| requests in flight | fast paths on | fast paths off |"
    assert "| 16 | 155 (150–160) | — |" in table
    assert "| knee (requests in flight) | 4 | 4 |" in table
    assert "| highest median, requests/s | 165 (150–170) | 40 (38–45) still rising |" in table
    # One request alone: latency 1/50, 1/40, 1/45 s on; 1/20, 1/22, 1/21 s off.
    assert table[-1] == (
        "| a request's time, p50 ms, 1 in flight | 22.2 (20.0–25.0) | 47.6 (45.5–50.0) |"
    )
    assert (
        "| fast paths on/off, requests/s | 4.08x (3.78x–4.12x) | 155–170 against 38–45 |"
        in ratio_table(document)
    )


def test_the_bare_server_is_the_simulated_engine_at_zero_cost(tmp_path: Path) -> None:
    """The floor of the sweep answers as a replica would: the simulated engine's fingerprint,
    every token asked for, and at zero cost all of them in the first arrivals."""
    spec = load_profile(REPO / "stacks" / "models" / "llama-3.1-8b.yaml")
    settings = zero_cost(spec)
    assert settings.time_scale == 0
    with running_bare_engine(spec.name, settings, tmp_path / "bare.log") as endpoint:
        run = loadgen.generate_load(endpoint, capacity_requests(spec.name)[:4], 2)
    results = [RequestResult.model_validate(raw) for raw in run.results]
    assert [r.ok for r in results] == [True] * 4, [r.error for r in results]
    assert all(r.output_tokens == OUTPUT_TOKENS for r in results)
    assert all((r.replica or "").startswith(FINGERPRINT_PREFIX) for r in results)
