"""`servestack calibrate`: a calibration record (`serving.spec.calibration`) from a
`bench --url` run, for the planner to scale its estimates by.

A run calibrates only if it measured what it claims: a closed loop at one concurrency (the
estimate the record scales is the plan's for that loop), with no failed request (a failure
shortens the run and flatters its latencies), and at least `MIN_REQUESTS` answered requests per
workload over its repetitions. Why 100: the ratios are of medians, and the middle of 100 samples
lies between their 40th and 60th percentiles with 95% confidence; it is also the count at which
the bench resolves a p99 at all. Anything else is refused, naming why, and nothing is written.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import yaml

from serving.errors import ServestackError
from serving.measure.document import load_run
from serving.spec.calibration import Calibration, Layout, Ratios, calibration_path
from serving.spec.loading import display_path
from serving.spec.profile import ModelSpec

MIN_REQUESTS = 100
METRICS = tuple(Ratios.model_fields)


def calibration(run_path: Path, spec: ModelSpec) -> Calibration:
    """The record the run at `run_path` makes for `spec`, or a `ServestackError` saying why it
    cannot make one."""
    data, _ = load_run(run_path)
    source = display_path(run_path)
    if data.get("model") != spec.name:
        raise ServestackError(
            source, "model", f"measured '{data.get('model')}', not '{spec.name}'",
            f"calibrate '{spec.name}' from a run of it, or pass the stack that serves "
            f"'{data.get('model')}'",
        )  # fmt: skip
    mode = data["mode"]
    if mode.get("name") != "closed":
        raise ServestackError(
            source, "mode", f"a {mode.get('name')} run has no one concurrency to calibrate at",
            "calibrate from a closed-loop run: servestack bench --url URL --concurrency N",
        )  # fmt: skip
    rows: list[dict[str, Any]] = data["summary"]
    failed = {row["workload"]: row["errors_by_status"] for row in rows if row["failed"]}
    if failed:
        shown = "; ".join(f"{w}: {errors}" for w, errors in failed.items())
        raise ServestackError(
            source, "summary", f"the run had failed requests ({shown})",
            "fix what failed (the statuses say what) and run the bench again; a run with "
            "errors would calibrate the plan to a service that did not answer",
        )  # fmt: skip
    few = {row["workload"]: row["requests"] for row in rows if row["requests"] < MIN_REQUESTS}
    if few:
        shown = ", ".join(f"{w}: {n}" for w, n in few.items())
        raise ServestackError(
            source, "summary", f"too few requests to calibrate from ({shown})",
            f"run at least {MIN_REQUESTS} requests per workload over the repeats (--requests "
            f"x --repeats), so that each median is resolved",
        )  # fmt: skip
    (group, *others) = data["deployment"]
    if others:
        raise ServestackError(
            source, "deployment", "the model runs as several replica groups (P/D)",
            "calibrate a model served by one group; prefill/decode pairs are not calibrated yet",
        )  # fmt: skip
    per_workload = {r["workload"]: _ratios(r["ratios"], source, r["workload"]) for r in rows}
    overall = Ratios(
        **{m: statistics.median(getattr(r, m) for r in per_workload.values()) for m in METRICS}
    )
    return Calibration(
        model=spec.name, machine_type=group["machine_type"], accelerator=group["accelerator"],
        layout=Layout(**group["layout"]), vllm_version=data["vllm_version"], date=data["date"],
        commit=data["commit"], command=data["command"], run=source,
        concurrency=rows[0]["concurrency"], requests=sum(row["requests"] for row in rows),
        ratios=overall, workloads=per_workload,
    )  # fmt: skip


def _ratios(found: dict[str, float], source: str, workload: str) -> Ratios:
    missing = [m for m in METRICS if m not in found]
    if missing:
        raise ServestackError(
            source, f"summary.{workload}.ratios", f"has no {', '.join(missing)}",
            "rerun the bench with an output of more than one token per request",
        )  # fmt: skip
    return Ratios(**{m: float(found[m]) for m in METRICS})


def write(record: Calibration, stacks_dir: Path, profile: str) -> Path:
    """stacks/calibrations/<profile>.yaml, beside the stack files and meant for git."""
    path = calibration_path(stacks_dir, profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# Written by `servestack calibrate` from a `servestack bench --url` run: measured /\n"
        "# estimated per metric. The planner scales this model's estimates by `ratios` where\n"
        "# the machine type, layout and vLLM version match.\n"
    )
    text = yaml.safe_dump(record.model_dump(), sort_keys=False)
    path.write_text(header + text)
    return path
