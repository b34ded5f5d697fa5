"""The bench chart draws latency beside throughput, the hit rate only where prompts are shared,
and the reports' own figures under full configuration names (checked on the figure's axes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.local.bench.chart import (
    ADAPTER_LOADS,
    HIT_RATE,
    ITL,
    THROUGHPUT,
    TTFT,
    build_figure,
    write_chart,
)
from serving.local.bench.stats import WorkloadReport

VARIANTS = ("fast-paths-on/power-of-two", "fast-paths-on/servestack-prefix-affinity")


def _report(variant: int, workload: str, scale: float) -> WorkloadReport:
    return WorkloadReport.model_validate(
        {
            "variant": VARIANTS[variant], "workload": workload, "requests": 24, "failed": 0,
            "duration_s": 2.0, "requests_per_s": 10.0 * scale,
            "output_tokens_per_s": 500.0 * scale,
            "ttft_s": {"p50": 0.020 * scale, "p90": 0.030 * scale, "p99": 0.050 * scale},
            "itl_s": {"p50": 0.004 * scale, "p90": 0.006 * scale, "p99": 0.009 * scale},
            "cache_hit_rate": 0.3 * scale, "client_cache_hit_rate": 0.3 * scale,
            "requests_per_replica": {"a": 12, "b": 12},
            "busiest_over_idlest": 1.0,
        }
    )  # fmt: skip


def _reports(*workloads: str) -> list[WorkloadReport]:
    return [_report(v, w, 1.0 + v + i / 10) for i, w in enumerate(workloads) for v in range(2)]


def test_latency_panels_beside_throughput_and_hit_rate_for_shared_prompts() -> None:
    reports = _reports("decode-heavy", "multi-prompt")
    figure = build_figure(reports)
    axes = {axis.get_title(): axis for axis in figure.axes}
    assert list(axes) == [THROUGHPUT, TTFT, ITL, HIT_RATE]
    ticks = [t.get_text() for t in axes[HIT_RATE].get_xticklabels()]
    assert ticks == ["multi-prompt"]
    # Bars carry the reports' figures: p50 in ms, in workload then configuration order.
    for title, value in (
        (THROUGHPUT, lambda r: r.requests_per_s),
        (TTFT, lambda r: r.ttft_s.p50 * 1e3),
        (ITL, lambda r: r.itl_s.p50 * 1e3),
    ):
        heights = sorted(p.get_height() for p in axes[title].patches)
        assert heights == pytest.approx(sorted(value(r) for r in reports)), title
    p99 = sorted(y for c in axes[TTFT].collections for _, y in c.get_offsets())
    assert p99 == pytest.approx(sorted(r.ttft_s.p99 * 1e3 for r in reports))  # type: ignore[operator]
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert legend == list(VARIANTS)  # whole names, none cut
    # The title says what ran (a panel's title once took its place).
    assert figure.get_suptitle().startswith("servestack bench --local (simulated engine on CPU")
    assert build_figure(reports, title="a run").get_suptitle().startswith("a run: bars p50")


def test_adapter_loads_panel_for_the_adapter_workload() -> None:
    reports = [
        r.model_copy(update={"adapter_loads_per_request": 0.5 / (1 + i)})
        for i, r in enumerate(_reports("many-adapters"))
    ]
    axes = {axis.get_title(): axis for axis in build_figure(reports).axes}
    assert list(axes) == [THROUGHPUT, TTFT, ITL, ADAPTER_LOADS]
    heights = [p.get_height() for p in axes[ADAPTER_LOADS].patches]
    assert heights == pytest.approx([0.5, 0.25])


def test_no_hit_rate_panel_without_shared_prompts(tmp_path: Path) -> None:
    reports = _reports("decode-heavy", "prefill-heavy")
    assert [a.get_title() for a in build_figure(reports).axes] == [THROUGHPUT, TTFT, ITL]
    write_chart(reports, tmp_path / "bench.png")
    assert (tmp_path / "bench.png").read_bytes().startswith(b"\x89PNG")
