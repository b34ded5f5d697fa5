"""Rewrite the README's generated tables from the code that holds their facts: the policy pack
(`policies.pack.POLICIES`), the fast-path table (`serving.fast_paths.FAST_PATHS`), the
planner's error against the held-back published runs (`tests/calibration_set.py`), the
shipped profiles' autoscaling knobs (`serving.autoscaling.knobs_table`), the dashboard's
panels, the alert policies and the metric catalog (`infra.monitoring`, `serving.metrics`),
the committed fault run's report (`results/faults/faults.json`, written by `servestack
faults`), the committed bench runs' tables and ratios (the simulated engine's
`results/bench/default/` and `results/bench/routing/`, the real engine's `results/bench/vllm/`
and `results/bench/precise/`: each `bench.json`, written by `servestack bench`; the ratios
recomputed from their reports by the bench's code), and `servestack top`'s table
(`serving.top.table`) over figures a live run showed.

    .venv/bin/python scripts/generate_docs.py          # rewrite README.md's marked regions
    .venv/bin/python scripts/generate_docs.py --check  # exit 1 if any region has drifted

Each region sits between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`;
tests/test_docs.py runs the check in CI.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def policies_table() -> str:
    from policies.pack import POLICIES

    rows = ["| policy | enforcement | holds that |", "| --- | --- | --- |"]
    for policy in POLICIES:
        level = policy.enforcement_level.value if policy.enforcement_level else "advisory"
        rows.append(f"| `{policy.name}` | {level} | {policy.description} |")
    return "\n".join(rows)


def fast_paths_table() -> str:
    from serving.fast_paths import FAST_PATHS, FORWARD_BODY_VARIABLE

    rows = ["| profile switch (`fast_paths:`) | variable on the head and every worker | what |"]
    rows.append("| --- | --- | --- |")
    for path in FAST_PATHS:
        rows.append(f"| `{path.field}` | `{path.variable}` | {path.description} |")
    rows.append(
        f"| (a prompt-reading router behind direct streaming) | `{FORWARD_BODY_VARIABLE}` | "
        "HAProxy forwards the request body to the router. |"
    )
    return "\n".join(rows)


def planner_error_table() -> str:
    sys.path.insert(0, str(ROOT / "tests"))
    from calibration_score import readme_error_table

    return readme_error_table()


def autoscaling_table() -> str:
    from serving.autoscaling import knobs_table
    from serving.loading import load_profile

    profiles = sorted((ROOT / "stacks" / "models").glob("*.yaml"))
    return knobs_table([load_profile(path) for path in profiles]).rstrip("\n")


def dashboard_panels() -> str:
    from infra.config import load_stack
    from infra.monitoring import model_panels, stack_panels
    from infra.platform import compile_stack

    (model, *_) = compile_stack(load_stack("dev", ROOT)).values()
    rows = ["| group | panel | queries (legend) |", "| --- | --- | --- |"]
    rows += [f"| per model | {p.title} | {', '.join(p.queries)} |" for p in model_panels(model)]
    rows += [f"| stack | {p.title} | {', '.join(p.queries)} |" for p in stack_panels()]
    return "\n".join(rows)


def alerts_table() -> str:
    from infra.config import load_stack
    from infra.monitoring import alert_rules, gpu_node_minimums
    from infra.platform import plan_platform

    platform = plan_platform(load_stack("dev", ROOT))
    rules = alert_rules(platform.models.values(), gpu_node_minimums(platform.gpu_pools))
    rows = ["| alert (dev stack) | for | severity | runbook |", "| --- | --- | --- | --- |"]
    rows += [f"| {r.title} | {r.for_s // 60} min | {r.severity} | {r.runbook} |" for r in rules]
    return "\n".join(rows)


def metrics_table() -> str:
    from serving.metrics import FAMILIES

    rows = ["| metric family | exporter | defined in | on the local plane |"]
    rows.append("| --- | --- | --- | --- |")
    for family in FAMILIES.values():
        local = "scraped by the test" if family.local else "cluster only"
        rows.append(f"| `{family.name}` | {family.exporter} | {family.origin} | {local} |")
    return "\n".join(rows)


FAULT_RUN = "results/faults/faults.json"


def fault_run() -> str:
    from infra.faults_cli import markdown_report
    from serving.local.fault_sessions import FaultRun

    run = FaultRun.model_validate_json((ROOT / FAULT_RUN).read_text())
    return markdown_report(run, FAULT_RUN)


def top_capture() -> str:
    """`servestack top`'s table as the CLI prints it piped, for the figures one live run showed
    (results/top/capture.json: recorded from the metric-existence test's run)."""
    from rich.console import Console

    from infra.cli_common import PIPED_WIDTH
    from serving.top import ModelFigures, table

    capture = json.loads((ROOT / "results" / "top" / "capture.json").read_text())
    console = Console(width=PIPED_WIDTH, record=True, file=io.StringIO())
    console.print(table([ModelFigures(**row) for row in capture["rows"]], capture["title"]))
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines())
    return f"```console\n$ {capture['command']}\n{text}\n```"


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

    from infra.bench_report import PIPED_WIDTH, bench_table
    from infra.bench_run import load_document

    document, reports = load_document(ROOT / path)
    shown = [r for r in reports if not workloads or r.workload in workloads]
    console = Console(width=PIPED_WIDTH, record=True, file=io.StringIO())
    console.print(bench_table(shown, document["engine"], headers))
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines())
    return text.strip("\n")


