"""The bench's figures: what a client saw of each request, and each configuration's report on a
workload (throughput, latency percentiles, hit rate, spread over replicas) with the headline
ratios between configurations."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pydantic import Field

from serving.frozen import Frozen
from serving.local.bench.metrics import EngineFigures
from serving.local.bench.workloads import ADAPTER_WORKLOAD, SHARED_PREFIX_WORKLOADS, WorkloadName


class RequestResult(Frozen):
    ok: bool
    error: str | None = None
    status: int | None = Field(
        default=None, description="The HTTP status of a refused request (None: no answer)."
    )
    start_s: float
    end_s: float
    ttft_s: float | None = None
    tpot_s: float | None = Field(
        default=None, description="(end to end - TTFT) / (tokens - 1): time per output token."
    )
    token_gaps_s: list[float] = Field(
        default_factory=list,
        description="Inter-token latency per token: each arrival's gap since the previous one "
        "over the tokens it brought, once per token (`serving.local.bench.loadgen`).",
    )
    chunk_tokens: list[int] = Field(
        default_factory=list, description="Tokens per arrival (one read that carried content)."
    )
    output_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    replica: str | None = None
    index: int | None = Field(default=None, description="The request's place in the workload.")


# A quantile is shown only where the samples resolve it: the p99 of fewer than 100 samples is
# their maximum (one stall), the p90 of fewer than 10 likewise. Where they do not, the maximum
# is shown and labelled "max".
MIN_SAMPLES = {"p90": 10, "p99": 100}


class Percentiles(Frozen):
    p50: float | None
    p90: float | None = Field(description="None with fewer than 10 samples: see `max`.")
    p99: float | None = Field(description="None with fewer than 100 samples: see `max`.")
    max: float | None = None
    mean: float | None = Field(
        default=None,
        description="The mean (None in reports written before it was kept): steadier than the "
        "p50 where the samples fall in two groups of about the same size.",
    )
    samples: int | None = Field(
        default=None, description="Values behind the figures (None in reports written before)."
    )

    @property
    def p99_or_max(self) -> float | None:
        """The p99 where the samples resolve it, else the maximum."""
        return self.tail()[0]

    def tail(self, name: str = "p99") -> tuple[float | None, str]:
        """The named percentile where the samples resolve it, else the maximum, and which."""
        value = getattr(self, name)
        if value is not None or self.max is None:
            return value, name
        return self.max, "max"


class WorkloadReport(Frozen):
    variant: str
    workload: WorkloadName
    requests: int
    failed: int
    duration_s: float
    requests_per_s: float
    output_tokens_per_s: float
    ttft_s: Percentiles
    itl_s: Percentiles = Field(description="Inter-token latency per token (see RequestResult).")
    tpot_s: Percentiles | None = Field(
        default=None, description="Time per output token, one sample per request."
    )
    e2e_s: Percentiles | None = Field(
        default=None, description="End to end, from sending to the last byte, per request."
    )
    tokens_per_chunk: float | None = Field(
        default=None, description="Mean tokens per arrival: above 1 where a path batches tokens."
    )
    repetition: int = Field(default=0, ge=0, description="Which repetition of the run (from 0).")
    load_generator: str | None = Field(
        default=None, description="How the load generator's process was kept from starving."
    )
    cache_hit_rate: float = Field(
        description="Prefix-cache hit rate: the engine's metrics' where there are some, else "
        "cached prompt tokens / prompt tokens as the responses' usage reports them."
    )
    client_cache_hit_rate: float | None = Field(
        default=None,
        description="Cached / prompt tokens, from usage (None in reports written before it was "
        "kept apart from cache_hit_rate, which then came from usage).",
    )
    engine_metrics: EngineFigures | None = None
    engine_metrics_missing: str | None = Field(
        default=None,
        description="Why the engine's figures are missing where a run should have them (its "
        "metrics endpoint silent, or its counters short of the requests answered).",
    )
    requests_per_replica: dict[str, int]
    busiest_over_idlest: float | None = Field(
        description="Requests on the busiest replica over those on the idlest; None when some "
        "replica got none."
    )
    errors: list[str] = Field(default_factory=list, description="First few distinct errors.")
    errors_by_status: dict[str, int] = Field(
        default_factory=dict,
        description="Failed requests by HTTP status ('no answer': refused, reset or timed out).",
    )
    cached_tokens: int = Field(
        default=0, description="Prompt tokens the engine reported as cached, over the requests."
    )
    adapter_loads_per_request: float | None = Field(
        default=None,
        description="LoRA adapters the engine loaded over the requests it answered (the "
        "simulated engine's count; None without adapters).",
    )
    lost_hits: dict[str, float] | None = Field(
        default=None,
        description="Prompt tokens ideal placement serves from the cache and this run did not, "
        "over all prompt tokens, by why (the real engine's router runs).",
    )


def percentiles(values: Sequence[float]) -> Percentiles:
    """p50, and p90 and p99 where there are samples enough (`MIN_SAMPLES`); the maximum."""
    if not values:
        return Percentiles(p50=None, p90=None, p99=None, samples=0)
    ordered = sorted(values)

    def at(name: str, q: float) -> float | None:
        if len(ordered) < MIN_SAMPLES.get(name, 1):
            return None
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return Percentiles(
        p50=at("p50", 0.5), p90=at("p90", 0.9), p99=at("p99", 0.99),
        max=ordered[-1], mean=statistics.fmean(ordered), samples=len(ordered),
    )  # fmt: skip


def summarize(
    variant: str,
    workload: WorkloadName,
    results: Sequence[RequestResult],
    duration_s: float,
    replicas: int,
    engine_metrics: EngineFigures | None = None,
) -> WorkloadReport:
    done = [r for r in results if r.ok]
    prompt = sum(r.prompt_tokens for r in done)
    per_replica = Counter(r.replica or "?" for r in done)
    counts = sorted(per_replica.values())
    spread = counts[-1] / counts[0] if counts and len(counts) >= replicas else None
    client_hit_rate = sum(r.cached_tokens for r in done) / prompt if prompt else 0.0
    return WorkloadReport(
        variant=variant,
        workload=workload,
        requests=len(results),
        failed=len(results) - len(done),
        duration_s=duration_s,
        requests_per_s=len(done) / duration_s if duration_s > 0 else 0.0,
        output_tokens_per_s=sum(r.output_tokens for r in done) / duration_s if duration_s else 0.0,
        ttft_s=percentiles([r.ttft_s for r in done if r.ttft_s is not None]),
        itl_s=percentiles([gap for r in done for gap in r.token_gaps_s]),
        tpot_s=percentiles([r.tpot_s for r in done if r.tpot_s is not None]),
        e2e_s=percentiles([r.end_s - r.start_s for r in done]),
        tokens_per_chunk=(
            sum(map(sum, chunks)) / sum(map(len, chunks))
            if (chunks := [r.chunk_tokens for r in done if r.chunk_tokens])
            else None
        ),
        cache_hit_rate=(
            engine_metrics.prefix_hit_rate
            if engine_metrics is not None and engine_metrics.prefix_hit_rate is not None
            else client_hit_rate
        ),
        client_cache_hit_rate=client_hit_rate,
        engine_metrics=engine_metrics,
        requests_per_replica=dict(per_replica.most_common()),
        busiest_over_idlest=spread,
        errors=sorted({r.error for r in results if r.error})[:3],
        errors_by_status=dict(
            Counter(str(r.status) if r.status else "no answer" for r in results if not r.ok)
        ),
        cached_tokens=sum(r.cached_tokens for r in done),
        adapter_loads_per_request=(
            engine_metrics.adapter_loads / len(done)
            if engine_metrics is not None and engine_metrics.adapter_loads is not None and done
            else None
        ),
    )


class Pair(NamedTuple):
    """A ratio of two configurations' figures: (variant, workload) over (variant, workload);
    `field` a report's attribute, dotted into its parts ("ttft_s.p50")."""

    numerator: tuple[str, str]
    denominator: tuple[str, str]
    field: str = "requests_per_s"


