"""What the plan takes from outside the planner's model, as `plan` prints it: a calibration
record measured on the deployment (`serving.plan.calibrated`), and the prefix-cache hit rate the
profile expects (`workload.prefix_cache_hit_rate`)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from serving.plan.planner import Plan
from serving.recommend.ranking import Candidate
from serving.spec.calibration import Calibration
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
        "the estimates compute only the rest of each prompt, and an alert fires when vLLM "
        "measures less",
        style="dim", highlight=False,
    )  # fmt: skip


def print_recommend_calibration(
    console: Console, calibration: Calibration, ranked: Sequence[Candidate]
) -> None:
    """Which candidate a calibration record scaled, naming the run, or that it scaled none."""
    scaled = [c for c in ranked if c.calibrated_by]
    where = f"{calibration.machine_type}, {calibration.layout.model_dump()}"
    if scaled:
        (candidate,) = scaled
        console.print(
            f"calibrated by {calibration.run} ({calibration.date}; {calibration.command}): "
            f"{candidate.machine_type} {candidate.layout}'s estimates are scaled by what it "
            "measured; the other candidates' are the planner's",
            style="green", highlight=False, soft_wrap=True,
        )  # fmt: skip
        return
    console.print(
        f"warning: calibration ignored: {calibration.run} measured {where} on vLLM "
        f"{calibration.vllm_version}, where no candidate runs",
        style="yellow", highlight=False, soft_wrap=True,
    )  # fmt: skip
