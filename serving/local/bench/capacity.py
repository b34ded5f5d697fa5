"""The serving path's own capacity: how many requests/s the path through Ray Serve carries when
the engine costs nothing.

The seeds' headline figures (4.4x prefill-heavy, 24.8x decode-heavy on 8 x H100) measure the
serving path's overhead at high concurrency; on a CPU the engine's cost hides it. Here the
simulated engine runs at zero cost (`time_scale` 0: every token at once), so what limits
requests/s is the path: HAProxy, direct streaming and the router with the fast paths on; Serve's
proxy and OpenAI ingress with them off; and, as the floor, the same engine's own ASGI app under a
bare uvicorn (`serving.local.bench.bare_engine`).

Each configuration is swept in a closed loop (`serving.local.bench.loadgen`: every worker sends
its next request when its last one is answered) at rising concurrency, each level warmed up for
`warm_up_s` and measured for `measure_s`. The first repetition of a configuration rises until
requests/s stops rising (`STOP_AFTER` levels in a row without `RISE` over the best so far);
later repetitions sweep the levels the first one did, interleaved (A B C A B C ...). The knee of
a curve is the lowest concurrency whose median requests/s reaches `KNEE_SHARE` of the curve's
highest median: past it, more requests in flight only queue.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from serving.frozen import Frozen
from serving.local.bench import loadgen
from serving.local.bench.repeats import RatioSpread, Spread, paired_ratio, spread
from serving.local.bench.runner import Variant, running_variant, variant_spec
from serving.local.bench.workloads import Workload, build_requests
from serving.local.engine.simulation import SimulationSettings, settings_from_plan
from serving.spec.profile import ModelSpec

Path_ = Literal["fast-paths-on", "fast-paths-off", "bare-engine"]
CONFIGURATIONS: tuple[Path_, ...] = ("fast-paths-on", "fast-paths-off", "bare-engine")
DEFAULT_LEVELS = (1, 2, 4, 8, 16, 32, 64, 128)
# The sweep stops once this many levels in a row have not raised requests/s by RISE over the
# best level so far.
STOP_AFTER = 3
RISE = 1.05
KNEE_SHARE = 0.9
# A short prompt and a short answer: the path's cost per request and per streamed token, with
# no prompt or answer long enough to make the load generator's parsing the bottleneck.
PROMPT_WORDS = 8
OUTPUT_TOKENS = 16


class Point(Frozen):
    """One configuration at one concurrency in one repetition."""

    configuration: Path_
    concurrency: int
    repetition: int
    requests_per_s: float
    finished: int = Field(description="Requests answered inside the measured window.")
    failed: int
    latency_p50_s: float | None
    errors: list[str] = Field(default_factory=list)


class Level(Frozen):
    concurrency: int
    requests_per_s: Spread
    latency_p50_s: Spread | None


class Curve(Frozen):
    """A configuration's requests/s over concurrency, over repetitions, with its knee."""

    configuration: Path_
    levels: list[Level]
    knee: int = Field(description="Lowest concurrency at KNEE_SHARE of the highest median.")
    peak: Level = Field(description="The level of the highest median requests/s.")
    still_rising: bool = Field(
        description="The highest median is the last level's, RISE over the one before: the "
        "sweep ended before requests/s stopped rising."
    )


def zero_cost(spec: ModelSpec) -> SimulationSettings:
    """The plan's simulated engine with every delay multiplied by zero."""
    return settings_from_plan(spec, time_scale=0.0)


def capacity_requests(model: str) -> list[dict[str, Any]]:
    workload = Workload(
        name="decode-heavy", input_tokens=PROMPT_WORDS, output_tokens=OUTPUT_TOKENS,
        requests=64, concurrency=1,
    )  # fmt: skip
    return build_requests(workload, model, seed=11)


def measure(
    configuration: Path_,
    endpoint: str,
    model: str,
    levels: Sequence[int],
    repetition: int,
    warm_up_s: float,
    measure_s: float,
    adaptive: bool,
    on_point: Callable[[Point], None] | None = None,
) -> tuple[list[Point], str]:
    """Sweep `levels` against one running configuration (stopping where requests/s stops
    rising when `adaptive`); the points and how the load generator was isolated."""
    points: list[Point] = []
    isolation = ""
    requests = capacity_requests(model)
    for concurrency in levels:
        run = loadgen.generate_load(
            endpoint, requests, concurrency, closed_loop=(warm_up_s, measure_s), timeout_s=60
        )
        isolation = run.isolation
        window = run.window
        latencies = window.get("latencies_s") or []
        point = Point(
            configuration=configuration, concurrency=concurrency, repetition=repetition,
            requests_per_s=window["finished"] / measure_s, finished=window["finished"],
            failed=window["failed"],
            latency_p50_s=statistics.median(latencies) if latencies else None,
            errors=window.get("errors") or [],
        )  # fmt: skip
        points.append(point)
        if on_point is not None:
            on_point(point)
        if adaptive and stopped_rising([p.requests_per_s for p in points]):
            break
    return points, isolation


