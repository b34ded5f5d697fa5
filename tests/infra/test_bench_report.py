"""The bench's table in a terminal: every configuration's name whole and every figure in full,
in one table where the terminal holds it, in two (throughput; latency) where it does not."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from infra.bench_report import print_bench
from serving.loading import load_profile
from serving.local.bench import default_variants
from serving.local.bench_stats import WorkloadReport

MODELS = Path(__file__).resolve().parents[2] / "stacks" / "models"


def _reports() -> list[WorkloadReport]:
    variants = default_variants(load_profile(MODELS / "llama-3.1-8b.yaml"))
    return [
        WorkloadReport.model_validate(
            {
                "variant": v.name, "workload": w, "requests": 24, "failed": i % 2,
                "duration_s": 2.0, "requests_per_s": 1234.5 + i,
                "output_tokens_per_s": 56789.0 + i,
                "ttft_s": {"p50": 1.2345 + i, "p90": 2.0, "p99": 3.4567 + i},
                "itl_s": {"p50": 0.0456, "p90": 0.05, "p99": 0.0789 + i},
                "cache_hit_rate": 0.75, "client_cache_hit_rate": 0.75,
                "requests_per_replica": {"a": 12, "b": 12},
                "busiest_over_idlest": 1.0,
            }
        )
        for i, (v, w) in enumerate((v, w) for v in variants for w in v.workloads)
    ]  # fmt: skip


def _printed(width: int, reports: list[WorkloadReport]) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=width, color_system=None)
    print_bench(console, reports, {})
    return out.getvalue()


@pytest.mark.parametrize(("width", "tables"), [(120, 2), (200, 1)])
def test_names_and_figures_are_whole_in_a_terminal(width: int, tables: int) -> None:
    reports = _reports()
    text = _printed(width, reports)
    assert text.count("servestack bench --local") == tables
    assert max(map(len, text.splitlines())) <= width
    rows = [line for line in text.splitlines() if " fast-paths-" in line]
    assert "…" not in "".join(rows), "no cell cut"
    for report in reports:
        mine = [row for row in rows if f" {report.workload} " in row
                and f" {report.variant} " in row]  # fmt: skip
        assert len(mine) == tables, "the row, names whole, in each table"
        cells = "".join(mine)
        for figure in (
            f"{report.requests_per_s:,.2f}", f"{report.output_tokens_per_s:,.0f}",
            f"{report.ttft_s.p99 * 1e3:,.1f}", f"{report.itl_s.p99 * 1e3:,.1f}",  # type: ignore[operator]
            "12 12", f" {report.failed} ",
        ):  # fmt: skip
            assert figure in cells, (figure, mine)
