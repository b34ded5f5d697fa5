"""Estimates scaled by what a deployment measured (`serving.spec.calibration`): the one place
the planner applies a calibration record, to each replica group's estimates as they are made.

A record applies only where it was measured: the same machine type, layout and vLLM version.
A record for another one is ignored, and the plan says why (`CalibrationNote`)."""

from __future__ import annotations

from pydantic import Field

from serving.catalog import MachineType, pins
from serving.frozen import Frozen
from serving.plan.speed import Estimates
from serving.spec.calibration import Calibration, Layout
from serving.spec.parts import Parallelism


class CalibrationNote(Frozen):
    """Whether a calibration record scaled the plan's estimates, and the run behind it."""

    applied: bool
    run: str = Field(description="The bench.json the record was made from.")
    date: str
    command: str
    ratios: dict[str, float] = Field(description="Measured / estimated, per metric.")
    why_not: str | None = Field(default=None, description="Why an ignored record does not fit.")

    def summary(self) -> str:
        """One line for the plan's output."""
        if not self.applied:
            return f"calibration ignored: {self.why_not} (run {self.run}, {self.date})"
        scaled = ", ".join(f"{name} x{value:.3g}" for name, value in self.ratios.items())
        return f"calibrated by {self.run} ({self.date}; {self.command}): {scaled}"


def layout_of(layout: Parallelism) -> Layout:
    return Layout(
        tensor=layout.tensor, pipeline=layout.pipeline, data=layout.data,
        expert=layout.expert_parallel_size,
    )  # fmt: skip


def mismatch(calibration: Calibration, machine: MachineType, layout: Parallelism) -> str | None:
    """What differs between where the record was measured and this replica group, if anything."""
    here = layout_of(layout)
    if calibration.machine_type != machine.name:
        return f"measured on {calibration.machine_type}, planned on {machine.name}"
    if calibration.layout != here:
        return f"measured at {_layout(calibration.layout)}, planned at {_layout(here)}"
    if calibration.vllm_version != pins.VLLM:
        return f"measured on vLLM {calibration.vllm_version}, deployed with vLLM {pins.VLLM}"
    return None


def _layout(layout: Layout) -> str:
    return f"TP{layout.tensor} PP{layout.pipeline} DP{layout.data} EP{layout.expert}"


def applied(estimates: Estimates, calibration: Calibration) -> Estimates:
    """The estimates times the record's ratios: latencies by TTFT and ITL (a prompt's prefill,
    which a prefill replica's autoscaling target divides by, with its first token), throughput
    by requests/s (output tokens/s follows from it, as the planner derives it)."""
    ratios = calibration.ratios
    return estimates.model_copy(
        update={
            "prefill_s": estimates.prefill_s * ratios.ttft_p50,
            "ttft_s": estimates.ttft_s * ratios.ttft_p50,
            "itl_s": estimates.itl_s * ratios.itl_p50,
            "itl_at_batch_s": estimates.itl_at_batch_s * ratios.itl_p50,
            "requests_per_s": estimates.requests_per_s * ratios.requests_per_s,
            "output_tokens_per_s": estimates.output_tokens_per_s * ratios.requests_per_s,
        }
    )


def note(calibration: Calibration, why_not: str | None) -> CalibrationNote:
    ratios = calibration.ratios
    return CalibrationNote(
        applied=why_not is None, run=calibration.run, date=calibration.date,
        command=calibration.command, why_not=why_not,
        ratios={"TTFT": ratios.ttft_p50, "ITL": ratios.itl_p50,
                "requests/s": ratios.requests_per_s},
    )  # fmt: skip
