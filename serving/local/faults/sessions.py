"""Runs the fault sessions of `serving.local.faults.runs`, each in a process of its own (Ray reads
HAProxy's settings when it starts), and answers for how each one ended.

A session ends `completed` (every fault reported and the process gone), `hung` (its watchdog
named the fault and step that overran, or the session overran its own deadline) or `failed`
(the process exited with an error; the tail of its log says which). The runner counts every
process of the session while it runs (`serving.local.runtime.cleanup.RunCensus`), so whatever
outlives it (a raylet, a GCS, an HAProxy, a Redis) is ended and counted in `left_behind`: a clean
session leaves none.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import Field

from serving.frozen import Frozen
from serving.local.engine.simulation import SimulationSettings
from serving.local.faults.actions import HUNG_PREFIX
from serving.local.faults.load import FaultLoad
from serving.local.faults.runs import REPORT_PREFIX, FaultReport, Session
from serving.local.runtime import cleanup
from serving.spec.profile import ModelSpec

SessionStatus = Literal["completed", "hung", "failed"]
# Ray's shutdown after the last report: longer is a hang of the shutdown.
SHUTDOWN_TIMEOUT_S = 120.0
CENSUS_EVERY_S = 2.0
# A session's process, told to stop (a hang), is killed with its process group after this.
STOP_TIMEOUT_S = 20.0


class SessionOutcome(Frozen):
    session: Session
    status: SessionStatus
    detail: str = Field(default="", description="Where it hung, or the end of its log.")
    took_s: float
    left_behind: int = Field(description="Processes of the session still running after it.")
    reports: list[FaultReport]


class FaultRun(Frozen):
    """What `servestack faults --local` writes: the command, its load and every session."""

    command: str
    model: str
    stream_s: float = Field(description="A stream's length with no fault, estimated.")
    time_scale: float
    load: FaultLoad
    sessions: list[SessionOutcome]

    @property
    def reports(self) -> list[FaultReport]:
        return [report for outcome in self.sessions for report in outcome.reports]

    @property
    def clean(self) -> bool:
        return all(o.status == "completed" and o.left_behind == 0 for o in self.sessions)


def _lines(stream: object, into: queue.Queue[str | None]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)
    into.put(None)


def run_session_process(
    spec: ModelSpec,
    settings: SimulationSettings,
    session: Session,
    load: FaultLoad,
    stream_s: float,
    *,
    timeout_s: float,
    on_report: Callable[[FaultReport], None] | None = None,
) -> SessionOutcome:
    """One session in its own process, bounded by `timeout_s`; never raises for what the
    session did, only reports it."""
    command = [
        sys.executable, "-m", "serving.local.faults.runs", spec.model_dump_json(),
        settings.model_dump_json(), session.model_dump_json(), load.model_dump_json(),
        str(stream_s),
    ]  # fmt: skip
    began = time.monotonic()
    status, detail, reports, left = watch(
        command, len(session.faults), timeout_s=timeout_s, on_report=on_report
    )
    return SessionOutcome(
        session=session, status=status, detail=detail, took_s=round(time.monotonic() - began, 1),
        left_behind=left, reports=reports,
    )  # fmt: skip


def watch(
    command: Sequence[str],
    faults: int,
    *,
    timeout_s: float,
    on_report: Callable[[FaultReport], None] | None = None,
    shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S,
) -> tuple[SessionStatus, str, list[FaultReport], int]:
    """Run a session's process to its end or its deadline, reading its reports, counting its
    processes; then end whatever of it is left. Returns its status, the detail, the reports
    and how many processes had to be ended."""
    began = time.monotonic()
    reports: list[FaultReport] = []
    status: SessionStatus = "completed"
    detail = ""
    with tempfile.TemporaryFile(mode="w+") as log:
        # On an interrupt of the command too: no process of the session outlives it.
        with cleanup.supervised(
            list(command), interval_s=CENSUS_EVERY_S, stop_timeout_s=STOP_TIMEOUT_S,
            grace_s=10.0, stdout=subprocess.PIPE, stderr=log, text=True,
        ) as child:  # fmt: skip
            process = child.process
            lines: queue.Queue[str | None] = queue.Queue()
            threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True).start()
            deadline = began + timeout_s
            exited_at: float | None = None
            while True:
                try:
                    line = lines.get(timeout=0.5)
                except queue.Empty:
                    if exited_at is None and process.poll() is not None:
                        exited_at = time.monotonic()
                    # A process of the session that kept its stdout holds the pipe open.
                    if exited_at is not None and time.monotonic() - exited_at > 5.0:
                        break
                    if time.monotonic() > deadline:
                        status = "hung"
                        detail = (
                            f"the shutdown took over {shutdown_timeout_s:.0f} s"
                            if len(reports) == faults
                            else f"the session overran {timeout_s:.0f} s"
                        )
                        break
                    continue
                if line is None:
                    break
                if line.startswith(REPORT_PREFIX):
                    reports.append(FaultReport.model_validate_json(line[len(REPORT_PREFIX) :]))
                    if on_report is not None:
                        on_report(reports[-1])
                    if len(reports) == faults:
                        # Every fault reported: the shutdown is left, with its own deadline.
                        deadline = min(deadline, time.monotonic() + shutdown_timeout_s)
                elif line.startswith(HUNG_PREFIX):
                    hung = json.loads(line[len(HUNG_PREFIX) :])
                    status = "hung"
                    detail = f"{hung['fault']}: {hung['phase']} (no end after {hung['after_s']} s)"
        code, ended = process.returncode, child.ended
        if status == "completed" and (code != 0 or len(reports) != faults):
            log.seek(0)
            status, detail = "failed", f"exit {code}: " + log.read()[-1500:]
    return status, detail, reports, len(ended)


def run_sessions(
    spec: ModelSpec,
    settings: SimulationSettings,
    sessions: Sequence[Session],
    load: FaultLoad,
    stream_s: float,
    *,
    timeout_s: float = 1800.0,
    on_report: Callable[[FaultReport], None] | None = None,
) -> list[SessionOutcome]:
    """Each session in turn, each in its own process and within `timeout_s`."""
    return [
        run_session_process(
            spec, settings, session, load, stream_s, timeout_s=timeout_s, on_report=on_report
        )
        for session in sessions
    ]