def pair_ratios(reports: Sequence[WorkloadReport], pairs: Mapping[str, Pair]) -> dict[str, float]:
    """Each pair's ratio where both sides were measured (one repetition's reports)."""
    by: dict[tuple[str, str], WorkloadReport] = {(r.variant, r.workload): r for r in reports}
    found: dict[str, float] = {}
    for name, pair in pairs.items():
        top, bottom = by.get(pair.numerator), by.get(pair.denominator)
        if top is None or bottom is None:
            continue
        above, below = figure(top, pair.field), figure(bottom, pair.field)
        if above is not None and below:
            found[name] = above / below
    return found


def figure(report: WorkloadReport, field: str) -> float | None:
    """A report's figure by its dotted name ("requests_per_s", "ttft_s.p50")."""
    value: object = report
    for part in field.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return float(value)  # type: ignore[arg-type]


def simulated_pairs() -> dict[str, Pair]:
    """The simulated bench's comparisons: fast paths on/off; each router/power of two."""
    on, off = "fast-paths-on/power-of-two", "fast-paths-off/power-of-two"
    pairs = {}
    for w in ("decode-heavy", "prefill-heavy"):
        pairs[f"{w}: fast paths on/off, requests/s"] = Pair((on, w), (off, w))
        pairs[f"{w}: fast paths on/off, TTFT p50"] = Pair((on, w), (off, w), "ttft_s.p50")
        pairs[f"{w}: fast paths on/off, ITL p99"] = Pair((on, w), (off, w), "itl_s.p99_or_max")
    for workload in SHARED_PREFIX_WORKLOADS:
        for label, variant in ROUTERS.items():
            pairs[f"{workload}: {label}/power of two, requests/s"] = Pair(
                (variant, workload), (on, workload)
            )
    aware, blind = (ADAPTER_AWARE, ADAPTER_WORKLOAD), (on, ADAPTER_WORKLOAD)
    name = f"{ADAPTER_WORKLOAD}: adapter-aware/power of two"
    pairs[f"{name}, requests/s"] = Pair(aware, blind)
    # The mean, not the p50: about half of power of two's requests wait for an adapter load
    # and half do not, so its median falls between the two groups, in one or the other from one
    # repetition to the next (243 to 720 ms in an earlier five-repetition run).
    pairs[f"{name}, TTFT mean"] = Pair(aware, blind, "ttft_s.mean")
    pairs[f"{name}, TTFT p99"] = Pair(aware, blind, "ttft_s.p99_or_max")
    return pairs