def bench_console(path: str, headers: tuple[str, ...]) -> str:
    """The committed bench run's command and its table, as a console block."""
    from infra.bench_run import load_document

    document, _ = load_document(ROOT / path)
    return f"```console\n{_shell(document['command'])}\n{bench_text(path, headers)}\n```"


def bench_ratios_table(
    path: str, columns: tuple[str, ...], rows: tuple[tuple[str, str], ...]
) -> str:
    """Ratios of the committed bench run, computed from its reports by the bench's own code:
    one column per workload (`{w}` in a row's ratio name) or one "measured" column."""
    from infra.bench_report import ratio_text
    from infra.bench_run import bench_ratios, load_document

    document, reports = load_document(ROOT / path)
    ratios = bench_ratios(document["engine"], reports, document.get("ideal_hit_rates", {}))
    heads = columns or ("measured",)
    out = [f"| same run | {' | '.join(heads)} |", "| --- |" + " ---: |" * len(heads)]
    for label, name in rows:
        cells = []
        for workload in columns or ("",):
            key = name.format(w=workload)
            cells.append(ratio_text(key, ratios[key]) if key in ratios else "—")
        out.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(out)


DEFAULT_BENCH = "results/bench/default/bench.json"
ROUTING_BENCH = "results/bench/routing/bench.json"
VLLM_BENCH = "results/bench/vllm/bench.json"
PRECISE_BENCH = "results/bench/precise/bench.json"
SHARED_PROMPTS = ("multi-prompt", "hot-prompt")


def default_bench_console() -> str:
    headers = ("req/s", "TTFT p50 ms", "ITL p99 ms", "cache hit", "requests per replica",
               "busiest/ idlest")  # fmt: skip
    return bench_console(DEFAULT_BENCH, headers)


def quickstart_bench() -> str:
    """The five-minute tour's bench: the recorded default run's command as a user types it
    (`--model`, the default output folder) and its decode-heavy lines."""
    headers = ("req/s", "TTFT p50 ms", "ITL p99 ms", "cache hit", "requests per replica")
    return "\n".join(
        (
            "```console",
            "$ servestack bench --local --model llama-3.1-8b --time-scale 0.1 --requests 48 "
            "--concurrency 16",
            bench_text(DEFAULT_BENCH, headers, ("decode-heavy",)),
            "...",
            "wrote bench/llama-3.1-8b/bench.json and bench/llama-3.1-8b/bench.png",
            "```",
        )
    )


def default_bench_fast_paths() -> str:
    rows = (("fast paths on/off, requests/s", "{w}: fast paths on/off, requests/s"),)
    return bench_ratios_table(DEFAULT_BENCH, ("decode-heavy", "prefill-heavy"), rows)


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


def vllm_bench_console() -> str:
    headers = ("req/s", "out tok/s", "TTFT p50 ms", "ITL p99 ms", "cache hit")
    return bench_console(VLLM_BENCH, headers)


