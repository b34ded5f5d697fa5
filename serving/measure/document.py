"""A `bench --url` run as it is written (bench.json) and read back: what was run where, with
what, and per load and workload each figure's median and min–max over the repetitions beside the
plan's estimate and measured / estimated. Tails follow the local bench's rule: the p99 where at
least 100 samples resolve it, else the maximum, called that (`serving.local.bench.stats`)."""

from __future__ import annotations

import datetime
import json
import statistics
import subprocess
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from serving.errors import ServestackError
from serving.local.bench.repeats import spread
from serving.local.bench.stats import Percentiles, WorkloadReport
from serving.measure.estimate import MEASURED
from serving.measure.run import Measured
from serving.paths import CODE_ROOT
from serving.plan.calibrated import layout_of
from serving.plan.planner import plan
from serving.spec.profile import ModelSpec

LATENCIES = ("ttft_s", "itl_s", "tpot_s", "e2e_s")


def git_commit() -> str:
    """servestack's commit, with '+changes' where the checkout differs from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=CODE_ROOT, capture_output=True, text=True,
            check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=CODE_ROOT,
            capture_output=True, text=True, check=True, timeout=10,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+changes" if dirty else head


def deployment(spec: ModelSpec) -> list[dict[str, Any]]:
    """The model's GPUs and layout per replica group, as the plan lays them out."""
    return [
        {
            "role": group.role,
            "machine_type": group.placement.machine_type,
            "accelerator": spec.accelerator,
            "gpus_per_replica": group.placement.gpus_per_replica,
            "layout": layout_of(group.parallelism).model_dump(),
            "min_replicas": group.placement.min_replicas,
        }
        for group in plan(spec).groups
    ]


def _tail(figures: Percentiles | None) -> tuple[float | None, str]:
    return (None, "p99") if figures is None else figures.tail()


def summary(measured: Sequence[Measured]) -> list[dict[str, Any]]:
    """Per load and workload, over repetitions: each figure's median (min–max), the estimate's
    median and measured / estimated; errors by status and cached tokens summed."""
    grouped: dict[tuple[str, str], list[Measured]] = defaultdict(list)
    for one in measured:
        grouped[(one.report.variant, one.report.workload)].append(one)
    rows = []
    for (load, workload), group in grouped.items():
        reports = [m.report for m in group]
        figures: dict[str, Any] = {}
        for name in LATENCIES:
            p50 = [v.p50 for r in reports if (v := getattr(r, name)) and v.p50 is not None]
            tails = [_tail(getattr(r, name)) for r in reports]
            tail_values = [value for value, _ in tails if value is not None]
            short = name.removesuffix("_s")
            figures[f"{short}_p50"] = spread(p50).model_dump() if p50 else None
            tail = "p99" if all(kind == "p99" for _, kind in tails) else "max"
            figures[f"{short}_{tail}"] = spread(tail_values).model_dump() if tail_values else None
        for name in ("requests_per_s", "output_tokens_per_s"):
            figures[name] = spread([getattr(r, name) for r in reports]).model_dump()
        estimates = {
            name: statistics.median(getattr(m.estimate, name) for m in group) for name in MEASURED
        }
        ratio = {}
        for name in MEASURED:
            shown = figures.get(name)
            if shown is not None and estimates[name]:
                ratio[name] = shown["median"] / estimates[name]
        errors: Counter[str] = Counter()
        for report in reports:
            errors.update(report.errors_by_status)
        rows.append(
            {
                "load": load, "workload": workload, "concurrency": group[0].concurrency,
                "repetitions": len(group), "requests": sum(r.requests for r in reports),
                "failed": sum(r.failed for r in reports), "errors_by_status": dict(errors),
                "cached_tokens": sum(r.cached_tokens for r in reports),
                "prompt_tokens_cached_share": statistics.median(
                    r.client_cache_hit_rate or 0.0 for r in reports
                ),
                "figures": figures, "estimates": estimates, "ratios": ratio,
            }
        )  # fmt: skip
    return rows


def document(
    *,
    command: str,
    url: str,
    spec: ModelSpec,
    stack: str,
    mode: dict[str, Any],
    repeats: int,
    max_seconds: float | None,
    vllm: tuple[str, str],
    workloads: dict[str, Any],
    measured: Sequence[Measured],
) -> dict[str, Any]:
    """bench.json's document. The key is nowhere in it: it never reaches this process's data."""
    return {
        "kind": "bench --url",
        "command": command,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "url": url,
        "stack": stack,
        "model": spec.name,
        "deployment": deployment(spec),
        "vllm_version": vllm[0],
        "vllm_version_source": vllm[1],
        "mode": mode,
        "repetitions": repeats,
        "max_seconds": max_seconds,
        "load_generator": next((m.report.load_generator for m in measured), None),
        "workloads": workloads,
        "summary": summary(measured),
        "runs": [m.model_dump() for m in measured],
    }


def load_run(path: Path) -> tuple[dict[str, Any], list[Measured]]:
    """A bench.json written by `bench --url`, with its runs read back; a `ServestackError` for
    anything else."""
    from serving.spec.loading import display_path, read_text

    source = display_path(path)
    try:
        data = json.loads(read_text(path, limit=64 * 1024 * 1024))
    except ValueError as exc:
        raise ServestackError(source, "", f"is not JSON ({exc})", "name a bench.json") from None
    if not isinstance(data, dict) or data.get("kind") != "bench --url":
        raise ServestackError(
            source, "kind", "is not the record of a `servestack bench --url` run",
            "calibrate from the bench.json of a run against the deployed service: "
            "servestack bench --url URL --model NAME",
        )  # fmt: skip
    try:
        runs = [Measured.model_validate(run) for run in data["runs"]]
    except (KeyError, TypeError, ValueError) as exc:
        first = str(exc).splitlines()[0]
        raise ServestackError(
            source, "runs", f"cannot be read ({first})", "rerun `servestack bench --url`"
        ) from None  # fmt: skip
    return data, runs


def reports_of(measured: Sequence[Measured]) -> list[WorkloadReport]:
    return [m.report for m in measured]