def stopped_rising(rates: Sequence[float]) -> bool:
    """The sweep's stopping rule over the requests/s of its levels so far, in order: the last
    `STOP_AFTER` levels each fell short of `RISE` over the best level before them."""
    best, flat = 0.0, 0
    for rate in rates:
        flat = flat + 1 if rate < best * RISE else 0
        best = max(best, rate)
    return flat >= STOP_AFTER


def running(
    configuration: Path_, spec: ModelSpec, settings: SimulationSettings, log_path: Path
) -> Any:
    """The configuration, started: a context manager yielding its endpoint."""
    if configuration == "bare-engine":
        from serving.local.bench.bare_engine import running_bare_engine

        return running_bare_engine(spec.name, settings, log_path)
    variant = Variant(
        name=configuration, fast_paths=configuration == "fast-paths-on",
        router="power_of_two", workloads=("decode-heavy",), replicas=1,
    )  # fmt: skip
    return running_variant(variant_spec(spec, variant, 1), settings, log_path)


def sweep(
    configuration: Path_,
    spec: ModelSpec,
    settings: SimulationSettings,
    log_path: Path,
    levels: Sequence[int],
    repetition: int,
    warm_up_s: float,
    measure_s: float,
    adaptive: bool,
    on_point: Callable[[Point], None] | None = None,
) -> tuple[list[Point], str]:
    """Start the configuration, sweep it (`measure`), stop it."""
    with running(configuration, spec, settings, log_path) as endpoint:
        return measure(
            configuration, endpoint, spec.name, levels, repetition, warm_up_s, measure_s,
            adaptive, on_point,
        )  # fmt: skip


def curves(points: Sequence[Point]) -> list[Curve]:
    """Each configuration's curve: per level the median and min-max over repetitions; its
    knee and peak."""
    found = []
    for configuration in CONFIGURATIONS:
        mine = [p for p in points if p.configuration == configuration]
        if not mine:
            continue
        levels = []
        for concurrency in sorted({p.concurrency for p in mine}):
            here = [p for p in mine if p.concurrency == concurrency]
            latencies = [p.latency_p50_s for p in here if p.latency_p50_s is not None]
            levels.append(
                Level(
                    concurrency=concurrency,
                    requests_per_s=spread([p.requests_per_s for p in here]),
                    latency_p50_s=spread(latencies) if latencies else None,
                )
            )
        found.append(curve_of(configuration, levels))
    return found


def curve_of(configuration: Path_, levels: Sequence[Level]) -> Curve:
    """The knee and peak of a curve's levels (in rising concurrency)."""
    peak = max(levels, key=lambda level: level.requests_per_s.median)
    knee = next(
        level.concurrency
        for level in levels
        if level.requests_per_s.median >= KNEE_SHARE * peak.requests_per_s.median
    )
    # Still rising: the highest median is the last level's, and it rose by RISE over the one
    # before (a curve that fell and came back a little at the end has stopped rising).
    rising = (
        len(levels) > 1
        and peak is levels[-1]
        and levels[-1].requests_per_s.median >= RISE * levels[-2].requests_per_s.median
    )
    return Curve(
        configuration=configuration, levels=list(levels), knee=knee, peak=peak,
        still_rising=rising,
    )  # fmt: skip


def capacities(points: Sequence[Point], configuration: Path_) -> list[float]:
    """A configuration's capacity in each repetition: its highest requests/s over the levels."""
    by_repetition: dict[int, float] = {}
    for point in points:
        if point.configuration == configuration:
            best = by_repetition.get(point.repetition, 0.0)
            by_repetition[point.repetition] = max(best, point.requests_per_s)
    return [by_repetition[r] for r in sorted(by_repetition)]


RATIOS: dict[str, tuple[Path_, Path_]] = {
    "capacity: fast paths on/off": ("fast-paths-on", "fast-paths-off"),
    "capacity: fast paths on/bare engine": ("fast-paths-on", "bare-engine"),
    "capacity: fast paths off/bare engine": ("fast-paths-off", "bare-engine"),
}


def capacity_ratios(points: Sequence[Point]) -> dict[str, RatioSpread]:
    """Capacity over capacity: the median and min-max of the repetitions' own ratios, and
    whether the two capacities' spreads are apart (`repeats.paired_ratio`)."""
    found = {}
    for name, (top_name, bottom_name) in RATIOS.items():
        tops, bottoms = capacities(points, top_name), capacities(points, bottom_name)
        each = [a / b for a, b in zip(tops, bottoms, strict=False) if b]
        if not each:
            continue
        found[name] = paired_ratio(each, spread(tops), spread(bottoms))
    return found
