"""The measured runs' tables, read from the committed reports under results/: the fault run
(results/faults/faults.json, written by `servestack faults`) and the bench runs (the simulated
engine's results/bench/default/ and results/bench/routing-9/, the real engine's
results/bench/vllm/ and results/bench/precise-cores/, the LoRA run's results/bench/lora/: each
bench.json, written by `servestack bench`),
rendered by the commands' own table code, their ratios recomputed from the reports by the
bench's code."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

from scripts.docs.regions import ROOT, Maker, anywhere

FAULT_RUN = "results/faults/faults.json"
DEFAULT_BENCH = "results/bench/default/bench.json"
ROUTING_BENCH = "results/bench/routing-9/bench.json"
VLLM_BENCH = "results/bench/vllm/bench.json"
# Each replica's engine on a core of its own (serving.local.engine.cpu_binding).
PRECISE_BENCH = "results/bench/precise-cores/bench.json"
PREVIEW_TIMING = "results/preview/timing.json"
CAPACITY_BENCH = "results/bench/capacity/capacity.json"
LORA_BENCH = "results/bench/lora/bench.json"
SHARED_PROMPTS = ("multi-prompt", "hot-prompt")


def fault_run(here: Path) -> str:
    """The fault run's account, its link to the JSON written from the page it is shown on."""
    from infra.cli.faults import markdown_report
    from serving.local.faults.sessions import FaultRun

    run = FaultRun.model_validate_json((ROOT / FAULT_RUN).read_text())
    return markdown_report(run, os.path.relpath(ROOT / FAULT_RUN, ROOT / here))


def _shell(command: str, width: int = 95) -> str:
    """A command as a console block shows it: `$ ` and lines of at most `width` characters,
    broken before an option and continued with a backslash."""
    lines, line = [], "$"
    for part in re.split(r" (?=--)", command):
        if len(line) + 1 + len(part) + 2 > width and line != "$":
            lines.append(line + " \\")
            line = "   "
        line += " " + part
    return "\n".join([*lines, line])


def bench_text(path: str, headers: tuple[str, ...], workloads: tuple[str, ...] = ()) -> str:
    """The committed bench run's table (the columns named; the workloads named, or all), as the
    bench's own table code renders it."""
    from rich.console import Console

    from infra.cli.bench import load_document
    from infra.cli.bench_report import PIPED_WIDTH, bench_table

    document, reports = load_document(ROOT / path)
    shown = [r for r in reports if not workloads or r.workload in workloads]
    console = Console(width=PIPED_WIDTH, record=True, file=io.StringIO())
    console.print(bench_table(shown, document["engine"], headers))
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines())
    return text.strip("\n")


def conditions(document: dict[str, object]) -> str:
    """How a committed run was made: its repetitions, the machine's load before and after it,
    and how the load generator kept the engine from starving it (runs made before these were
    recorded say so)."""
    repetitions = document.get("repetitions")
    machine = document.get("machine")
    if not repetitions or not isinstance(machine, dict):
        return (
            "One run of each configuration, made before the bench repeated its configurations "
            "and recorded the machine's load: its figures carry no spread."
        )
    before, after = machine["load_before"], machine["load_after"]
    return (
        f"{repetitions} interleaved repetitions of each configuration on {machine['cpus']} CPU "
        f"cores; load average (1, 5, 15 min) {', '.join(map(str, before))} before the run and "
        f"{', '.join(map(str, after))} after it; the load generator's process: "
        f"{document.get('load_generator')}. Each cell is the median (min–max) over the "
        "repetitions."
    )


def bench_console(path: str, headers: tuple[str, ...]) -> str:
    """The committed bench run's command and its table, as a console block, and how the run
    was made."""
    from infra.cli.bench import load_document

    document, _ = load_document(ROOT / path)
    block = f"```console\n{_shell(document['command'])}\n{bench_text(path, headers)}\n```"
    return f"{block}\n\n{_wrapped(conditions(document))}"


def _wrapped(text: str) -> str:
    """Prose as the pages keep it: lines of at most 96 characters."""
    import textwrap

    return textwrap.fill(text, width=96, break_long_words=False, break_on_hyphens=False)


