"""`servestack bench --url` and `servestack calibrate`: the deployed service measured against its
plan, and the record that scales the plan by what was measured. The runs are
`serving.measure.run`'s; here the flags are checked, the runs told as they go and printed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from infra.cli.bench_report import PIPED_WIDTH
from infra.cli.common import console, errors, positive
from infra.platform.config import load_stack
from infra.platform.stack_config import DEFAULT_STACK
from serving.errors import ServestackError
from serving.local.bench.workloads import chosen_workloads
from serving.spec.loading import display_path
from serving.spec.profile import ModelSpec

# A --url run's default requests per workload: the calibration floor
# (`serving.measure.calibrate.MIN_REQUESTS`) is reached by the default three repeats.
URL_REQUESTS = 40


@dataclass(frozen=True)
class UrlOptions:
    """The flags of a --url run, checked."""

    url: str
    requests: int
    concurrency: int
    sweep: bool
    rate: float | None
    seed: int
    max_seconds: float | None
    repeats: int
    workloads: tuple[str, ...]
    prefixes: int
    prefix_tokens: int
    hot_share: float


def check_modes(sweep: bool, rate: float | None, max_seconds: float | None) -> None:
    if sweep and rate is not None:
        raise ServestackError(
            "command line", "--sweep/--rate", "a run is a sweep or an open loop, not both",
            "drop one: --sweep (closed loops at 1, 2, 4, ... clients) or --rate R (Poisson)",
        )  # fmt: skip
    if rate is not None:
        positive(rate, "--rate")
    if max_seconds is not None:
        positive(max_seconds, "--max-seconds")


class _Shown:
    """Progress on stderr: each load as it starts, then every tenth of its requests."""

    def __init__(self, quiet: bool) -> None:
        self.quiet, self.total, self.count = quiet, 0, 0

    def load(self, name: str, requests: int) -> None:
        self.total, self.count = requests, 0
        if not self.quiet:
            errors.print(f"{name}: {requests} requests", highlight=False)

    def done(self) -> None:
        self.count += 1
        step = max(1, self.total // 10)
        if not self.quiet and (self.count % step == 0 or self.count == self.total):
            errors.print(f"  {self.count}/{self.total}", highlight=False)


def run_url(
    spec: ModelSpec, stack: str, options: UrlOptions, out_dir: Path, command: str, as_json: bool
) -> None:
    """Run the bench against the deployed service; write bench.json and bench.png; print."""
    from serving.local.bench import chart
    from serving.measure import document, target
    from serving.measure.run import Mode, Progress, failed, run_bench

    url = target.base_url(options.url)
    workloads = chosen_workloads(
        options.workloads, options.requests, options.concurrency, options.prefixes,
        options.prefix_tokens, options.hot_share,
    )  # fmt: skip
    if options.sweep:
        mode = Mode(name="sweep")
    elif options.rate is not None:
        mode = Mode(name="open", rate=options.rate, seed=options.seed)
    else:
        mode = Mode(name="closed", concurrency=options.concurrency)
    if target.api_key() is None and url.startswith("https"):
        errors.print(f"warning: ${target.KEY_VARIABLE} is not set; the edge will refuse")
    vllm = target.server_vllm_version(url)
    shown = _Shown(as_json)
    try:
        measured = run_bench(
            url, spec, workloads, mode, options.repeats, options.max_seconds,
            Progress(shown.load, shown.done),
        )  # fmt: skip
    except KeyboardInterrupt:
        errors.print("stopped: the load generator is ended; nothing written", highlight=False)
        raise typer.Exit(130) from None
    written = document.document(
        command=command, url=url, spec=spec, stack=stack, mode=mode.model_dump(),
        repeats=options.repeats, max_seconds=options.max_seconds, vllm=vllm,
        workloads={name: w.model_dump() for name, w in workloads.items()}, measured=measured,
    )  # fmt: skip
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench.json").write_text(json.dumps(written, indent=2) + "\n")
    chart.write_chart(
        document.reports_of(measured), out_dir / "bench.png",
        title=f"servestack bench --url {url} ({spec.name})",
    )  # fmt: skip
    if as_json:
        print(json.dumps(written, indent=2))
    else:
        print_summary(console, written["summary"])
        console.print(f"wrote {out_dir / 'bench.json'} and {out_dir / 'bench.png'}")
    lost = failed(measured)
    if lost:
        errors.print(f"error: {lost} requests failed; by status in bench.json", highlight=False)
        raise typer.Exit(1)


def _spread(spread: dict[str, float] | None, scale: float) -> str:
    if spread is None:
        return "—"
    median, low, high = (spread[k] * scale for k in ("median", "low", "high"))
    return f"{median:,.1f} ({low:,.1f}–{high:,.1f})"


def _cell(row: dict[str, Any], figure: str, scale: float = 1e3) -> str:
    """The measured figure, and under it the plan's estimate with measured / estimated."""
    shown = _spread(row["figures"].get(figure), scale)
    estimate, ratio = row["estimates"].get(figure), row["ratios"].get(figure)
    if estimate is None or ratio is None:
        return shown
    return f"{shown}\nplan {estimate * scale:,.1f}, x{ratio:.2f}"


