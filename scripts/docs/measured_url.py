"""The committed `bench --url` run against the local plane (results/measure/local-url/, made by
scripts/measure_local_url.sh): its command, each figure beside the plan's estimate, and the
calibration record made from it."""

from __future__ import annotations

import json
from typing import Any

import yaml

from scripts.docs.regions import ROOT, Maker, anywhere

RUN = ROOT / "results/measure/local-url"
# figure in bench.json's summary -> (what the table calls it, its scale to the unit shown)
FIGURES = {
    "ttft_p50": ("TTFT p50, ms", 1e3),
    "itl_p50": ("ITL p50, ms", 1e3),
    "tpot_p50": ("TPOT p50, ms", 1e3),
    "e2e_p50": ("end to end p50, ms", 1e3),
    "requests_per_s": ("requests/s", 1.0),
    "output_tokens_per_s": ("output tokens/s", 1.0),
}


def _spread(spread: dict[str, float], scale: float) -> str:
    median, low, high = (spread[k] * scale for k in ("median", "low", "high"))
    return f"{median:,.1f} ({low:,.1f}–{high:,.1f})"


def _row_table(row: dict[str, Any]) -> list[str]:
    lines = [
        "| figure | measured: median (min–max) | plan's estimate | measured / plan |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, (label, scale) in FIGURES.items():
        shown = row["figures"].get(name)
        if shown is None:
            continue
        estimate = row["estimates"].get(name)
        ratio = row["ratios"].get(name)
        plan = f"{estimate * scale:,.1f}" if estimate is not None else "—"
        lines.append(
            f"| {label} | {_spread(shown, scale)} | {plan} | "
            + (f"{ratio:.2f}x |" if ratio is not None else "— |")
        )
    errors = ", ".join(f"{k}: {v}" for k, v in row["errors_by_status"].items()) or "none"
    lines += [
        "",
        f"{row['load']}, {row['workload']}: {row['requests']} requests over "
        f"{row['repetitions']} repetitions; failed by status: {errors}; prompt tokens the engine "
        f"reported cached: {row['cached_tokens']:,}.",
    ]
    return lines


def local_url_run() -> str:
    document = json.loads((RUN / "bench.json").read_text())
    record = yaml.safe_load((RUN / "calibration.yaml").read_text())
    load = (RUN / "machine.txt").read_text().splitlines()[1].split("load average:")[1].strip()
    lines = ["```console", f"$ {document['command']}", "```", ""]
    for row in document["summary"]:
        lines += _row_table(row)
    ratios = ", ".join(f"{name} x{value:.3f}" for name, value in record["ratios"].items())
    lines += [
        "",
        f"Made {document['date'][:16].replace('T', ' ')} UTC at servestack {document['commit'][:7]}"
        f", vLLM {document['vllm_version']} ({document['vllm_version_source']}); load average "
        f"(1, 5, 15 min) {load} as it began; the load generator's process: "
        f"{document['load_generator']}. `servestack calibrate` wrote from it ([record]"
        f"(../../results/measure/local-url/calibration.yaml)): {ratios}.",
    ]
    return "\n".join(lines)


REGIONS: dict[str, Maker] = {"local-url-run": anywhere(local_url_run)}
