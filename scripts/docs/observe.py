"""The observability pages' tables: the metric catalog (`serving.observability.metrics`), the
dashboard's panels and the alert policies (`infra.platform.monitoring`, for the dev stack), and
`servestack top`'s table (`serving.observability.top`) over the figures one live run showed
(results/top/capture.json)."""

from __future__ import annotations

import io
import json

from scripts.docs.regions import ROOT, Maker, anywhere

TOP_CAPTURE = ROOT / "results" / "top" / "capture.json"


def metrics_table() -> str:
    from serving.observability.metrics import FAMILIES

    rows = ["| metric family | exporter | defined in | on the local plane |"]
    rows.append("| --- | --- | --- | --- |")
    for family in FAMILIES.values():
        local = "scraped by the test" if family.local else "cluster only"
        rows.append(f"| `{family.name}` | {family.exporter} | {family.origin} | {local} |")
    return "\n".join(rows)


def dashboard_panels() -> str:
    from infra.platform.config import load_stack
    from infra.platform.monitoring import model_panels, stack_panels
    from infra.platform.plan import compile_stack

    (model, *_) = compile_stack(load_stack("dev", ROOT)).values()
    rows = ["| group | panel | queries (legend) |", "| --- | --- | --- |"]
    rows += [f"| per model | {p.title} | {', '.join(p.queries)} |" for p in model_panels(model)]
    rows += [f"| stack | {p.title} | {', '.join(p.queries)} |" for p in stack_panels()]
    return "\n".join(rows)


def alerts_table() -> str:
    from infra.platform.alerts import alert_rules, gpu_node_minimums
    from infra.platform.config import load_stack
    from infra.platform.plan import plan_platform

    platform = plan_platform(load_stack("dev", ROOT))
    rules = alert_rules(platform.models.values(), gpu_node_minimums(platform.gpu_pools))
    rows = ["| alert (dev stack) | for | severity | runbook |", "| --- | --- | --- | --- |"]
    rows += [f"| {r.title} | {r.for_s // 60} min | {r.severity} | {r.runbook} |" for r in rules]
    return "\n".join(rows)


def top_capture() -> str:
    """`servestack top`'s table as the CLI prints it piped, for the figures one live run showed
    (recorded from the metric-existence test's run)."""
    from rich.console import Console

    from infra.cli.common import PIPED_WIDTH
    from serving.observability.top import ModelFigures, table

    capture = json.loads(TOP_CAPTURE.read_text())
    console = Console(width=PIPED_WIDTH, record=True, file=io.StringIO())
    console.print(table([ModelFigures(**row) for row in capture["rows"]], capture["title"]))
    text = "\n".join(line.rstrip() for line in console.export_text().splitlines())
    return f"```console\n$ {capture['command']}\n{text}\n```"


REGIONS: dict[str, Maker] = {
    "metrics": anywhere(metrics_table),
    "dashboard-panels": anywhere(dashboard_panels),
    "alerts": anywhere(alerts_table),
    "top": anywhere(top_capture),
}
