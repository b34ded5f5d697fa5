"""What the plan takes from outside the planner's model, as `plan` prints it: a calibration
record measured on the deployment (`serving.plan.calibrated`), and the prefix-cache hit rate the
profile expects (`workload.prefix_cache_hit_rate`)."""

from __future__ import annotations

from rich.console import Console

from serving.plan.planner import Plan
from serving.spec.profile import ModelSpec


def print_calibration(console: Console, plan: Plan) -> None:
    """The record that scaled the plan, naming its run; a warning where it was ignored."""
    if plan.calibration is None:
        return
    colour = "green" if plan.calibration.applied else "yellow"
    label = "" if plan.calibration.applied else "warning: "
    line = f"{label}{plan.calibration.summary()}"
    console.print(line, style=colour, highlight=False, soft_wrap=True)


def print_assumed_hit_rate(console: Console, spec: ModelSpec) -> None:
    hit_rate = spec.workload.prefix_cache_hit_rate
    if hit_rate is None:
        return
    console.print(
        f"expected prefix-cache hit rate {hit_rate:g} (workload.prefix_cache_hit_rate): "
        "alerted on when vLLM measures less; the estimates still prefill whole prompts",
        style="dim", highlight=False,
    )  # fmt: skip
