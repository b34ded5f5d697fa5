"""The engine's own metrics over a benchmark's load: what the dashboard and `servestack top`
would show for the same requests.

The benchmark scrapes the local run's Ray (its registration in `serving.local.runtime.observed`)
once the warm-up's requests show in the engine's counters and again once the load's do, and turns
the difference into the dashboard's figures with `serving.observability.top`'s arithmetic:
prefix-cache hit rate, time queued for a batch and TTFT, percentiles as Prometheus interpolates
them.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from serving.frozen import Frozen
from serving.local.engine.metrics import ADAPTER_LOADS
from serving.local.runtime.observed import running
from serving.observability import top
from serving.observability.metrics import engine as engine_metric


class EngineFigures(Frozen):
    """The engine's metrics over one workload's load, as the dashboard computes them."""

    requests: int = Field(description="Requests the engine finished during the load.")
    prefix_hit_rate: float | None = Field(description="Prefix-cache hits / queries, in tokens.")
    queue_p99_s: float | None = Field(
        description="99th percentile of the time a request waited for a batch (vLLM's buckets "
        "start at 0.3 s: below that, only that bound is known)."
    )
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    adapter_loads: int | None = Field(
        default=None,
        description="LoRA adapters the simulated engine loaded during the load (None: no "
        "adapters served, or an engine that does not count them).",
    )


# Ray's processes push metrics every second on a local run; a few pushes is plenty.
SETTLE_TIMEOUT_S = 30.0
SETTLE_POLL_S = 0.5


def metrics_urls(endpoint: str) -> list[str]:
    """The metrics endpoints of the local run serving `endpoint` (none for a bare vLLM)."""
    return [url for run in running() if run.endpoint == endpoint for url in run.metrics.values()]


def counted(snapshot: top.Snapshot, name: str, model: str) -> float | None:
    """A counter's value for `model`, summed over replicas; None where no replica exports it."""
    values = [
        value
        for (series, labels), value in snapshot.samples.items()
        if series == name and dict(labels).get("model_name") == model
    ]
    return sum(values) if values else None


def finished(snapshot: top.Snapshot, model: str) -> float:
    """Requests the engine has finished for `model`, by its own counter."""
    return counted(snapshot, engine_metric("vllm:request_success"), model) or 0.0


def settled(urls: Sequence[str], model: str, at_least: int) -> top.Snapshot | str:
    """A scrape once the engine's metrics count `at_least` finished requests: Ray exports what
    its processes pushed, so requests just answered may not show yet. If they never do within
    `SETTLE_TIMEOUT_S`, why not, in words: the last scrape's count, or why it failed."""

    def read() -> top.Snapshot | str:
        try:
            return top.snapshot(urls)
        except top.SCRAPE_ERRORS as exc:
            return f"the last scrape of Ray's metrics {top.unreachable(exc)}"

    def counts_them(reading: top.Snapshot | str) -> bool:
        return not isinstance(reading, str) and finished(reading, model) >= at_least

    last = top.patiently(read, counts_them, SETTLE_TIMEOUT_S, SETTLE_POLL_S)
    if last is None:
        return "no scrape was made"
    if isinstance(last, str):
        return f"{last}, {SETTLE_TIMEOUT_S:.0f} s on"
    if counts_them(last):
        return last
    count = finished(last, model)
    return (
        f"the engine's counter showed {count:.0f} of {at_least} finished requests, "
        f"{SETTLE_TIMEOUT_S:.0f} s on"
    )


def engine_figures(before: top.Snapshot, after: top.Snapshot, model: str) -> EngineFigures | None:
    """The dashboard's figures for `model` between two scrapes."""
    rows = [row for row in top.figures(before, after) if row.model == model]
    if not rows:
        return None
    (row,) = rows
    loads_before = counted(before, ADAPTER_LOADS.scraped, model)
    loads_after = counted(after, ADAPTER_LOADS.scraped, model)
    return EngineFigures(
        requests=round(finished(after, model) - finished(before, model)),
        prefix_hit_rate=row.prefix_hit_rate,
        queue_p99_s=row.queue_p99_s,
        ttft_p50_s=row.ttft_p50_s,
        ttft_p99_s=row.ttft_p99_s,
        adapter_loads=(None if loads_after is None else round(loads_after - (loads_before or 0.0))),
    )


def figures_after(
    urls: Sequence[str], model: str, before: top.Snapshot | str, answered: int
) -> EngineFigures | str:
    """The engine's figures from `before` to once it counts the `answered` requests more; where
    there are none, why not."""
    if isinstance(before, str):
        return f"before the load, {before}"
    after = settled(urls, model, round(finished(before, model)) + answered)
    if isinstance(after, str):
        return f"after the load, {after}"
    figures = engine_figures(before, after, model)
    return figures if figures is not None else f"no engine figures for {model} in the scrapes"
