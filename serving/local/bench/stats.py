"""The bench's figures: what a client saw of each request, and each configuration's report on a
workload (throughput, latency percentiles, hit rate, spread over replicas) with the headline
ratios between configurations."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import Field

from serving.frozen import Frozen
from serving.local.bench.metrics import EngineFigures
from serving.local.bench.workloads import SHARED_PREFIX_WORKLOADS, WorkloadName


class RequestResult(Frozen):
    ok: bool
    error: str | None = None
    start_s: float
    end_s: float
    ttft_s: float | None = None
    token_gaps_s: list[float] = Field(default_factory=list)
    output_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    replica: str | None = None
    index: int | None = Field(default=None, description="The request's place in the workload.")


class Percentiles(Frozen):
    p50: float | None
    p90: float | None
    p99: float | None


class WorkloadReport(Frozen):
    variant: str
    workload: WorkloadName
    requests: int
    failed: int
    duration_s: float
    requests_per_s: float
    output_tokens_per_s: float
    ttft_s: Percentiles
    itl_s: Percentiles
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
    requests_per_replica: dict[str, int]
    busiest_over_idlest: float | None = Field(
        description="Requests on the busiest replica over those on the idlest; None when some "
        "replica got none."
    )
    errors: list[str] = Field(default_factory=list, description="First few distinct errors.")
    lost_hits: dict[str, float] | None = Field(
        default=None,
        description="Prompt tokens ideal placement serves from the cache and this run did not, "
        "over all prompt tokens, by why (the real engine's router runs).",
    )


def _percentiles(values: Sequence[float]) -> Percentiles:
    if not values:
        return Percentiles(p50=None, p90=None, p99=None)
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return Percentiles(p50=at(0.5), p90=at(0.9), p99=at(0.99))


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
        ttft_s=_percentiles([r.ttft_s for r in done if r.ttft_s is not None]),
        itl_s=_percentiles([gap for r in done for gap in r.token_gaps_s]),
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
    )


def ratios(reports: Sequence[WorkloadReport]) -> dict[str, float]:
    """The headline comparisons, where both sides were measured."""
    by = {(r.variant, r.workload): r for r in reports}
    found: dict[str, float] = {}

    def ratio(key: str, a: tuple[str, str], b: tuple[str, str], field: str) -> None:
        if a in by and b in by and getattr(by[b], field):
            found[key] = getattr(by[a], field) / getattr(by[b], field)

    on, off = "fast-paths-on/power-of-two", "fast-paths-off/power-of-two"
    for workload in ("decode-heavy", "prefill-heavy"):
        ratio(f"{workload}: fast paths on/off, requests/s", (on, workload), (off, workload),
              "requests_per_s")  # fmt: skip
    routers = {
        "Ray prefix affinity": "fast-paths-on/prefix-affinity",
        "servestack prefix affinity": "fast-paths-on/servestack-prefix-affinity",
    }
    for workload in SHARED_PREFIX_WORKLOADS:
        for label, variant in routers.items():
            ratio(f"{workload}: {label}/power of two, requests/s",
                  (variant, workload), (on, workload), "requests_per_s")  # fmt: skip
        for label, variant in {"power of two": on, **routers}.items():
            if (variant, workload) in by:
                found[f"{workload}: {label} cache hit rate"] = by[
                    (variant, workload)
                ].cache_hit_rate
    return found