ROUTERS = {
    "Ray prefix affinity": "fast-paths-on/prefix-affinity",
    "servestack prefix affinity": "fast-paths-on/servestack-prefix-affinity",
}
# On a LoRA profile: servestack's router, which places requests by adapter (and prefix), against
# power of two, which Ray 2.56.1 would route them by behind direct streaming.
ADAPTER_AWARE = "fast-paths-on/servestack-prefix-affinity"
ADAPTER_ROUTERS = {"power of two": "fast-paths-on/power-of-two", "adapter-aware": ADAPTER_AWARE}


def ratios(reports: Sequence[WorkloadReport]) -> dict[str, float]:
    """The headline comparisons, where both sides were measured, and the hit rates."""
    by = {(r.variant, r.workload): r for r in reports}
    found = pair_ratios(reports, simulated_pairs())
    for workload in SHARED_PREFIX_WORKLOADS:
        for label, variant in {"power of two": "fast-paths-on/power-of-two", **ROUTERS}.items():
            if (variant, workload) in by:
                found[f"{workload}: {label} cache hit rate"] = by[
                    (variant, workload)
                ].cache_hit_rate
    for label, variant in ADAPTER_ROUTERS.items():
        report = by.get((variant, ADAPTER_WORKLOAD))
        if report is not None and report.adapter_loads_per_request is not None:
            found[f"{ADAPTER_WORKLOAD}: {label} adapter loads per request"] = (
                report.adapter_loads_per_request
            )
    return found
