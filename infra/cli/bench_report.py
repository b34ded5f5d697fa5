"""The local benchmark's tables (rich). The JSON file carries the same figures."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from serving.local.bench.stats import WorkloadReport
from serving.observability.top import queue_ms


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1e3:,.1f}"


# Piped output would fold the table at the CLI's 110 columns; a benchmark log is read whole.
PIPED_WIDTH = 170

# The figures' columns: header (on two lines, keeping the table narrow), right-aligned, latency
# (or throughput and replicas), the cell.
Column = tuple[str, bool, bool, Callable[[WorkloadReport], str]]
COLUMNS: tuple[Column, ...] = (
    ("req/s", True, False, lambda r: f"{r.requests_per_s:,.2f}"),
    ("out\ntok/s", True, False, lambda r: f"{r.output_tokens_per_s:,.0f}"),
    ("TTFT\np50 ms", True, True, lambda r: _ms(r.ttft_s.p50)),
    ("TTFT\np99 ms", True, True, lambda r: _ms(r.ttft_s.p99)),
    ("ITL\np50 ms", True, True, lambda r: _ms(r.itl_s.p50)),
    ("ITL\np99 ms", True, True, lambda r: _ms(r.itl_s.p99)),
    # From the engine's metrics, as the dashboard shows them (the hit rate from the responses'
    # usage where the engine exports none).
    ("cache\nhit", True, False, lambda r: f"{r.cache_hit_rate:.2f}"),
    ("queued\np99 ms", True, True,
     lambda r: queue_ms(r.engine_metrics.queue_p99_s if r.engine_metrics else None)),
    # The real engine's replicas all carry vLLM's config-hash fingerprint: requests per replica
    # cannot be told apart there, so the column shows one bucket.
    ("requests\nper replica", False, False,
     lambda r: " ".join(map(str, r.requests_per_replica.values()))),
    ("busiest/\nidlest", True, False,
     lambda r: "—" if r.busiest_over_idlest is None else f"{r.busiest_over_idlest:.2f}"),
    ("failed", True, False, lambda r: str(r.failed)),
)  # fmt: skip


def _table(
    title: str,
    reports: Sequence[WorkloadReport],
    columns: Sequence[Column],
) -> Table:
    rows = [
        [report.workload, report.variant, *(cell(report) for *_, cell in columns)]
        for report in sorted(reports, key=lambda r: (r.workload, r.variant))
    ]
    # No vertical rules: they take three columns of the terminal per column of the table.
    table = Table(title=title, box=box.SIMPLE_HEAD)
    # Every cell keeps its width; only the headers wrap to make room.
    headers = [("workload", False), ("configuration", False), *((c[0], c[1]) for c in columns)]
    for index, (header, right) in enumerate(headers):
        widest = max((len(row[index]) for row in rows), default=0)
        table.add_column(header, justify="right" if right else "left", min_width=widest)
    for row in rows:
        table.add_row(*row)
    return table


def _title(engine: str) -> str:
    label = "simulated engine" if engine == "simulated" else "vLLM 0.22 CPU build, tiny model"
    return f"servestack bench --local ({label}; real Ray Serve and HAProxy)"


def bench_table(
    reports: Sequence[WorkloadReport], engine: str, headers: Sequence[str] = ()
) -> Table:
    """The bench's table, with only the columns named (headers on one line, e.g. "TTFT p50
    ms") when some are: the README's excerpts of a committed run."""
    names = {" ".join(c[0].split()): c for c in COLUMNS}
    unknown = [h for h in headers if h not in names]
    if unknown:
        raise ValueError(f"no bench column {unknown}: the columns are {list(names)}")
    columns = [names[h] for h in headers] if headers else COLUMNS
    return _table(_title(engine), reports, columns)


def ratio_text(name: str, value: float) -> str:
    """A headline ratio as the bench prints it: hit rates bare, the others as a factor."""
    return f"{value:.2f}" if "hit rate" in name else f"{value:.2f}x"


def print_bench(
    console: Console,
    reports: Sequence[WorkloadReport],
    ratios: Mapping[str, float],
    engine: str = "simulated",
) -> None:
    if not console.is_terminal:
        console = Console(width=PIPED_WIDTH, file=console.file)
    title = _title(engine)
    table = _table(title, reports, COLUMNS)
    natural = console.measure(table, options=console.options.update_width(10_000)).maximum
    if natural <= console.width:
        console.print(table)
    else:
        # Too wide for this terminal: rich would cut every cell, the configuration names first.
        # Two tables of the same rows, the names whole in each, fit where one does not.
        throughput = [c for c in COLUMNS if not c[2]]
        console.print(_table(title + ": throughput", reports, throughput))
        console.print(_table(title + ": latency", reports, [c for c in COLUMNS if c[2]]))
    for report in reports:
        for error in report.errors:
            console.print(f"[red]{report.variant} {report.workload}: {error}[/red]")
    for name, value in ratios.items():
        console.print(f"{name}: [bold]{ratio_text(name, value)}[/bold]")
