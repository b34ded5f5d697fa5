"""Rewrite the README's generated tables from the code that holds their facts: the policy pack
(`policies.pack.POLICIES`), the fast-path table (`serving.fast_paths.FAST_PATHS`), the
planner's error against the held-back published runs (`tests/calibration_set.py`), the
shipped profiles' autoscaling knobs (`serving.autoscaling.knobs_table`), the dashboard's
panels, the alert policies and the metric catalog (`infra.monitoring`, `serving.metrics`),
the committed fault run's report (`docs/faults/faults.json`, written by `servestack faults`),
and `servestack top`'s table (`serving.top.table`) over figures a live run showed.

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


FAULT_RUN = "docs/faults/faults.json"


def fault_run() -> str:
    from infra.faults_cli import markdown_report
    from serving.local.fault_sessions import FaultRun

    run = FaultRun.model_validate_json((ROOT / FAULT_RUN).read_text())
    return markdown_report(run, FAULT_RUN)


def top_capture() -> str:
    """`servestack top`'s table as the CLI prints it piped, for the figures one live run showed
    (docs/top/capture.json: recorded from the metric-existence test's run)."""
    from rich.console import Console

    from infra.cli_common import PIPED_WIDTH
    from serving.top import ModelFigures, table

    capture = json.loads((ROOT / "docs" / "top" / "capture.json").read_text())
    console = Console(width=PIPED_WIDTH, record=True, file=io.StringIO())
    console.print(table([ModelFigures(**row) for row in capture["rows"]], capture["title"]))
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines())
    return f"```console\n$ {capture['command']}\n{text}\n```"


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