def print_summary(shown_on: Console, rows: Sequence[dict[str, Any]]) -> None:
    """A row per load and workload: each figure's median (min–max) over repetitions, under it
    the plan's estimate and measured / estimated."""
    table = Table(box=box.SIMPLE, title="median (min–max) over repetitions; plan, x measured/plan")
    for header in (
        "load", "workload", "TTFT p50 ms", "ITL p50 ms", "TPOT p50 ms", "e2e p50 ms",
        "e2e tail ms", "req/s", "output tok/s", "errors", "cached tokens",
    ):  # fmt: skip
        table.add_column(header)
    for row in rows:
        figures = row["figures"]
        tail = next((k for k in figures if k.startswith("e2e_") and k != "e2e_p50"), "")
        table.add_row(
            row["load"], row["workload"], _cell(row, "ttft_p50"), _cell(row, "itl_p50"),
            _cell(row, "tpot_p50"), _spread(figures["e2e_p50"], 1e3),
            f"{tail[4:]} {_spread(figures.get(tail), 1e3)}" if tail else "—",
            _cell(row, "requests_per_s", 1.0), _cell(row, "output_tokens_per_s", 1.0),
            ", ".join(f"{k}: {v}" for k, v in row["errors_by_status"].items()) or "0",
            f"{row['cached_tokens']:,}",
        )  # fmt: skip
    if not shown_on.is_terminal:  # a log is read whole: no folded columns
        shown_on = Console(file=shown_on.file, width=PIPED_WIDTH)
    shown_on.print(table)


def calibrate_command(
    run: Annotated[Path, typer.Argument(help="The bench.json of a `servestack bench --url` run.")],
    stack: Annotated[str, typer.Option(help="The stack serving the run's model.")] = DEFAULT_STACK,
) -> None:
    """Write stacks/calibrations/MODEL.yaml from a `bench --url` run: measured / estimated per
    metric, which `servestack plan` then multiplies its estimates by for that model.

    Refused, with nothing written, for a run with failed requests, fewer than 100 answered
    requests per workload, or no single concurrency (a sweep or an open loop).
    """
    from serving.measure import calibrate
    from serving.measure.document import load_run

    loaded = load_stack(stack)
    data, _ = load_run(run)
    served = {spec.name: profile for profile, spec in loaded.profiles.items()}
    if data.get("model") not in served:
        raise ServestackError(
            display_path(loaded.path), "servestack:models",
            f"no model of the stack serves '{data.get('model')}', which {display_path(run)} "
            "measured",
            f"pass the stack that serves it (--stack), or one of: {', '.join(sorted(served))}",
        )  # fmt: skip
    profile = served[data["model"]]
    record = calibrate.calibration(run, loaded.profiles[profile])
    path = calibrate.write(record, loaded.path.parent, profile)
    ratios = ", ".join(f"{name} x{value:.3g}" for name, value in record.ratios.model_dump().items())
    console.print(f"wrote {display_path(path)}: {ratios}", highlight=False)
    console.print(f"`servestack plan {stack}` now scales {record.model}'s estimates by them")
