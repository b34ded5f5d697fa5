"""CI's short form of the fault runs, on the real local data plane: `servestack faults --local
--short` as a user runs it (real Ray Serve and HAProxy, the simulated engine, the GCS on a local
Redis), and the goals asserted on its report."""

from __future__ import annotations

import subprocess

import pytest
from cli_support import servestack_command
from repo import REPO

from serving.local.faults.runs import FAULTS, FaultReport
from serving.local.faults.sessions import FaultRun


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> FaultRun:
    """CI's short form, as a user runs it: every fault in one local Ray (servestack's HAProxy
    hard stop, its GCS on a local Redis), 6 streams of 250 tokens per fault on 2 replicas."""
    out = tmp_path_factory.mktemp("faults")
    done = subprocess.run(
        [*servestack_command(), "faults", "--local", "--short", "--streams", "6",
         "--output-tokens", "250", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert (out / "faults.json").is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    run = FaultRun.model_validate_json((out / "faults.json").read_text())
    assert done.returncode == (0 if run.clean else 1), done.stderr[-3000:]
    return run


def _report(run: FaultRun, fault: str) -> FaultReport:
    (report,) = [r for r in run.reports if r.fault == fault]
    return report


def test_the_short_run_completes_and_leaves_no_process(short_run: FaultRun) -> None:
    (session,) = short_run.sessions
    assert (session.status, session.detail) == ("completed", "")
    assert session.left_behind == 0
    assert [r.fault for r in session.reports] == list(FAULTS)


def test_scaling_up_and_down_under_long_streams_loses_no_accepted_stream(
    short_run: FaultRun,
) -> None:
    report = _report(short_run, "scale-up-down")
    assert report.accepted == report.streams and report.completed == report.streams, report


@pytest.mark.parametrize("fault", ["replica-actor-kill", "replica-process-kill"])
def test_a_killed_replica_fails_its_streams_fast_and_new_requests_cleanly(
    short_run: FaultRun, fault: str
) -> None:
    report = _report(short_run, fault)
    assert report.hung == 0, report
    # Cut streams fail as the replica dies, long before a stall timeout would call them hung.
    assert report.longest_failure_s is None or report.longest_failure_s < short_run.load.stall_s
    # Requests sent after the kill are served (HAProxy redispatches a refused connection) or
    # refused before any token with a status a client retries: never cut, never hung.
    assert report.late_unclean == 0, report
    assert report.first_success_after_fault_s is not None and report.recovered_s is not None


@pytest.mark.parametrize("fault", ["controller-kill", "gcs-restart"])
def test_the_control_plane_dying_loses_no_stream(short_run: FaultRun, fault: str) -> None:
    report = _report(short_run, fault)
    assert report.completed == report.streams, report
    assert report.recovered_s is not None
