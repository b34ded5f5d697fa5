"""The local benchmark's tables (rich): a row per configuration, each figure its median and
min–max over the run's repetitions. The JSON file carries every repetition's figures."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from rich import box
from rich.console import Console
from rich.table import Table

from serving.local.bench.repeats import (
    NO_DIFFERENCE,
    RatioSpread,
    configurations,
    median_repetition,
    spread,
)
from serving.local.bench.stats import Percentiles, WorkloadReport
from serving.observability.top import queue_ms


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value * 1e3:,.1f}"


# Piped output would fold the table at the CLI's 110 columns; a benchmark log is read whole.
PIPED_WIDTH = 170


class Column(NamedTuple):
    """A figure's column: its header (on two lines, keeping the table narrow), alignment,
    whether it is a latency (else throughput and replicas), and its figure: a number a run's
    repetitions give a median and spread of (`value`, shown by `text`), or a text taken from
    the median repetition (`cell`)."""

    header: str
    right: bool
    latency: bool
    value: Callable[[WorkloadReport], float | None] | None = None
    text: Callable[[float], str] = str
    cell: Callable[[WorkloadReport], str] | None = None
    label: Callable[[WorkloadReport], str] | None = None  # e.g. "max" where no p99 is shown


def _tail(pick: Callable[[WorkloadReport], Percentiles | None]) -> Callable[..., float | None]:
    def value(report: WorkloadReport) -> float | None:
        figures = pick(report)
        return None if figures is None else figures.tail()[0]

    return value


def _tail_label(pick: Callable[[WorkloadReport], Percentiles | None]) -> Callable[..., str]:
    def label(report: WorkloadReport) -> str:
        figures = pick(report)
        return "" if figures is None or figures.tail()[1] == "p99" else "max"

    return label


def _p50(pick: Callable[[WorkloadReport], Percentiles | None]) -> Callable[..., float | None]:
    def value(report: WorkloadReport) -> float | None:
        figures = pick(report)
        return None if figures is None else figures.p50

    return value


def _ttft(r: WorkloadReport) -> Percentiles:
    return r.ttft_s


def _itl(r: WorkloadReport) -> Percentiles:
    return r.itl_s


def _tpot(r: WorkloadReport) -> Percentiles | None:
    return r.tpot_s


def _milliseconds(value: float) -> str:
    return f"{value * 1e3:,.1f}"


COLUMNS: tuple[Column, ...] = (
    Column("req/s", True, False, lambda r: r.requests_per_s, lambda v: f"{v:,.2f}"),
    Column("out\ntok/s", True, False, lambda r: r.output_tokens_per_s, lambda v: f"{v:,.0f}"),
    Column("TTFT\np50 ms", True, True, _p50(_ttft), _milliseconds),
    # p99 where 100 samples or more make one, else the maximum, labelled so.
    Column("TTFT\np99 ms", True, True, _tail(_ttft), _milliseconds, label=_tail_label(_ttft)),
    Column("TPOT\np50 ms", True, True, _p50(_tpot), _milliseconds),
    Column("ITL\np50 ms", True, True, _p50(_itl), _milliseconds),
    Column("ITL\np99 ms", True, True, _tail(_itl), _milliseconds, label=_tail_label(_itl)),
    Column("tok/\narrival", True, True, lambda r: r.tokens_per_chunk, lambda v: f"{v:.1f}"),
    # From the engine's metrics, as the dashboard shows them (the hit rate from the responses'
    # usage where the engine exports none).
    Column("cache\nhit", True, False, lambda r: r.cache_hit_rate, lambda v: f"{v:.2f}"),
    Column("queued\np99 ms", True, True,
           cell=lambda r: queue_ms(r.engine_metrics.queue_p99_s if r.engine_metrics else None)),
    # The real engine's replicas all carry vLLM's config-hash fingerprint: requests per replica
    # cannot be told apart there, so the column shows one bucket.
    Column("requests\nper replica", False, False,
           cell=lambda r: " ".join(map(str, r.requests_per_replica.values()))),
    Column("busiest/\nidlest", True, False, lambda r: r.busiest_over_idlest,
           lambda v: f"{v:.2f}"),
    Column("failed", True, False, lambda r: r.failed, lambda v: f"{v:.0f}"),
    # LoRA adapters the engine loaded per request (a profile with adapters only).
    Column("adapter\nloads/req", True, False, lambda r: r.adapter_loads_per_request,
           lambda v: f"{v:.2f}"),
)  # fmt: skip
ADAPTER_LOADS_HEADER = "adapter\nloads/req"


def shown_columns(reports: Sequence[WorkloadReport]) -> tuple[Column, ...]:
    """The columns with figures in them: the adapter loads only where adapters were served."""
    if any(r.adapter_loads_per_request is not None for r in reports):
        return COLUMNS
    return tuple(c for c in COLUMNS if c.header != ADAPTER_LOADS_HEADER)


def figure_cell(column: Column, group: Sequence[WorkloadReport]) -> str:
    """One configuration's figure over its repetitions: the median and (low–high) where there
    are several, the median repetition's text for the columns that are not numbers."""
    shown = median_repetition(group)
    if column.value is None:
        return column.cell(shown) if column.cell is not None else ""
    values = [v for r in group if (v := column.value(r)) is not None]
    if not values:
        return "—"
    figures = spread(values)
    text = column.text(figures.median)
    if len(values) > 1:
        text += f" ({column.text(figures.low)}–{column.text(figures.high)})"
    labels = {column.label(r) for r in group} - {""} if column.label is not None else set()
    return f"{text} {' '.join(sorted(labels))}" if labels else text


