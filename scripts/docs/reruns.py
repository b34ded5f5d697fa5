"""Does a committed run hold? Each benchmark page's run beside the committed rerun of the same
command: per published figure both medians with their spreads, and whose median lies inside the
other run's spread: both (`serving.local.bench.repeats.reproduces`), or the rerun's inside the
committed run's only (the issue's test), or not."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from scripts.docs.regions import ROOT, Maker, anywhere

Run = tuple[dict[str, Any], Mapping[str, Any]]  # a document and its figures by name

DEFAULT_RUNS = ("results/bench/default/bench.json", "results/bench/default-rerun/bench.json")
LORA_RUNS = ("results/bench/lora/bench.json", "results/bench/lora-rerun/bench.json")
ROUTING_RUNS = (
    "results/bench/routing-9/bench.json",
    "results/bench/routing-9-rerun/bench.json",
)
PRECISE_RUNS = (
    "results/bench/precise-cores/bench.json",
    "results/bench/precise-cores-rerun/bench.json",
)
VLLM_RUNS = ("results/bench/vllm/bench.json", "results/bench/vllm-rerun/bench.json")
# The same comparison over 32 requests a configuration: each measured a few seconds.
VLLM_SHORT_RUNS = (
    "results/bench/vllm-short/bench.json",
    "results/bench/vllm-short-rerun/bench.json",
)
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


def _held(rerun_in_run: bool, run_in_rerun: bool) -> str:
    """Which way a figure reproduced: both ways is `reproduces`; the rerun's median inside the
    committed run's spread is the issue's test."""
    if rerun_in_run and run_in_rerun:
        return "both"
    if rerun_in_run:
        return "the rerun's only"
    if run_in_rerun:
        return "**the run's only**"
    return "**neither**"


def rerun_table(first: Run, second: Run) -> str:
    """The figures both runs publish, side by side, each with whether it reproduced."""
    from infra.cli.bench_report import spread_text
    from serving.local.bench.repeats import rerun_inside, within

    (doc_a, figures_a), (doc_b, figures_b) = first, second
    if doc_a["command"].split(" --out ")[0] != doc_b["command"].split(" --out ")[0]:
        raise ValueError("the rerun's command is not the run's: they cannot be compared")
    rows = [
        "| figure | run: median (min–max) | rerun: median (min–max) | whose median lies in the "
        "other's spread |",
        "| --- | ---: | ---: | :---: |",
    ]
    for name, a in figures_a.items():
        b = figures_b.get(name)
        if b is None:
            continue
        held = _held(within(a, b.median), within(b, a.median))
        # Three decimals: figures that differ in the third would read alike with two.
        a_text, b_text = spread_text(name, a, 3), spread_text(name, b, 3)
        rows.append(f"| {name} | {a_text} | {b_text} | {held} |")
    loads = [d["machine"]["load_before"][0] for d in (doc_a, doc_b)]
    n = doc_a["repetitions"]
    inside = rerun_inside(n)
    rows += [
        "",
        f"Load average over the last minute as each began: {loads[0]} (run), {loads[1]} (rerun).",
        "",
        f"Were every repetition of both runs an independent draw of one distribution, a rerun's "
        f"median would lie inside the run's min–max {inside:.0%} of the time at {n} "
        f"repetitions (`serving/local/bench/repeats.py`, `rerun_inside`), and {1 - inside:.0%} "
        "of figures would miss it by chance alone.",
    ]
    return "\n".join(rows)


def _bench_reruns(paths: tuple[str, str]) -> Maker:
    return anywhere(lambda: rerun_table(*(_bench_figures(p) for p in paths)))


REGIONS: dict[str, Maker] = {
    "default-bench-rerun": _bench_reruns(DEFAULT_RUNS),
    "lora-bench-rerun": _bench_reruns(LORA_RUNS),
    "routing-bench-rerun": _bench_reruns(ROUTING_RUNS),
    "vllm-bench-rerun": _bench_reruns(VLLM_RUNS),
    "precise-bench-rerun": _bench_reruns(PRECISE_RUNS),
    "vllm-short-bench-rerun": _bench_reruns(VLLM_SHORT_RUNS),
    "capacity-bench-rerun": anywhere(
        lambda: rerun_table(*(_capacity_figures(p) for p in CAPACITY_RUNS))
    ),
}
