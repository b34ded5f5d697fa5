"""The fault runs: how a client's stream is classified (against scripted HTTP answers), and the
short form CI runs on the real local data plane — real Ray Serve 2.56.1 and its HAProxy, the
simulated engine — with servestack's HAProxy setting: replicas scaled up and down under long
streams lose none, a killed replica's streams fail fast with no hang, a killed controller loses
nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from serving.loading import load_profile
from serving.local.faults import (
    FaultLoad,
    FaultReport,
    Session,
    StreamResult,
    run_sessions,
    stream_one,
)
from serving.local.simulation import settings_from_plan

REPO = Path(__file__).resolve().parents[2]
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

    def test_silence_past_the_stall_timeout_is_a_hang(self) -> None:
        async def silent() -> AsyncIterator[bytes]:
            yield TOKEN
            raise httpx.ReadTimeout("no byte")

        transport = httpx.MockTransport(lambda request: httpx.Response(200, content=silent()))
        assert classify(transport).outcome == "hung"


@pytest.fixture(scope="module")
def short_run() -> dict[str, FaultReport]:
    """CI's short form: one local Ray with servestack's HAProxy hard stop (twice the streams
    and a margin), three faults under 6 streams of about 8 s on 2 replicas."""
    spec = load_profile(REPO / "stacks" / "models" / "llama-3.1-8b.yaml")
    settings = settings_from_plan(spec, time_scale=4.0)
    load = FaultLoad(
        streams=6, output_tokens=250, spread_s=2.0, fault_at_s=3.0, scale_hold_s=3.0,
        stall_s=30.0, recover_timeout_s=90.0, graceful_shutdown_s=40,
    )  # fmt: skip
    session = Session(
        name="servestack",
        hard_stop_s=60,
        faults=("scale-up-down", "replica-actor-kill", "controller-kill"),
    )
    reports = run_sessions(spec, settings, [session], load, timeout_s=600)
    return {report.fault: report for report in reports}


def test_scaling_up_and_down_under_long_streams_loses_none(
    short_run: dict[str, FaultReport],
) -> None:
    report = short_run["scale-up-down"]
    assert report.accepted == report.streams
    assert report.completed == report.streams, report


def test_a_killed_replicas_streams_fail_fast_and_nothing_hangs(
    short_run: dict[str, FaultReport],
) -> None:
    report = short_run["replica-actor-kill"]
    assert report.hung == 0, report
    assert report.first_success_after_fault_s is not None
    assert report.recovered_s is not None
    assert report.longest_failure_s is None or report.longest_failure_s < 30.0


def test_a_killed_controller_loses_no_stream(short_run: dict[str, FaultReport]) -> None:
    report = short_run["controller-kill"]
    assert report.completed == report.streams, report
    assert report.recovered_s is not None
