"""The bench chart: per workload and configuration, request throughput, time to first token and
inter-token latency per token (p50 as bars, p99 as ticks above them: the maximum where fewer
than 100 samples make no p99) side by side, and the prefix-cache hit
rate only for workloads whose prompts share a prefix (elsewhere there is nothing to hit). The
figures are the reports' own, the ones the bench table prints."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from serving.local.bench.repeats import configurations, median_repetition
from serving.local.bench.stats import WorkloadReport
from serving.local.bench.workloads import (
    ADAPTER_WORKLOAD,
    SHARED_PREFIX_WORKLOADS,
    WORKLOADS,
    WorkloadName,
)
from serving.local.runtime.app import Engine

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

THROUGHPUT = "requests / s"
TTFT = "time to first token (ms)"
ITL = "inter-token latency (ms)"
HIT_RATE = "prefix-cache hit rate (shared prompts)"
ADAPTER_LOADS = "LoRA adapter loads per request"
TAIL = "p99 (max under 100 samples)"


def _ms(value: float | None) -> float:
    return 0.0 if value is None else value * 1e3


def build_figure(
    reports: Sequence[WorkloadReport], engine: Engine = "simulated", title: str | None = None
) -> Figure:
    """The chart as a matplotlib figure, one axis per panel, titled by what it draws (`title`
    says what ran where; unset, the local bench's engine on CPU)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Over repetitions, each configuration's median one by requests/s.
    reports = [median_repetition(group) for group in configurations(reports).values()]
    workloads = [w for w in (*WORKLOADS, ADAPTER_WORKLOAD) if any(r.workload == w for r in reports)]
    shared = [w for w in workloads if w in SHARED_PREFIX_WORKLOADS]
    adapters = [w for w in workloads if w == ADAPTER_WORKLOAD]
    variants = list(dict.fromkeys(r.variant for r in reports))
    by = {(r.variant, r.workload): r for r in reports}
    panels = 4 if shared or adapters else 3
    figure, axes = plt.subplots(1, panels, figsize=(5 * panels, 5))
    width = 0.8 / max(len(variants), 1)

    def draw(
        axis: Axes,
        names: list[WorkloadName],
        bar: Callable[[WorkloadReport], float],
        tick: Callable[[WorkloadReport], float] | None = None,
    ) -> None:
        for index, variant in enumerate(variants):
            xs = [w + index * width for w in range(len(names))]
            present = [(x, by[(variant, w)]) for x, w in zip(xs, names, strict=True)
                       if (variant, w) in by]  # fmt: skip
            axis.bar([x for x, _ in present], [bar(r) for _, r in present], width,
                     label=variant, color=f"C{index}")  # fmt: skip
            if tick is not None:
                axis.scatter([x for x, _ in present], [tick(r) for _, r in present],
                             marker="_", s=300, color="black", zorder=3,
                             label=TAIL if index == 0 else None)  # fmt: skip
        axis.set_xticks([w + 0.4 - width / 2 for w in range(len(names))], names)

    throughput, ttft, itl = axes[0], axes[1], axes[2]
    draw(throughput, workloads, lambda r: r.requests_per_s)
    draw(ttft, workloads, lambda r: _ms(r.ttft_s.p50), lambda r: _ms(r.ttft_s.tail()[0]))
    draw(itl, workloads, lambda r: _ms(r.itl_s.p50), lambda r: _ms(r.itl_s.tail()[0]))
    for axis, panel in ((throughput, THROUGHPUT), (ttft, TTFT), (itl, ITL)):
        axis.set_title(panel)
    ttft.legend(*_only_p99(ttft), loc="upper right", fontsize=8)
    if shared:
        hits = axes[3]
        draw(hits, shared, lambda r: r.cache_hit_rate)
        hits.set_title(HIT_RATE)
        hits.set_ylim(0, 1)
    elif adapters:
        loads = axes[3]
        draw(loads, adapters, lambda r: r.adapter_loads_per_request or 0.0)
        loads.set_title(ADAPTER_LOADS)
    # Full configuration names in one legend under the panels: nothing cut.
    figure.legend(
        *throughput.get_legend_handles_labels(), loc="lower center",
        ncol=min(len(variants), 3), fontsize=9,
    )  # fmt: skip
    label = "simulated engine" if engine == "simulated" else "vLLM 0.22 CPU build, tiny model"
    ran = title or f"servestack bench --local ({label} on CPU, real Ray Serve)"
    figure.suptitle(
        f"{ran}: bars p50, ticks p99 (the maximum under 100 samples); each configuration's "
        "median repetition by requests/s"
    )
    figure.tight_layout(rect=(0, 0.12, 1, 1))
    return figure


def _only_p99(axis: Axes) -> tuple[list[object], list[str]]:
    handles, labels = axis.get_legend_handles_labels()
    kept = [(h, label) for h, label in zip(handles, labels, strict=True) if label == TAIL]
    return [h for h, _ in kept], [label for _, label in kept]


def write_chart(
    reports: Sequence[WorkloadReport],
    path: Path,
    engine: Engine = "simulated",
    title: str | None = None,
) -> None:
    import matplotlib.pyplot as plt

    figure = build_figure(reports, engine, title)
    figure.savefig(path, dpi=110)
    plt.close(figure)
