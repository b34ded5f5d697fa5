"""`servestack bench --url`'s runs: the local bench's workloads and load generator
(`serving.local.bench`), sent to a deployed service in one of three modes, each repeated.

- closed: `concurrency` clients, each sending its next request when its last is answered;
- sweep: closed loops at 1, 2, 4, ... clients until requests/s stops rising, by the capacity
  sweep's rule (`serving.local.bench.capacity.stopped_rising`); the first repetition finds the
  levels, the later ones run the same levels;
- open: Poisson arrivals at `rate` requests/s, seeded, whatever is in flight.

Each load is bounded by its requests and by `max_seconds`. Every report carries the plan's
estimate for what it sent and measured / estimated (`serving.measure.estimate`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from serving.frozen import Frozen
from serving.local.bench import loadgen
from serving.local.bench.capacity import stopped_rising
from serving.local.bench.stats import RequestResult, WorkloadReport, summarize
from serving.local.bench.workloads import Workload, WorkloadName, build_requests
from serving.measure.estimate import Estimate, estimate, little_concurrency, mean_tokens, ratios
from serving.measure.target import KEY_VARIABLE
from serving.spec.parts import Workload as Shape
from serving.spec.profile import ModelSpec

ModeName = Literal["closed", "sweep", "open"]
# The sweep's levels: 1, 2, 4, ... up to this many clients at most.
SWEEP_LEVELS = tuple(2**i for i in range(10))
# Clients an open loop may hold in flight at once: far more than a rate a test or a first run
# asks for, and few enough file descriptors for any machine.
OPEN_LOOP_IN_FLIGHT = 1024
TIMEOUT_S = 600.0


class Mode(Frozen):
    name: ModeName
    concurrency: int | None = Field(default=None, description="closed: clients in flight.")
    rate: float | None = Field(default=None, description="open: requests/s, Poisson.")
    seed: int = Field(default=0, description="open: the arrivals' seed.")


class Measured(Frozen):
    """One workload under one load in one repetition, beside the plan's estimate for it."""

    mode: ModeName
    concurrency: int = Field(description="Clients in flight (open loop: by Little's law).")
    rate: float | None = None
    report: WorkloadReport
    estimate: Estimate
    ratios: dict[str, float] = Field(description="Measured / estimated, per figure.")


@dataclass(frozen=True)
class Progress:
    """What the runs tell as they go: each load as it starts (its label and requests), each
    request answered or failed."""

    load: Callable[[str, int], None]
    done: Callable[[], None]


def label(mode: ModeName, concurrency: int | None, rate: float | None) -> str:
    if mode == "open":
        return f"open {rate:g} req/s"
    return f"{mode} c={concurrency}"


def one_load(
    url: str,
    spec: ModelSpec,
    workload: Workload,
    mode: Mode,
    concurrency: int,
    repetition: int,
    max_seconds: float | None,
    progress: Progress,
) -> Measured:
    """Send the workload's requests once, summarize them and hold them against the plan."""
    name = label(mode.name, concurrency, mode.rate)
    progress.load(f"{workload.name}, {name}, repetition {repetition + 1}", workload.requests)
    run = loadgen.generate_load(
        url, build_requests(workload, spec.name), concurrency if mode.name != "open"
        else OPEN_LOOP_IN_FLIGHT, progress.done, TIMEOUT_S, rate=mode.rate, seed=mode.seed,
        max_seconds=max_seconds, bearer_variable=KEY_VARIABLE,
    )  # fmt: skip
    results = sorted(
        (RequestResult.model_validate(raw) for raw in run.results), key=lambda r: r.index or 0
    )
    report = summarize(name, workload.name, results, run.duration_s, replicas=1)
    report = report.model_copy(update={"repetition": repetition, "load_generator": run.isolation})
    if mode.name == "open":
        concurrency = little_concurrency(results, report.requests_per_s)
    sent = Shape(input_tokens=workload.input_tokens, output_tokens=workload.output_tokens)
    planned = estimate(spec, mean_tokens(results, sent), concurrency)
    return Measured(
        mode=mode.name, concurrency=concurrency, rate=mode.rate, report=report,
        estimate=planned, ratios=ratios(report, planned),
    )  # fmt: skip


def run_bench(
    url: str,
    spec: ModelSpec,
    workloads: dict[WorkloadName, Workload],
    mode: Mode,
    repeats: int,
    max_seconds: float | None,
    progress: Progress,
) -> list[Measured]:
    """Every workload under the mode, `repeats` times, interleaved (A B A B ...)."""
    found: list[Measured] = []
    sweep_levels: dict[str, list[int]] = {}

    def load(workload: Workload, concurrency: int, repetition: int) -> Measured:
        return one_load(url, spec, workload, mode, concurrency, repetition, max_seconds, progress)

    for repetition in range(repeats):
        for workload in workloads.values():
            if mode.name != "sweep":
                found.append(load(workload, mode.concurrency or 1, repetition))
                continue
            levels = sweep_levels.get(workload.name)
            swept: list[Measured] = []
            for concurrency in levels or SWEEP_LEVELS:
                swept.append(load(workload, concurrency, repetition))
                rates = [m.report.requests_per_s for m in swept]
                if levels is None and stopped_rising(rates):
                    break
            sweep_levels.setdefault(workload.name, [m.concurrency for m in swept])
            found += swept
    return found


def failed(measured: Sequence[Measured]) -> int:
    return sum(m.report.failed for m in measured)
