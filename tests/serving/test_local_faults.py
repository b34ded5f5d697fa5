"""The fault runs: how their client classifies a stream (against scripted HTTP answers), and
bad input to `servestack faults`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from cli_support import copy_repo, run

from serving.local.fault_load import InFlight, StreamResult, stream_one

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