def capacity_bench() -> str:
    """The committed capacity sweep: its command, each configuration's requests/s at each
    concurrency, the knees, and how the run was made."""
    import json

    from infra.cli.capacity import curve_table

    document = json.loads((ROOT / CAPACITY_BENCH).read_text())
    made = conditions(document) + (
        f" Each level: {document['warm_up_s']:g} s of warm-up, then {document['measure_s']:g} s "
        f"counted; requests of {document['prompt_words']} words asking "
        f"{document['output_tokens']} tokens."
    )
    block = f"```console\n{_shell(document['command'])}\n```"
    return "\n".join((block, "", curve_table(document), "", _wrapped(made)))


def capacity_bench_ratios() -> str:
    import json

    from infra.cli.capacity import ratio_table

    return ratio_table(json.loads((ROOT / CAPACITY_BENCH).read_text()))


def bench_ratios_table(
    path: str, columns: tuple[str, ...], rows: tuple[tuple[str, str], ...]
) -> str:
    """Ratios of the committed bench run, computed from its reports by the bench's own code:
    one column per workload (`{w}` in a row's ratio name) or one "measured" column. Over
    repetitions, each the median (of a ratio: the ratio of medians) with its min–max, and "no
    difference measured" where the two configurations' spreads overlap."""
    from infra.cli.bench import bench_spreads, load_document
    from infra.cli.bench_report import spread_text

    document, reports = load_document(ROOT / path)
    spreads = bench_spreads(document["engine"], reports, document.get("ideal_hit_rates", {}))
    repetitions = document.get("repetitions", 1)
    corner = (
        "same run"
        if repetitions == 1
        else f"{repetitions} interleaved repetitions: median (min–max)"
    )
    heads = columns or ("measured",)
    out = [f"| {corner} | {' | '.join(heads)} |", "| --- |" + " ---: |" * len(heads)]
    for label, name in rows:
        cells = []
        for workload in columns or ("",):
            key = name.format(w=workload)
            cells.append(spread_text(key, spreads[key]) if key in spreads else "—")
        out.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(out)


def default_bench_console() -> str:
    headers = ("req/s", "TTFT p50 ms", "TPOT p50 ms", "ITL p50 ms", "ITL p99 ms", "tok/ arrival")
    return bench_console(DEFAULT_BENCH, headers)


def quickstart_bench() -> str:
    """The five-minute tour's bench: the recorded default run's command as a user types it
    (the default output folder) and its decode-heavy lines."""
    from infra.cli.bench import load_document

    document, _ = load_document(ROOT / DEFAULT_BENCH)
    command = re.sub(r" --out \S+", "", document["command"])
    model = re.search(r"--model (\S+)", command)
    folder = f"bench/{model.group(1) if model else document['model']}"
    headers = ("req/s", "TTFT p50 ms", "ITL p50 ms", "TPOT p50 ms")
    return "\n".join(
        (
            "```console",
            _shell(command),
            bench_text(DEFAULT_BENCH, headers, ("decode-heavy",)),
            "...",
            f"wrote {folder}/bench.json and {folder}/bench.png",
            "```",
        )
    )


def default_bench_fast_paths() -> str:
    """Fast paths on/off on each workload the committed run measured."""
    from infra.cli.bench import load_document

    _, reports = load_document(ROOT / DEFAULT_BENCH)
    measured = tuple(
        w for w in ("decode-heavy", "prefill-heavy") if any(r.workload == w for r in reports)
    )
    rows = (
        ("fast paths on/off, requests/s", "{w}: fast paths on/off, requests/s"),
        ("fast paths on/off, TTFT p50", "{w}: fast paths on/off, TTFT p50"),
        ("fast paths on/off, ITL p99 (or max)", "{w}: fast paths on/off, ITL p99"),
    )
    return bench_ratios_table(DEFAULT_BENCH, measured, rows)


def simulated_router_ratios(path: str) -> str:
    """The simulated engine's routers against power of two on the shared-prompt workloads."""
    rows = (
        ("servestack's router/power of two, requests/s",
         "{w}: servestack prefix affinity/power of two, requests/s"),
        ("servestack's router's hit rate", "{w}: servestack prefix affinity cache hit rate"),
        ("power of two's hit rate", "{w}: power of two cache hit rate"),
        ("Ray's PrefixCacheAffinityRouter/power of two, requests/s",
         "{w}: Ray prefix affinity/power of two, requests/s"),
        ("Ray's PrefixCacheAffinityRouter's hit rate", "{w}: Ray prefix affinity cache hit rate"),
    )  # fmt: skip
    return bench_ratios_table(path, SHARED_PROMPTS, rows)