def vllm_bench_ratios() -> str:
    rows = (
        ("decode-heavy, fast path/bare vLLM, requests/s (goal ≥ 0.95)",
         "decode-heavy: fast path/bare vLLM, requests/s"),
        ("decode-heavy, Serve's default path/bare vLLM, requests/s",
         "decode-heavy: fast paths off/bare vLLM, requests/s"),
        ("decode-heavy, fast paths on/off, requests/s",
         "decode-heavy: fast paths on/off, requests/s"),
        ("multi-prompt, servestack's router/power of two, requests/s",
         "multi-prompt: servestack router/power of two, requests/s"),
        ("multi-prompt, servestack's router's hit rate (vLLM)",
         "multi-prompt: servestack router cache hit rate (vLLM)"),
        ("multi-prompt, power of two's hit rate (vLLM)",
         "multi-prompt: power of two cache hit rate (vLLM)"),
    )  # fmt: skip
    return bench_ratios_table(VLLM_BENCH, (), rows)


def precise_bench_console() -> str:
    headers = ("req/s", "TTFT p50 ms", "cache hit", "requests per replica", "busiest/ idlest")
    return bench_console(PRECISE_BENCH, headers)


def precise_bench_ratios() -> str:
    from serving.local.prefix_bench import LOST, NEW_HOME

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
    """What ideal placement would give on this run's figures: each workload's run time fitted
    as fixed + cost × uncached share over the routers' runs (`prefix_bench.uncached_fit`)."""
    from infra.bench_run import bench_ratios, load_document
    from serving.local.prefix_bench import uncached_fit
    from serving.local.vllm_bench import POWER_TWO

    document, reports = load_document(ROOT / PRECISE_BENCH)
    ideal = document.get("ideal_hit_rates", {})
    ratios = bench_ratios(document["engine"], reports, ideal)
    rows = [
        "| same run, fitted | fixed | all prompts uncached | power of two's run | "
        "ideal placement's run | ideal/power of two |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for workload, rate in ideal.items():
        fit = uncached_fit(reports, workload)
        base = next(r for r in reports if (r.variant, r.workload) == (POWER_TWO, workload))
        if fit is None:
            continue
        bound = ratios[f"{workload}: ideal placement/power of two, requests/s (fitted)"]
        rows.append(
            f"| {workload} | {fit.fixed_s:.1f} s | {fit.all_uncached_s:.1f} s | "
            f"{base.duration_s:.1f} s | {fit.duration_s(rate):.1f} s | **{bound:.2f}x** |"
        )
    return "\n".join(rows)


REGIONS: dict[str, Callable[[], str]] = {
    "top": top_capture,
    "dashboard-panels": dashboard_panels,
    "alerts": alerts_table,
    "metrics": metrics_table,
    "policies": policies_table,
    "fast-paths": fast_paths_table,
    "planner-error": planner_error_table,
    "autoscaling": autoscaling_table,
    "fault-run": fault_run,
    "quickstart-bench": quickstart_bench,
    "default-bench": default_bench_console,
    "default-bench-fast-paths": default_bench_fast_paths,
    "default-bench-routers": lambda: simulated_router_ratios(DEFAULT_BENCH),
    "routing-bench": routing_bench_console,
    "routing-bench-routers": lambda: simulated_router_ratios(ROUTING_BENCH),
    "vllm-bench": vllm_bench_console,
    "vllm-bench-ratios": vllm_bench_ratios,
    "precise-bench": precise_bench_console,
    "precise-bench-ratios": precise_bench_ratios,
    "precise-bench-bound": precise_bench_bound,
}


def render(text: str) -> str:
    for name, make in REGIONS.items():
        pattern = re.compile(
            rf"(<!-- generated:{name} -->\n).*?(<!-- /generated:{name} -->)", re.DOTALL
        )
        if not pattern.search(text):
            raise SystemExit(f"README.md has no region <!-- generated:{name} -->")
        text = pattern.sub(lambda match, make=make: match[1] + make() + "\n" + match[2], text)
    return text


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    current = README.read_text()
    wanted = render(current)
    if "--check" in argv:
        if current != wanted:
            print(f"README.md's generated tables have drifted: run {__file__}", file=sys.stderr)
            return 1
        return 0
    README.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
