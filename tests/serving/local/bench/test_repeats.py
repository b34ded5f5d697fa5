"""Figures over interleaved repetitions: the median and min–max of each configuration's figure,
a ratio as the median and min–max of the repetitions' own ratios, "no
difference measured" where the two spreads overlap; percentiles only where the samples resolve
them (a p99 needs 100), the maximum, labelled so, where they do not."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable

import pytest

from infra.cli.bench_report import spread_text
from serving.local.bench.repeats import (
    headline_spreads,
    median_repetition,
    reproduces,
    rerun_inside,
    spread,
)
from serving.local.bench.stats import Pair, WorkloadReport, pair_ratios, percentiles

ON, OFF = "fast-paths-on/power-of-two", "fast-paths-off/power-of-two"
RATIO = "decode-heavy: fast paths on/off, requests/s"
PAIRS = {RATIO: Pair((ON, "decode-heavy"), (OFF, "decode-heavy"))}


def _report(variant: str, per_s: float, repetition: int) -> WorkloadReport:
    return WorkloadReport.model_validate(
        {
            "variant": variant, "workload": "decode-heavy", "requests": 10, "failed": 0,
            "duration_s": 10 / per_s, "requests_per_s": per_s, "output_tokens_per_s": per_s,
            "ttft_s": {"p50": 0.1, "p90": 0.2, "p99": None}, "itl_s": {"p50": 0.01, "p90": None,
            "p99": None}, "cache_hit_rate": 0.0, "requests_per_replica": {"a": 10},
            "busiest_over_idlest": 1.0, "repetition": repetition,
        }
    )  # fmt: skip


def _run(on: list[float], off: list[float]) -> list[WorkloadReport]:
    return [
        report
        for repetition, (a, b) in enumerate(zip(on, off, strict=True))
        for report in (_report(ON, a, repetition), _report(OFF, b, repetition))
    ]


def _headline(on: list[float], off: list[float]) -> dict[str, object]:
    spreads = headline_spreads(_run(on, off), lambda group: pair_ratios(group, PAIRS), PAIRS)
    return {"figure": spreads[RATIO], "text": spread_text(RATIO, spreads[RATIO])}


def test_a_ratio_is_the_median_of_the_repetitions_ratios_with_their_spread() -> None:
    found = _headline(on=[12.0, 10.0, 11.0], off=[6.0, 5.5, 4.0])
    figure = found["figure"]
    assert figure.median == pytest.approx(12.0 / 6.0)  # type: ignore[attr-defined]
    # Each repetition's own ratio: 12/6, 10/5.5, 11/4.
    assert figure.low == pytest.approx(10.0 / 5.5)  # type: ignore[attr-defined]
    assert figure.high == pytest.approx(11.0 / 4.0)  # type: ignore[attr-defined]
    assert figure.repetitions == 3 and figure.differs is True  # type: ignore[attr-defined]
    assert found["text"] == "2.00x (1.82x–2.75x)"


def test_a_ratio_pairs_each_repetition_with_its_own_not_the_medians() -> None:
    """The repetitions' own ratios are 1.0x, 1.0x and 1.67x: the ratio is their median, 1.0x,
    where the ratio of the medians (20 over 12) would pair two different repetitions and read
    1.67x."""
    figure = _headline(on=[10.0, 40.0, 20.0], off=[10.0, 40.0, 12.0])["figure"]
    assert figure.median == pytest.approx(1.0)  # type: ignore[attr-defined]
    assert (figure.low, figure.high) == pytest.approx((1.0, 20.0 / 12.0))  # type: ignore[attr-defined]


def test_overlapping_spreads_say_no_difference_was_measured() -> None:
    """Medians 1.20x apart, but on's slowest repetition is below off's fastest."""
    found = _headline(on=[12.0, 9.0, 13.0], off=[10.0, 9.5, 11.0])
    assert found["figure"].differs is False  # type: ignore[attr-defined]
    assert str(found["text"]).endswith(": no difference measured")


def test_spread_and_the_median_repetition() -> None:
    figures = spread([3.0, 1.0, 2.0, 10.0])
    assert (figures.median, figures.low, figures.high) == (2.5, 1.0, 10.0)
    reports = [_report(ON, per_s, i) for i, per_s in enumerate([5.0, 7.0, 6.0])]
    assert median_repetition(reports).repetition == 2


def test_p99_needs_a_hundred_samples_else_the_maximum_is_shown_and_called_that() -> None:
    few = percentiles([float(i) for i in range(1, 33)])  # 32 samples: one stall is the p99
    assert few.p99 is None and few.max == 32.0 and few.samples == 32
    assert few.tail() == (32.0, "max")
    assert few.p90 == 29.0  # 10 or more resolve a p90: the 29th of 32, int(0.9 x 32) from 0
    many = percentiles([float(i) for i in range(1, 201)])
    assert many.tail() == (199.0, "p99")  # int(0.99 x 200) = 198, from 0
    assert percentiles([1.0] * 9).p90 is None


def test_two_groups_of_about_half_move_the_median_across_and_the_mean_little() -> None:
    """About half of power of two's LoRA requests wait for an adapter load: one request more
    or less in the slow group moves the p50 from one group to the other, the mean by 1/100 of
    the gap, which is why the LoRA ratio compares means."""
    fast, slow = [0.1] * 50, [0.7] * 50
    fewer_slow = percentiles([*fast, 0.1, *slow[1:]])
    more_slow = percentiles([*fast[1:], 0.7, *slow])
    assert (fewer_slow.p50, more_slow.p50) == (0.1, 0.7)
    assert fewer_slow.mean == pytest.approx(0.394)
    assert more_slow.mean == pytest.approx(0.406)


def test_a_latency_ratio_reads_the_named_percentile_or_the_maximum_short_of_samples() -> None:
    on, off = _report(ON, 10.0, 0), _report(OFF, 5.0, 0)
    on = on.model_copy(update={"itl_s": percentiles([0.001] * 50 + [0.004])})
    off = off.model_copy(update={"itl_s": percentiles([0.002] * 50 + [0.016])})
    pairs = {
        "ttft": Pair((ON, "decode-heavy"), (OFF, "decode-heavy"), "ttft_s.p50"),
        "itl tail": Pair((ON, "decode-heavy"), (OFF, "decode-heavy"), "itl_s.p99_or_max"),
    }
    found = pair_ratios([on, off], pairs)
    assert found["ttft"] == pytest.approx(1.0)  # both reports' TTFT p50 is 0.1 s
    assert found["itl tail"] == pytest.approx(0.004 / 0.016)  # 51 samples: the maxima


def test_a_rerun_reproduces_only_when_each_median_lies_in_the_other_runs_spread() -> None:
    off = [10.0, 10.0, 10.0]
    first = _headline([12.0, 10.0, 11.0], off)["figure"]  # 1.1x (1.0x–1.2x)
    close = _headline([11.5, 10.5, 11.0], off)["figure"]  # 1.1x (1.05x–1.15x)
    assert reproduces(first, close) and reproduces(close, first)
    # A wide rerun, 1.3x (0.9x–3.0x), holds the first run's median, but its own median lies
    # outside the first run's spread: a wide spread does not vouch for a rerun.
    wide = _headline([30.0, 9.0, 13.0], off)["figure"]
    assert wide.low <= first.median <= wide.high
    assert not reproduces(first, wide) and not reproduces(wide, first)


def test_a_figure_both_runs_measured_alike_reproduces_whatever_order_it_was_summed_in() -> None:
    """The same hit rate from both runs, summed in another order (0.1 + 0.2 is not 0.3 in
    floats): each run's spread is that one value, and it reproduces; a value one cached
    request away does not."""
    hits = [0.1, 0.2]
    first = spread([sum(hits)] * 3)
    again = spread([0.3] * 3)
    assert first.median != again.median
    assert reproduces(first, again) and reproduces(again, first)
    assert not reproduces(first, spread([0.3 + 1 / 128] * 3))


def test_how_often_a_rerun_of_the_same_distribution_lands_inside_the_spread() -> None:
    """By hand at 3 repetitions: the rerun's median (its 2nd value) lies below the run's minimum
    when the rerun holds the 2 lowest of all 6 values, C(3, 2) / C(6, 2) = 3/15, and as often
    above the maximum: 1 - 2/5 = 0.6. Against draws: the formula within two points of a
    simulation of repeated runs (uniform and heavy-tailed alike, since only ranks count), and at
    even counts at most what the draws give."""
    rng = random.Random(7)
    assert rerun_inside(3) == pytest.approx(0.6)

    def simulated(n: int, draw: Callable[[], float], trials: int = 6000) -> float:
        inside = 0
        for _ in range(trials):
            run = [draw() for _ in range(n)]
            rerun = statistics.median(draw() for _ in range(n))
            inside += min(run) <= rerun <= max(run)
        return inside / trials

    for n in (3, 5, 9):
        assert simulated(n, rng.random) == pytest.approx(rerun_inside(n), abs=0.02)
    assert simulated(5, lambda: rng.paretovariate(1.5)) == pytest.approx(rerun_inside(5), abs=0.02)
    for n in (4, 6):
        assert rerun_inside(n) <= simulated(n, rng.random) + 0.02