def routing_bench_console() -> str:
    headers = ("req/s", "TTFT p50 ms", "cache hit", "requests per replica", "busiest/ idlest")
    return bench_console(ROUTING_BENCH, headers)


def routing_bench_latency() -> str:
    """The committed routing run's latencies: per token, the plain step (ITL p50) against each
    request's mean (TPOT) and the steps a miss stalls (ITL p99)."""
    headers = ("TTFT p99 ms", "TPOT p50 ms", "ITL p50 ms", "ITL p99 ms")
    return f"```console\n{bench_text(ROUTING_BENCH, headers)}\n```"


def vllm_bench_console() -> str:
    headers = ("req/s", "out tok/s", "TTFT p50 ms", "TPOT p50 ms", "ITL p50 ms", "tok/ arrival")
    return bench_console(VLLM_BENCH, headers)


def vllm_bench_ratios() -> str:
    """Serve's paths against bare vLLM and each other on one engine (the routers with the real
    engine are the precise-routing page's)."""
    rows = (
        ("fast path/bare vLLM, requests/s", "decode-heavy: fast path/bare vLLM, requests/s"),
        ("Serve's default path/bare vLLM, requests/s",
         "decode-heavy: fast paths off/bare vLLM, requests/s"),
        ("fast paths on/off, requests/s", "decode-heavy: fast paths on/off, requests/s"),
    )  # fmt: skip
    return bench_ratios_table(VLLM_BENCH, (), rows)


def precise_bench_console() -> str:
    headers = ("req/s", "TTFT p50 ms", "cache hit", "requests per replica", "busiest/ idlest")
    return bench_console(PRECISE_BENCH, headers)


def precise_bench_ratios() -> str:
    from serving.local.bench.prefix import LOST, NEW_HOME

    rows = (
        ("ideal placement's hit rate (each prompt missed once)",
         "{w}: ideal placement cache hit rate"),
        ("precise router's hit rate (vLLM)", "{w}: precise router cache hit rate (vLLM)"),
        ("precise router's hit rate/ideal (goal ≥ 0.95)", "{w}: precise router hit rate/ideal"),
        ("… short of ideal: a prompt's first request on a replica (a new home)",
         f"{{w}}: precise router hit rate short of ideal, {NEW_HOME}"),
        ("… short of ideal: a replica had served the prompt before (evicted)",
         f"{{w}}: precise router hit rate short of ideal, {LOST}"),
        ("sent-history router's hit rate (vLLM)",
         "{w}: servestack router cache hit rate (vLLM)"),
        ("power of two's hit rate (vLLM)", "{w}: power of two cache hit rate (vLLM)"),
        ("precise router/power of two, requests/s (goal ≥ 2.5)",
         "{w}: precise router/power of two, requests/s"),
        ("precise router/sent-history router, requests/s",
         "{w}: precise router/sent-history router, requests/s"),
        ("sent-history router/power of two, requests/s",
         "{w}: servestack router/power of two, requests/s"),
        ("precise router, busiest/idlest replica's requests (goal ≤ 2)",
         "{w}: precise router busiest/idlest replica"),
        ("ideal placement/power of two, requests/s (fitted below: any router's bound)",
         "{w}: ideal placement/power of two, requests/s (fitted)"),
    )  # fmt: skip
    return bench_ratios_table(PRECISE_BENCH, SHARED_PROMPTS, rows)


