"""A calibration record: how a deployed model's measured speed compared with the plan's
estimates, written by `servestack calibrate` from a `servestack bench --url` run to
`stacks/calibrations/<model>.yaml` and read back with the stack, so that the planner can scale
its estimates for that model by what was measured (`serving.plan.calibrated`).

A record holds for the deployment it was measured on: the same machine type, the same layout
(tensor, pipeline, data, expert parallel) and the same vLLM version. Its ratios are measured
over estimated, per metric, each the median over the run's workloads.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from serving.frozen import StrictFrozen
from serving.spec.loading import display_path, read_yaml, validate

# Where the records live, beside the stack files: stacks/calibrations/<model>.yaml.
CALIBRATIONS_DIR = "calibrations"


class Layout(StrictFrozen):
    """The layout the run measured: the model's replica group as the plan laid it out."""

    tensor: int = Field(ge=1)
    pipeline: int = Field(ge=1)
    data: int = Field(ge=1)
    expert: int = Field(ge=1, description="Expert-parallel size (1: none).")


class Ratios(StrictFrozen):
    """Measured / estimated, per metric. The planner multiplies its estimates by these."""

    ttft_p50: float = Field(gt=0, description="Time to first token, p50.")
    itl_p50: float = Field(gt=0, description="Inter-token latency, p50.")
    tpot_p50: float = Field(
        gt=0, description="Time per output token, p50 (the plan estimates it as the ITL)."
    )
    requests_per_s: float = Field(gt=0, description="Requests/s at the run's concurrency.")
    output_tokens_per_s: float = Field(gt=0, description="Output tokens/s at that concurrency.")


class Calibration(StrictFrozen):
    """One model's calibration: what was measured, where, how, and the ratios."""

    model: str = Field(description="The served model name the run measured.")
    machine_type: str = Field(description="The plan's machine type for the model.")
    accelerator: str = Field(description="Accelerator catalog key, e.g. 'h100-80gb'.")
    layout: Layout
    vllm_version: str = Field(description="The engine's version the server reported, or the pin.")
    date: str = Field(description="When the run was made (ISO 8601).")
    commit: str = Field(description="servestack's git commit the run was made with.")
    command: str = Field(description="The bench command that made the run.")
    run: str = Field(description="The bench.json the record was made from.")
    concurrency: int = Field(ge=1, description="Requests in flight in the run's closed loop.")
    requests: int = Field(ge=1, description="Requests answered, over the workloads and repeats.")
    ratios: Ratios = Field(description="Measured / estimated: the median over the workloads.")
    workloads: dict[str, Ratios] = Field(description="The same ratios per workload.")


def calibration_path(stacks_dir: Path, model: str) -> Path:
    return stacks_dir / CALIBRATIONS_DIR / f"{model}.yaml"


def load_calibration(path: Path) -> Calibration:
    """Parse a calibration record, or raise a `ServestackError` naming the file and field."""
    return validate(Calibration, read_yaml(path), display_path(path))
