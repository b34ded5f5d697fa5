"""Does a committed run hold? Each benchmark page's run beside the committed rerun of the same
command: per published figure both medians with their spreads, and whether each median lies
inside the other run's spread (`serving.local.bench.repeats.reproduces`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from scripts.docs.regions import ROOT, Maker, anywhere

Run = tuple[dict[str, Any], Mapping[str, Any]]  # a document and its figures by name

DEFAULT_RUNS = ("results/bench/default/bench.json", "results/bench/default-rerun/bench.json")
LORA_RUNS = ("results/bench/lora/bench.json", "results/bench/lora-rerun/bench.json")
CAPACITY_RUNS = (
    "results/bench/capacity/capacity.json",
    "results/bench/capacity-rerun/capacity.json",
)


def _bench_figures(path: str) -> Run:
    from infra.cli.bench import bench_spreads, load_document

    document, reports = load_document(ROOT / path)
    spreads = bench_spreads(document["engine"], reports, document.get("ideal_hit_rates", {}))
    return document, spreads


def _capacity_figures(path: str) -> Run:
    from serving.local.bench.capacity import Point, capacity_ratios

    document = json.loads((ROOT / path).read_text())
    points = [Point.model_validate(p) for p in document["points"]]
    return document, capacity_ratios(points)


def rerun_table(first: Run, second: Run) -> str:
    """The figures both runs publish, side by side, each with whether it reproduced."""
    from infra.cli.bench_report import spread_text
    from serving.local.bench.repeats import reproduces

    (doc_a, figures_a), (doc_b, figures_b) = first, second
    if doc_a["command"].split(" --out ")[0] != doc_b["command"].split(" --out ")[0]:
        raise ValueError("the rerun's command is not the run's: they cannot be compared")
    rows = [
        "| figure | run: median (min–max) | rerun: median (min–max) | each median within the "
        "other's spread |",
        "| --- | ---: | ---: | :---: |",
    ]
    for name, a in figures_a.items():
        b = figures_b.get(name)
        if b is None:
            continue
        held = "yes" if reproduces(a, b) else "**no**"
        rows.append(f"| {name} | {spread_text(name, a)} | {spread_text(name, b)} | {held} |")
    loads = [d["machine"]["load_before"][0] for d in (doc_a, doc_b)]
    rows += [
        "",
        f"Load average over the last minute as each began: {loads[0]} (run), {loads[1]} (rerun).",
    ]
    return "\n".join(rows)


REGIONS: dict[str, Maker] = {
    "default-bench-rerun": anywhere(
        lambda: rerun_table(*(_bench_figures(p) for p in DEFAULT_RUNS))
    ),
    "lora-bench-rerun": anywhere(lambda: rerun_table(*(_bench_figures(p) for p in LORA_RUNS))),
    "capacity-bench-rerun": anywhere(
        lambda: rerun_table(*(_capacity_figures(p) for p in CAPACITY_RUNS))
    ),
}
