"""`servestack calibrate`: a clean closed-loop run becomes a record the next plan is scaled by,
exactly, naming the run; a record for another layout is ignored with a warning; a run with
errors or too few requests is refused and nothing is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from cli_support import edit_yaml, run
from conftest import MODEL_PROFILE, bench

RECORD = Path("stacks/calibrations") / f"{MODEL_PROFILE}.yaml"


def planned(root: Path) -> dict:
    result = run(root, "plan", "dev", "--model", MODEL_PROFILE, "--json")
    assert result.returncode == 0, result.stderr
    (model_plan,) = json.loads(result.stdout)["plans"]
    return model_plan


@pytest.fixture
def calibrated(good_run, root: Path, tmp_path: Path) -> Path:
    """A copy of the repository with the good run's calibration record in it."""
    here = tmp_path / "repo"
    shutil.copytree(root, here)
    result = run(here, "calibrate", str(good_run[0]))
    assert result.returncode == 0, result.stderr
    assert f"wrote {RECORD}" in result.stdout
    return here


def test_the_next_plan_is_scaled_by_exactly_the_recorded_ratios(root, calibrated) -> None:
    before, after = planned(root), planned(calibrated)
    ratios = yaml.safe_load((calibrated / RECORD).read_text())["ratios"]
    assert after["ttft_s"] / before["ttft_s"] == pytest.approx(ratios["ttft_p50"], rel=1e-12)
    assert after["itl_s"] / before["itl_s"] == pytest.approx(ratios["itl_p50"], rel=1e-12)
    assert after["requests_per_s"] / before["requests_per_s"] == pytest.approx(
        ratios["requests_per_s"], rel=1e-12
    )
    assert after["calibration"]["applied"] is True
    assert before["calibration"] is None


def test_the_plan_names_the_run_it_was_calibrated_by(good_run, calibrated) -> None:
    record = yaml.safe_load((calibrated / RECORD).read_text())
    assert record["run"] == str(good_run[0])
    assert record["command"].startswith("servestack bench dev --url http://127.0.0.1:")
    assert record["requests"] == 100 and record["concurrency"] == 4
    shown = run(calibrated, "plan", "dev", "--model", MODEL_PROFILE).stdout
    assert f"calibrated by {good_run[0]} ({record['date']}; {record['command']})" in shown


def test_a_record_for_another_layout_is_ignored_with_a_warning(root, calibrated) -> None:
    edit_yaml(calibrated / RECORD, lambda record: record["layout"].update(tensor=2))
    after = planned(calibrated)
    assert after["ttft_s"] == planned(root)["ttft_s"]
    assert after["calibration"]["applied"] is False
    shown = run(calibrated, "plan", "dev", "--model", MODEL_PROFILE).stdout
    assert "warning: calibration ignored: measured at TP2 PP1 DP1 EP1, planned at TP1" in shown


def test_a_bad_record_names_its_file_and_field(calibrated) -> None:
    edit_yaml(calibrated / RECORD, lambda record: record["ratios"].update(ttft_p50="fast"))
    result = run(calibrated, "plan", "dev")
    assert result.returncode == 2
    assert f"{RECORD}: ratios.ttft_p50" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_run_with_errors_is_refused(root, endpoint, tmp_path) -> None:
    bench(root, endpoint, "runs/refused", *("--workload", "multi-prompt", "--requests", "3",
          "--repeats", "1"), key="not-the-key")  # fmt: skip
    here = tmp_path / "repo"
    shutil.copytree(root, here)
    result = run(here, "calibrate", str(root / "runs/refused/bench.json"))
    assert result.returncode == 2
    assert "the run had failed requests (multi-prompt: {'401': 6})" in result.stderr
    assert not (here / RECORD).exists()


def test_a_run_with_too_few_requests_is_refused(root, endpoint, tmp_path) -> None:
    bench(root, endpoint, "runs/few", "--workload", "multi-prompt", "--requests", "3",
          "--repeats", "1")  # fmt: skip
    here = tmp_path / "repo"
    shutil.copytree(root, here)
    result = run(here, "calibrate", str(root / "runs/few/bench.json"))
    assert result.returncode == 2
    assert "too few requests to calibrate from (multi-prompt: 6)" in result.stderr
    assert not (here / RECORD).exists()


def test_a_file_that_is_not_a_url_run_is_refused(root, tmp_path) -> None:
    local = tmp_path / "bench.json"
    local.write_text(json.dumps({"command": "servestack bench --local", "reports": []}))
    result = run(root, "calibrate", str(local))
    assert result.returncode == 2
    assert "is not the record of a `servestack bench --url` run" in result.stderr