def precise_bench_bound() -> str:
    """What ideal placement would give on this run's figures, per repetition: each workload's
    run time fitted as fixed + cost × uncached share over the routers' runs of that repetition
    (`serving.local.bench.prefix.ideal_bound`), as the bench's headline ratio is."""
    from infra.cli.bench import load_document
    from serving.local.bench.prefix import ideal_bound
    from serving.local.bench.real_engine import POWER_TWO
    from serving.local.bench.repeats import by_repetition

    document, reports = load_document(ROOT / PRECISE_BENCH)
    ideal = document.get("ideal_hit_rates", {})
    rows = [
        "| workload, repetition | fixed | all prompts uncached | power of two's run | "
        "ideal placement's run | ideal/power of two |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for workload, rate in ideal.items():
        for repetition, group in by_repetition(reports).items():
            bound = ideal_bound(group, workload, rate, POWER_TWO)
            if bound is None:
                continue
            fit = bound.fit
            rows.append(
                f"| {workload}, {repetition + 1} | {fit.fixed_s:.1f} s | "
                f"{fit.all_uncached_s:.1f} s | {bound.power_two.duration_s:.1f} s | "
                f"{fit.duration_s(rate):.1f} s | **{bound.ratio:.2f}x** |"
            )
    return "\n".join(rows)


def lora_bench_console() -> str:
    headers = ("req/s", "TTFT p50 ms", "TTFT p99 ms", "requests per replica", "adapter loads/req")
    return bench_console(LORA_BENCH, headers)


def lora_bench_ratios() -> str:
    from serving.local.bench.workloads import ADAPTER_WORKLOAD as W

    rows = tuple(
        (label, f"{W}: {label}")
        for label in (
            "adapter-aware adapter loads per request",
            "power of two adapter loads per request",
            "adapter-aware/power of two, requests/s",
            "adapter-aware/power of two, TTFT mean",
            "adapter-aware/power of two, TTFT p99",
        )
    )
    return bench_ratios_table(LORA_BENCH, (), rows)


def preview_timing(here: Path) -> str:
    """`servestack preview`'s time beside its floor (importing the provider SDKs it imports),
    from the committed run of scripts/measure_preview.py."""
    import json

    run = json.loads((ROOT / PREVIEW_TIMING).read_text())
    median, runs = run["median_s"], run["runs_s"]
    link = os.path.relpath(ROOT / PREVIEW_TIMING, ROOT / here)
    rows = [
        ("`servestack preview " + run["stack"] + "`", "preview"),
        (f"importing the {run['provider_modules']} provider SDK modules it imports, alone",
         "provider_imports"),
        ("`servestack plan " + run["stack"] + "` (no provider)", "plan"),
    ]  # fmt: skip
    table = ["| what runs | median | runs |", "| --- | ---: | --- |"]
    for what, key in rows:
        each = ", ".join(f"{t:.2f}" for t in runs[key])
        table.append(f"| {what} | {median[key]:.2f} s | {each} |")
    share = median["provider_imports"] / median["preview"]
    return "\n".join([
        f"`{run['command']}` ([JSON]({link})), {run['machine']['cpus']} CPU cores, "
        f"load average {run['load_average_1m_before']} before it began:",
        "",
        *table,
        "",
        f"The providers' imports alone take {share:.0%} of the preview: the floor any in-process "
        f"preview of this program stands on is {median['provider_imports']:.2f} s, leaving "
        f"{median['preview'] - median['provider_imports']:.2f} s for the plan, the program "
        "under the mock engine, the policy pack and the interpreter's own start.",
    ])  # fmt: skip


REGIONS: dict[str, Maker] = {
    "preview-timing": preview_timing,
    "fault-run": fault_run,
    "quickstart-bench": anywhere(quickstart_bench),
    "default-bench": anywhere(default_bench_console),
    "default-bench-fast-paths": anywhere(default_bench_fast_paths),
    "routing-bench": anywhere(routing_bench_console),
    "routing-bench-routers": anywhere(lambda: simulated_router_ratios(ROUTING_BENCH)),
    "routing-bench-latency": anywhere(routing_bench_latency),
    "vllm-bench": anywhere(vllm_bench_console),
    "vllm-bench-ratios": anywhere(vllm_bench_ratios),
    "precise-bench": anywhere(precise_bench_console),
    "precise-bench-ratios": anywhere(precise_bench_ratios),
    "precise-bench-bound": anywhere(precise_bench_bound),
    "capacity-bench": anywhere(capacity_bench),
    "capacity-bench-ratios": anywhere(capacity_bench_ratios),
    "lora-bench": anywhere(lora_bench_console),
    "lora-bench-ratios": anywhere(lora_bench_ratios),
}
