"""The fault runs: how their client classifies a stream (against scripted HTTP answers), how a
fault's report counts its streams, that every wait is bounded and the runner answers for how a
session ended (against scripted session processes), bad input to `servestack faults`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from cli_support import copy_repo, run
from repo import REPO

from serving.local.faults.actions import HUNG_EXIT, HUNG_PREFIX, bounded
from serving.local.faults.load import InFlight, Outcome, StreamResult, stream_one
from serving.local.faults.runs import REPORT_PREFIX, summarize
from serving.local.faults.sessions import watch

TOKEN = b'data: {"choices": [{"delta": {"content": "w"}}]}\n\n'


def classify(handler: httpx.MockTransport) -> StreamResult:
    async def go() -> StreamResult:
        async with httpx.AsyncClient(transport=handler, timeout=2.0) as client:
            return await stream_one(client, "http://local", {"stream": True}, 0.0)

    return asyncio.run(go())


def sse(*chunks: bytes, broken: bool = False) -> httpx.MockTransport:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
        if broken:
            raise httpx.RemoteProtocolError("peer closed connection")

    return httpx.MockTransport(lambda request: httpx.Response(200, content=body()))


class TestAStreamIsClassifiedAsTheClientSawIt:
    def test_every_token_and_done_is_completed(self) -> None:
        result = classify(sse(TOKEN, TOKEN, b"data: [DONE]\n\n"))
        assert (result.outcome, result.tokens) == ("completed", 2)

    def test_tokens_then_a_broken_connection_is_cut(self) -> None:
        result = classify(sse(TOKEN, TOKEN, broken=True))
        assert (result.outcome, result.tokens) == ("cut", 2)

    def test_tokens_then_an_end_without_done_is_cut(self) -> None:
        assert classify(sse(TOKEN)).outcome == "cut"

    def test_an_http_error_before_any_token_is_a_clean_refusal(self) -> None:
        refused = httpx.MockTransport(lambda request: httpx.Response(503, text="no replica"))
        result = classify(refused)
        assert (result.outcome, result.status) == ("refused", 503)

    def test_an_error_event_inside_the_stream_is_not_a_completion(self) -> None:
        result = classify(sse(TOKEN, b'data: {"error": {"message": "engine died"}}\n\n'))
        assert result.outcome == "cut"

    def test_the_replica_named_in_the_chunks_is_kept_and_counted_while_in_flight(self) -> None:
        chunk = TOKEN.replace(b"{", b'{"system_fingerprint": "sim-abc123", ', 1)
        in_flight = InFlight()

        async def go() -> StreamResult:
            async with httpx.AsyncClient(transport=sse(chunk, chunk, broken=True)) as client:
                return await stream_one(client, "http://local", {}, 0.0, in_flight)

        result = asyncio.run(go())
        assert (result.replica, result.outcome) == ("abc123", "cut")
        assert in_flight.busiest() is None  # counted while it ran, released when it broke
        in_flight.add("abc123", 2)
        in_flight.add("def456", 1)
        assert in_flight.busiest() == "abc123"

    def test_silence_past_the_stall_timeout_is_a_hang(self) -> None:
        async def silent() -> AsyncIterator[bytes]:
            yield TOKEN
            raise httpx.ReadTimeout("no byte")

        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=silent()))
        assert classify(transport).outcome == "hung"


def test_an_unknown_fault_is_bad_input_naming_the_known_ones(tmp_path: Path) -> None:
    result = run(copy_repo(tmp_path / "repo"), "faults", "--local", "--fault", "gcs-restrat")
    assert result.returncode == 2
    assert "--fault: unknown fault 'gcs-restrat'" in result.stderr
    assert "gcs-restart" in result.stderr and "Traceback" not in result.stderr


class TestAFaultsCountIsWhatItsStreamsSaw:
    def test_late_failures_refusal_statuses_and_the_slowest_failure(self) -> None:
        def result(outcome: Outcome, *, status: int | None = 200, late: bool = False,
                   start: float = 0.0, end: float = 1.0) -> StreamResult:  # fmt: skip
            return StreamResult(
                outcome=outcome, status=status, after_fault=late, start_s=start, end_s=end
            )

        report = summarize("s", "replica-actor-kill", 90, [
            result("completed"), result("cut", end=4.5), result("refused", status=503, late=True),
            result("refused", status=None, late=True), result("completed", late=True),
            result("refused", status=400, late=True), result("cut", late=True),
        ], 3.0, 0.4, 12.0)  # fmt: skip
        assert (report.streams, report.in_flight, report.accepted) == (7, 2, 4)
        assert (report.completed, report.cut, report.refused, report.late_failed) == (2, 2, 3, 4)
        # A 400 is the client's own error and a cut stream half an answer: neither is retried.
        assert report.late_unclean == 2
        assert report.refused_statuses == [0, 400, 503]
        assert report.longest_failure_s == 4.5


class TestEveryWaitIsBounded:
    def test_a_call_that_never_returns_is_a_timeout(self) -> None:
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            bounded(lambda: time.sleep(60), 0.5)
        assert time.monotonic() - began < 5

    def test_a_calls_answer_and_its_error_come_back(self) -> None:
        assert bounded(lambda: 42, 5) == 42
        with pytest.raises(ZeroDivisionError):
            bounded(lambda: 1 // 0, 5)

    def test_the_watchdog_ends_a_step_that_overruns_saying_which(self) -> None:
        script = (
            "import time\nfrom serving.local.faults.actions import Watchdog\n"
            "dog = Watchdog('s', slack_s=0.0)\n"
            "with dog.step('controller-kill', 'recover', 0.5):\n    time.sleep(60)\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=30, cwd=REPO, check=False)  # fmt: skip
        assert done.returncode == HUNG_EXIT
        hung = json.loads(done.stdout.removeprefix(HUNG_PREFIX))
        assert (hung["fault"], hung["phase"]) == ("controller-kill", "recover")


def _session(body: str) -> list[str]:
    return [sys.executable, "-c", "import os, subprocess, sys, time\n" + body]


REPORT = summarize("s", "controller-kill", 90, [], 1.0, None, None).model_dump_json()


class TestTheRunnerAnswersForHowASessionEnded:
    def test_a_clean_session_is_completed_with_nothing_left(self) -> None:
        status, _, reports, left = watch(
            _session(f"print({REPORT_PREFIX + REPORT!r}, flush=True)"), 1, timeout_s=30
        )
        assert (status, left, [r.fault for r in reports]) == ("completed", 0, ["controller-kill"])

    def test_a_process_the_session_leaves_running_is_ended_and_counted(self) -> None:
        leave = (
            "child = subprocess.Popen(['sleep', '300'])\n"
            f"time.sleep(3)\nprint({REPORT_PREFIX + REPORT!r}, flush=True)\n"
        )
        status, _, _, left = watch(_session(leave), 1, timeout_s=30)
        assert (status, left) == ("completed", 1)

    def test_a_session_that_never_ends_is_reported_hung_within_its_deadline(self) -> None:
        began = time.monotonic()
        status, detail, reports, _ = watch(_session("time.sleep(300)"), 2, timeout_s=3)
        assert (status, reports) == ("hung", [])
        assert "overran 3 s" in detail and time.monotonic() - began < 30

    def test_a_shutdown_that_never_ends_is_a_hang_after_the_reports(self) -> None:
        body = f"print({REPORT_PREFIX + REPORT!r}, flush=True)\ntime.sleep(300)\n"
        status, detail, reports, _ = watch(_session(body), 1, timeout_s=60, shutdown_timeout_s=2)
        assert (status, len(reports)) == ("hung", 1) and "shutdown" in detail

    def test_the_watchdogs_word_is_the_detail_of_the_hang(self) -> None:
        hung = '{"session": "s", "fault": "gcs-restart", "phase": "strike", "after_s": 75.0}'
        body = f"print({HUNG_PREFIX + hung!r}, flush=True)\nsys.exit({HUNG_EXIT})\n"
        status, detail, _, _ = watch(_session(body), 1, timeout_s=30)
        assert (status, detail) == ("hung", "gcs-restart: strike (no end after 75.0 s)")

    def test_a_crash_is_a_failure_with_the_end_of_its_log(self) -> None:
        status, detail, _, _ = watch(_session("sys.exit('the controller never started')"), 1,
                                     timeout_s=30)  # fmt: skip
        assert status == "failed" and "the controller never started" in detail
