"""A calibration record beyond `plan`'s own figures: `plan --recommend` scales the one candidate
it was measured on and names the run, and the autoscaling knobs `render` writes come from the
calibrated estimates, which it says, naming the run. (The record here is written as
`servestack calibrate` writes one; tests/serving/measure/test_calibrate.py makes real ones.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run

from infra.platform.config import load_stack
from infra.platform.plan import compile_stack
from serving.catalog import pins
from serving.compile.autoscaling import autoscaling
from serving.plan.calibrated import layout_of
from serving.plan.planner import plan
from serving.spec.calibration import calibration_path

PROFILE = "llama-3.1-8b"
RUN = "runs/measured/bench.json"
# Slower than planned: first tokens twice as late, half the requests/s.
RATIOS = {"ttft_p50": 2.0, "itl_p50": 1.5, "tpot_p50": 1.5, "requests_per_s": 0.5,
          "output_tokens_per_s": 0.5}  # fmt: skip


@pytest.fixture
def calibrated(repo: Path) -> Path:
    """The repository's copy with a record for the dev stack's model, measured where the plan
    puts it."""
    spec = load_stack("dev", repo).profiles[PROFILE]
    (group,) = plan(spec).groups
    record = {
        "model": spec.name, "machine_type": group.placement.machine_type,
        "accelerator": spec.accelerator, "layout": layout_of(group.parallelism).model_dump(),
        "vllm_version": pins.VLLM, "date": "2026-12-05T00:30:00+00:00", "commit": "0" * 40,
        "command": f"servestack bench dev --url http://127.0.0.1:8000 --model {PROFILE}",
        "run": RUN, "concurrency": 4, "requests": 100, "ratios": RATIOS,
        "workloads": {"multi-prompt": dict(RATIOS)},
    }  # fmt: skip
    path = calibration_path(repo / "stacks", PROFILE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(record))
    return repo


def ranked(root: Path) -> dict[tuple[str, str], dict[str, Any]]:
    result = run(root, "plan", "dev", "--recommend", PROFILE, "--json")
    assert result.returncode == 0, result.stderr
    return {(c["machine_type"], c["layout"]): c for c in json.loads(result.stdout)}


def test_recommend_scales_only_the_candidate_the_run_measured(pristine, calibrated) -> None:
    before, after = ranked(pristine), ranked(calibrated)
    scaled = {key for key, c in after.items() if c["calibrated_by"] == RUN}
    (key,) = scaled
    assert (
        key[0]
        == plan(load_stack("dev", calibrated).profiles[PROFILE]).groups[0].placement.machine_type
    )
    assert after[key]["ttft_s"] == pytest.approx(before[key]["ttft_s"] * 2.0, rel=1e-12)
    assert after[key]["output_tokens_per_s"] == pytest.approx(
        before[key]["output_tokens_per_s"] * 0.5, rel=1e-12
    )
    for other in set(after) - scaled:
        assert after[other]["ttft_s"] == before[other]["ttft_s"]
        assert after[other]["calibrated_by"] is None
    shown = run(calibrated, "plan", "dev", "--recommend", PROFILE).stdout
    assert f"calibrated by {RUN} (2026-12-05T00:30:00+00:00; servestack bench dev" in shown


def test_autoscaling_knobs_come_from_the_calibrated_estimates(pristine, calibrated) -> None:
    """Fewer requests can wait within the TTFT target when first tokens come later and
    requests finish slower: the cap on ongoing requests follows the record."""
    (plain,) = compile_stack(load_stack("dev", pristine)).values()
    (scaled,) = compile_stack(load_stack("dev", calibrated)).values()
    assert scaled.plan.calibration is not None and scaled.plan.calibration.applied
    spec = scaled.spec
    cap = autoscaling(spec, scaled.plan).max_ongoing_requests
    assert cap < autoscaling(spec, plain.plan).max_ongoing_requests
    assert scaled.llm_config()["deployment_config"]["max_ongoing_requests"] == cap
    result = run(calibrated, "render", "dev", "--out", "rendered")
    assert result.returncode == 0, result.stderr
    assert f"{spec.name}: autoscaling knobs from estimates calibrated by {RUN}" in result.stdout
