"""`servestack local capacity` (and `capacity --local`): the serving path's own capacity on a
zero-cost simulated engine, fast paths on against off against a bare server of the same engine
(`serving.local.bench.capacity`), each swept at rising concurrency, interleaved over
repetitions. Writes capacity.json; prints each configuration's curve, its knee and the
capacities' ratios with their spreads."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from infra.cli.common import (
    LocalFlag,
    StackArg,
    console,
    errors,
    local_modules,
    one_model,
    positive,
    require_local,
)
from infra.platform.config import load_stack
from infra.platform.stack_config import DEFAULT_STACK
from serving.errors import ServestackError
from serving.spec.profile import ModelSpec

if TYPE_CHECKING:
    from serving.local.bench.repeats import Spread

LABELS = {
    "fast-paths-on": "fast paths on",
    "fast-paths-off": "fast paths off",
    "bare-engine": "bare engine",
}


def run(
    spec: ModelSpec,
    repeats: int,
    levels: Sequence[int],
    warm_up_s: float,
    measure_s: float,
    out_dir: Path,
    command: str,
    quiet: bool,
) -> dict[str, Any]:
    """Every configuration, interleaved over `repeats`; the document capacity.json holds."""
    from infra.cli.bench import machine_load
    from serving.local.bench import capacity
    from serving.local.bench.runner import retried_start

    settings = capacity.zero_cost(spec)
    load_before = machine_load()
    swept: dict[str, list[int]] = {}
    points: list[capacity.Point] = []
    isolation = ""

    def shown(point: capacity.Point) -> None:
        if not quiet:
            errors.print(
                f"repetition {point.repetition} {point.configuration} concurrency "
                f"{point.concurrency}: {point.requests_per_s:,.1f} requests/s",
                highlight=False,
            )

    for repetition in range(repeats):
        for configuration in capacity.CONFIGURATIONS:
            log = out_dir / "logs" / f"{configuration}-{repetition}.log"
            sweep = functools.partial(
                capacity.sweep, configuration, spec, settings, log,
                swept.get(configuration, levels), repetition, warm_up_s, measure_s,
                adaptive=configuration not in swept, on_point=shown,
            )  # fmt: skip
            found, isolation = retried_start(sweep)
            swept.setdefault(configuration, [p.concurrency for p in found])
            points += found
    document = {
        "command": command,
        "model": spec.name,
        "repetitions": repeats,
        "warm_up_s": warm_up_s,
        "measure_s": measure_s,
        "prompt_words": capacity.PROMPT_WORDS,
        "output_tokens": capacity.OUTPUT_TOKENS,
        "simulation": settings.model_dump(),
        "machine": {"cpus": _cpus(), "load_before": load_before, "load_after": machine_load()},
        "load_generator": isolation,
        "curves": [c.model_dump() for c in capacity.curves(points)],
        "ratios": {n: r.model_dump() for n, r in capacity.capacity_ratios(points).items()},
        "points": [p.model_dump() for p in points],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "capacity.json").write_text(json.dumps(document, indent=2) + "\n")
    return document


def _cpus() -> int | None:
    import os

    return os.cpu_count()


def _range(figure: Spread, scale: float = 1.0, digits: int = 0) -> str:
    """A median and, over several repetitions, its min–max."""

    def shown(value: float) -> str:
        return f"{value * scale:,.{digits}f}"

    text = shown(figure.median)
    if len(figure.values) < 2:
        return text
    return f"{text} ({shown(figure.low)}–{shown(figure.high)})"


def curve_table(document: dict[str, Any]) -> str:
    """The curves side by side as a markdown table, computed from the document's points:
    requests/s per concurrency, median (min–max) over repetitions; then each curve's knee and
    capacity."""
    from serving.local.bench.capacity import Point, curves

    found = curves([Point.model_validate(p) for p in document["points"]])
    levels = sorted({level.concurrency for c in found for level in c.levels})
    heads = [LABELS[c.configuration] for c in found]
    rows = [
        f"| requests in flight | {' | '.join(heads)} |",
        "| ---: |" + " ---: |" * len(found),
    ]
    for concurrency in levels:
        cells = []
        for curve in found:
            level = next((lv for lv in curve.levels if lv.concurrency == concurrency), None)
            figure = None if level is None else level.requests_per_s
            cells.append("—" if figure is None else _range(figure))
        rows.append(f"| {concurrency} | {' | '.join(cells)} |")
    rows.append("| knee (requests in flight) | " + " | ".join(str(c.knee) for c in found) + " |")
    peaks = [
        _range(c.peak.requests_per_s) + (" still rising" if c.still_rising else "") for c in found
    ]
    rows.append("| highest median, requests/s | " + " | ".join(peaks) + " |")
    alone = []
    for curve in found:
        first = curve.levels[0].latency_p50_s
        alone.append("—" if first is None else _range(first, scale=1e3, digits=1))
    lowest = min(level.concurrency for c in found for level in c.levels[:1])
    rows.append(f"| a request's time, p50 ms, {lowest} in flight | " + " | ".join(alone) + " |")
    return "\n".join(rows)


def ratio_table(document: dict[str, Any]) -> str:
    """The capacities' ratios: ratio of medians (min–max of the repetitions' ratios)."""
    from infra.cli.bench_report import spread_text
    from serving.local.bench.capacity import Point, capacity_ratios

    rows = [
        f"| {document['repetitions']} interleaved repetitions | median (min–max) | "
        "capacities, requests/s (each repetition's highest) |",
        "| --- | ---: | ---: |",
    ]
    points = [Point.model_validate(p) for p in document["points"]]
    for name, figure in capacity_ratios(points).items():
        sides = [side for side in (figure.numerator, figure.denominator) if side is not None]
        each = " against ".join(f"{side.low:,.0f}–{side.high:,.0f}" for side in sides)
        label = name.removeprefix("capacity: ")
        rows.append(f"| {label}, requests/s | {spread_text(name, figure)} | {each} |")
    return "\n".join(rows)


def capacity_command(
    stack: StackArg = DEFAULT_STACK,
    model: Annotated[str | None, typer.Option(help="The stack model whose path is swept.")] = None,
    local: LocalFlag = False,
    repeats: Annotated[
        int, typer.Option(help="Sweeps of each configuration, interleaved (A B C A B C ...).")
    ] = 3,
    level: Annotated[
        list[int] | None,
        typer.Option(
            help="Requests in flight to sweep, rising [default: 1 2 4 ... 128]; the first "
            "repetition stops where requests/s stops rising."
        ),
    ] = None,
    warm_up: Annotated[float, typer.Option(help="Seconds of each level not counted.")] = 1.0,
    measure: Annotated[float, typer.Option(help="Seconds of each level counted.")] = 4.0,
    out: Annotated[
        Path | None, typer.Option(help="Output directory. [default: bench/MODEL-capacity]")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print capacity.json's document instead.")
    ] = False,
) -> None:
    """The serving path's own capacity: a zero-cost simulated engine behind the fast paths,
    behind Serve's default path and behind a bare server, each swept at rising concurrency
    until requests/s stops rising. Writes capacity.json."""
    require_local(local, "capacity")
    loaded = load_stack(stack)
    spec = one_model(loaded.profiles, model, loaded.path)
    positive(repeats, "--repeats")
    positive(measure, "--measure")
    positive(warm_up, "--warm-up", allow_zero=True)
    levels = sorted(set(level or ()))
    for value in levels:
        positive(value, "--level")
    if level and levels != list(level):
        raise ServestackError(
            "command line", "--level", f"levels {list(level)} do not rise",
            f"give each level once, rising: {' '.join(f'--level {v}' for v in levels)}",
        )  # fmt: skip
    local_modules()
    from serving.local.bench.capacity import DEFAULT_LEVELS
    from serving.local.bench.runner import VariantStartError

    out_dir = out if out is not None else Path("bench") / f"{spec.name}-capacity"
    try:
        document = run(
            spec, repeats, levels or DEFAULT_LEVELS, warm_up, measure, out_dir,
            " ".join(["servestack", *sys.argv[1:]]), quiet=as_json,
        )  # fmt: skip
    except VariantStartError as exc:
        errors.print(f"error: {exc}", highlight=False, markup=False)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(document, indent=2))
        return
    console.print(f"servestack capacity ({spec.name}, zero-cost simulated engine):")
    console.print(curve_table(document), highlight=False)
    console.print(ratio_table(document), highlight=False)
    failed = sum(p["failed"] for p in document["points"])
    if failed:
        errors.print(f"error: {failed} requests failed; the logs are in {out_dir / 'logs'}")
        raise typer.Exit(1)
    console.print(f"wrote {out_dir / 'capacity.json'}", highlight=False)
