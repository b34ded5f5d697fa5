"""Figures over repetitions: every benchmark runs each configuration several times, interleaved
(A B C A B C ...), so that a slow minute of a shared machine falls on every configuration rather
than on one. Per figure the median and the spread (min-max over the repetitions); per ratio the
median and min-max of the repetitions' own ratios (A/B of the same repetition, run minutes
apart: a slow minute slows both sides of one ratio, where a ratio of two medians could pair a
slow repetition of A with a quick one of B). Where the two figures' spreads overlap, no
difference was measured, whatever the ratio says.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from pydantic import Field

from serving.frozen import Frozen
from serving.local.bench.stats import Pair, WorkloadReport, figure

NO_DIFFERENCE = "no difference measured"


class Spread(Frozen):
    """A figure over repetitions."""

    median: float
    low: float
    high: float
    values: list[float] = Field(description="One per repetition, in the order they ran.")

    def overlaps(self, other: Spread) -> bool:
        return self.low <= other.high and other.low <= self.high


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("a spread needs at least one value")
    return Spread(
        median=statistics.median(values), low=min(values), high=max(values), values=list(values)
    )


class RatioSpread(Frozen):
    """A headline figure over repetitions. For a ratio of two configurations: the median and
    min-max of the repetitions' own ratios, and whether the two figures' spreads are apart
    (`differs`); for another figure (a hit rate): its median and min-max, `differs` None."""

    median: float
    low: float
    high: float
    repetitions: int
    differs: bool | None = None
    numerator: Spread | None = None
    denominator: Spread | None = None


def paired_ratio(each: Sequence[float], top: Spread, bottom: Spread) -> RatioSpread:
    """A ratio of two configurations over the repetitions: `each` holds one repetition's A/B
    apiece; `top` and `bottom` are A's and B's figures, whose spreads say whether they differ."""
    return RatioSpread(
        median=statistics.median(each), low=min(each), high=max(each), repetitions=len(each),
        differs=not top.overlaps(bottom), numerator=top, denominator=bottom,
    )  # fmt: skip


def by_repetition(reports: Sequence[WorkloadReport]) -> dict[int, list[WorkloadReport]]:
    grouped: dict[int, list[WorkloadReport]] = defaultdict(list)
    for report in reports:
        grouped[report.repetition].append(report)
    return dict(sorted(grouped.items()))


def figure_spread(
    reports: Sequence[WorkloadReport],
    key: tuple[str, str],
    value: Callable[[WorkloadReport], float | None],
) -> Spread | None:
    """One configuration's figure over its repetitions (None where it has no value)."""
    values = [v for r in reports if (r.variant, r.workload) == key if (v := value(r)) is not None]
    return spread(values) if values else None


def field_value(name: str) -> Callable[[WorkloadReport], float | None]:
    """A report's figure by its dotted name, as a number (None where the report has none)."""
    return lambda report: figure(report, name)


def headline_spreads(
    reports: Sequence[WorkloadReport],
    headline: Callable[[Sequence[WorkloadReport]], Mapping[str, float]],
    pairs: Mapping[str, Pair],
) -> dict[str, RatioSpread]:
    """`headline` (the bench's ratios of one repetition) over every repetition; a pair's ratio
    also says whether its two figures differ (`paired_ratio`)."""
    per_repetition = [headline(group) for group in by_repetition(reports).values()]
    names = list(dict.fromkeys(name for found in per_repetition for name in found))
    out: dict[str, RatioSpread] = {}
    for name in names:
        values = [found[name] for found in per_repetition if name in found]
        pair = pairs.get(name)
        top = bottom = None
        if pair is not None:
            top = figure_spread(reports, pair.numerator, field_value(pair.field))
            bottom = figure_spread(reports, pair.denominator, field_value(pair.field))
        if top is not None and bottom is not None:
            out[name] = paired_ratio(values, top, bottom)
        else:
            out[name] = RatioSpread(
                median=statistics.median(values), low=min(values), high=max(values),
                repetitions=len(values),
            )  # fmt: skip
    return out


Configuration = tuple[str, str]  # (variant, workload)


def configurations(reports: Sequence[WorkloadReport]) -> dict[Configuration, list[WorkloadReport]]:
    """Each (variant, workload)'s reports, one per repetition, in the order they ran."""
    grouped: dict[Configuration, list[WorkloadReport]] = defaultdict(list)
    for report in sorted(reports, key=lambda r: r.repetition):
        grouped[(report.variant, report.workload)].append(report)
    return dict(grouped)


def median_repetition(group: Sequence[WorkloadReport]) -> WorkloadReport:
    """The repetition whose request throughput is the median (the lower of the middle two): the
    one whose figures a table or chart shows where it shows one."""
    ordered = sorted(group, key=lambda r: r.requests_per_s)
    return ordered[(len(ordered) - 1) // 2]


def within(figure: RatioSpread | Spread, value: float) -> bool:
    """`value` lies inside the figure's min–max over its repetitions, its ends included to the
    rounding of float sums (`math.isclose`): two runs that measured the same value may sum it in
    another order and differ in the last bits."""
    ends = (figure.low, figure.high)
    return figure.low <= value <= figure.high or any(math.isclose(value, end) for end in ends)


def rerun_inside(repetitions: int) -> float:
    """The chance that a rerun's median lies inside a run's min–max, each of `repetitions`
    repetitions, were every repetition of both an independent draw of one distribution: what the
    spread promises at best, with no drift between the runs. Ranks alone decide it, whatever
    the distribution: the rerun's median falls below the run's minimum when its k lowest values
    are the k lowest of all 2n, C(n, k) / C(2n, k) (k = (n + 1) / 2), and as often above the
    maximum. 3 repetitions: 60%; 5: 83%; 9: 97%. For an even count, whose median is the mean of
    the middle two, the lower of the two (k = n / 2) bounds it from below."""
    if repetitions < 1:
        raise ValueError("a run has at least one repetition")
    k = (repetitions + 1) // 2
    return 1.0 - 2.0 * math.comb(repetitions, k) / math.comb(2 * repetitions, k)


def reproduces(first: RatioSpread | Spread, second: RatioSpread | Spread) -> bool:
    """Two runs of the same command agree on a figure: each run's median lies inside the other
    run's spread. (One way only would let a run with a wide spread vouch for any rerun.)"""
    return within(first, second.median) and within(second, first.median)