def _table(
    title: str,
    reports: Sequence[WorkloadReport],
    columns: Sequence[Column],
) -> Table:
    groups = sorted(configurations(reports).items())
    rows = [
        [workload, variant, *(figure_cell(column, group) for column in columns)]
        for (variant, workload), group in sorted(groups, key=lambda item: item[0][::-1])
    ]
    # No vertical rules: they take three columns of the terminal per column of the table.
    table = Table(title=title, box=box.SIMPLE_HEAD)
    # Every cell keeps its width; only the headers wrap to make room.
    headers = [("workload", False), ("configuration", False),
               *((c.header, c.right) for c in columns)]  # fmt: skip
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
    """The bench's table, one row per configuration (the median and min–max over a run's
    repetitions), with only the columns named (headers on one line, e.g. "TTFT p50 ms") when
    some are: the README's excerpts of a committed run."""
    names = {" ".join(c.header.split()): c for c in COLUMNS}
    unknown = [h for h in headers if h not in names]
    if unknown:
        raise ValueError(f"no bench column {unknown}: the columns are {list(names)}")
    columns = [names[h] for h in headers] if headers else shown_columns(reports)
    return _table(_title(engine), reports, columns)


def ratio_text(name: str, value: float, digits: int = 2) -> str:
    """A headline ratio as the bench prints it: hit rates bare, the others as a factor."""
    bare = "hit rate" in name or "per request" in name
    return f"{value:.{digits}f}" if bare else f"{value:.{digits}f}x"


def spread_text(name: str, figure: RatioSpread, digits: int = 2) -> str:
    """A headline figure over repetitions: the median (for a ratio, of the medians), its
    min–max over the repetitions, and "no difference measured" where the two configurations'
    spreads overlap. `digits`: decimals (3 where two runs' figures are set side by side)."""
    text = ratio_text(name, figure.median, digits)
    if figure.repetitions > 1:
        low, high = ratio_text(name, figure.low, digits), ratio_text(name, figure.high, digits)
        text += f" ({low}–{high})"
    if figure.differs is False:
        text += f": {NO_DIFFERENCE}"
    return text


def print_errors(console: Console, reports: Sequence[WorkloadReport]) -> None:
    """The first few distinct errors of each report's failed requests."""
    for report in reports:
        for error in report.errors:
            console.print(f"[red]{report.variant} {report.workload}: {error}[/red]")


def print_bench(
    console: Console,
    reports: Sequence[WorkloadReport],
    ratios: Mapping[str, RatioSpread],
    engine: str = "simulated",
) -> None:
    if not console.is_terminal:
        console = Console(width=PIPED_WIDTH, file=console.file)
    title = _title(engine)
    columns = shown_columns(reports)
    table = _table(title, reports, columns)
    natural = console.measure(table, options=console.options.update_width(10_000)).maximum
    if natural <= console.width:
        console.print(table)
    else:
        # Too wide for this terminal: rich would cut every cell, the configuration names first.
        # Two tables of the same rows, the names whole in each, fit where one does not.
        throughput = [c for c in columns if not c.latency]
        console.print(_table(title + ": throughput", reports, throughput))
        console.print(_table(title + ": latency", reports, [c for c in columns if c.latency]))
    for report in reports:
        print_errors(console, [report])
        if report.engine_metrics_missing:
            # The engine's columns read "—" for this repetition; here is why.
            console.print(
                f"[yellow]{report.variant} {report.workload}, repetition {report.repetition + 1}:"
                f" no engine figures: {report.engine_metrics_missing}[/yellow]", highlight=False,
            )  # fmt: skip
    for name, figure in ratios.items():
        console.print(f"{name}: [bold]{spread_text(name, figure)}[/bold]", highlight=False)
