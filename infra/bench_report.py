"""The local benchmark's tables (rich). The JSON file carries the same figures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.table import Table

from serving.local.bench import WorkloadReport
from serving.top import queue_ms


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1e3:,.1f}"


# Piped output would fold the table at the CLI's 110 columns; a benchmark log is read whole.
PIPED_WIDTH = 170


def print_bench(
    console: Console,
    reports: Sequence[WorkloadReport],
    ratios: Mapping[str, float],
    engine: str = "simulated",
) -> None:
    if not console.is_terminal:
        console = Console(width=PIPED_WIDTH, file=console.file)
    # The real engine's replicas all carry vLLM's config-hash fingerprint: requests per replica
    # cannot be told apart there, so the column shows one bucket.
    label = "simulated engine" if engine == "simulated" else "vLLM 0.22 CPU build, tiny model"
    table = Table(title=f"servestack bench --local ({label}; real Ray Serve and HAProxy)")
    table.add_column("workload")
    table.add_column("configuration")
    for column in ("req/s", "out tok/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99"):
        table.add_column(column + (" ms" if " p" in column else ""), justify="right")
    # From the engine's metrics, as the dashboard shows them (the hit rate from the responses'
    # usage where the engine exports none).
    table.add_column("cache hit", justify="right")
    table.add_column("queued p99 ms", justify="right")
    table.add_column("requests per replica")
    table.add_column("busiest/idlest", justify="right")
    table.add_column("failed", justify="right")
    for report in sorted(reports, key=lambda r: (r.workload, r.variant)):
        table.add_row(
            report.workload,
            report.variant,
            f"{report.requests_per_s:,.2f}",
            f"{report.output_tokens_per_s:,.0f}",
            _ms(report.ttft_s.p50),
            _ms(report.ttft_s.p99),
            _ms(report.itl_s.p50),
            _ms(report.itl_s.p99),
            f"{report.cache_hit_rate:.2f}",
            queue_ms(report.engine_metrics.queue_p99_s if report.engine_metrics else None),
            " ".join(str(n) for n in report.requests_per_replica.values()),
            "—" if report.busiest_over_idlest is None else f"{report.busiest_over_idlest:.2f}",
            str(report.failed),
        )
    console.print(table)
    for report in reports:
        for error in report.errors:
            console.print(f"[red]{report.variant} {report.workload}: {error}[/red]")
    for name, value in ratios.items():
        unit = "" if "hit rate" in name else "x"
        console.print(f"{name}: [bold]{value:.2f}{unit}[/bold]")
