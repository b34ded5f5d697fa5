"""The load generator measures a server's cadence, not its own scheduling: against a server
that streams one token every N ms while other processes keep both cores busy, the inter-token
latency per token and the time per output token come out at N within a stated tolerance, and
tokens a server batches into one write count as that many tokens at the cadence they came at.

Not a speed test: the server's cadence is the known quantity; what is asserted is how close the
load generator's figures come to it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from repo import REPO

from serving.local.bench.loadgen import generate_load, timed_result
from serving.local.bench.stats import RequestResult, summarize
from serving.local.bench.wire import EventStream, ResponseBody, content_tokens

EVERY_MS = 20.0
TOKENS = 30
REQUESTS = 16
CONCURRENCY = 4
# Each gap is timed by two wake-ups (the server's and the load generator's) on cores two busy
# loops hold: a few milliseconds either way, a fifth of the cadence at most.
TOLERANCE = 0.2


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """A busy loop per core, in processes of their own, at the default priority."""
    loops = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(len(os.sched_getaffinity(0)))
    ]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def _server(per_write: int) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "cadence_server.py"), "0",
         "--every-ms", str(EVERY_MS), "--tokens", str(TOKENS), "--per-write", str(per_write)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None
    ready = server.stdout.readline().split()
    assert ready[:1] == ["ready"], ready
    return server, f"http://127.0.0.1:{ready[1]}"


REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.mark.parametrize("per_write", [1, 5])
def test_itl_and_tpot_are_the_servers_cadence_on_busy_cores(
    busy_cores: None, per_write: int
) -> None:
    server, endpoint = _server(per_write)
    try:
        run = generate_load(endpoint, [REQUEST] * REQUESTS, CONCURRENCY, timeout_s=60)
    finally:
        server.kill()
        server.wait()
    results = [RequestResult.model_validate(r) for r in run.results]
    report = summarize("cadence", "decode-heavy", results, run.duration_s, 1)
    assert report.failed == 0, report.errors
    assert all(r.output_tokens == TOKENS for r in results)
    every_s = EVERY_MS / 1e3
    assert report.itl_s.p50 == pytest.approx(every_s, rel=TOLERANCE)
    # The first write brings `per_write` tokens at TTFT; the other TOKENS - per_write follow
    # at the cadence, spread over TOKENS - 1 by TPOT's definition.
    tpot_s = (TOKENS - per_write) * every_s / (TOKENS - 1)
    assert report.tpot_s is not None
    assert report.tpot_s.p50 == pytest.approx(tpot_s, rel=TOLERANCE)
    # Tokens per arrival: what the server put in one write, whatever the client's scheduling.
    assert report.tokens_per_chunk == pytest.approx(per_write, rel=TOLERANCE)
    assert run.isolation  # the run says how it kept the engine from starving it


def test_a_gap_that_brought_several_tokens_is_that_many_samples_of_its_share() -> None:
    """Arrivals at 0.1 s (1 token), 0.15 s (1), 0.25 s (4): TTFT 0.1 s; ITL per token 0.05 s
    once, then 0.025 s four times; TPOT (0.3 - 0.1) / 5 with the stream ending at 0.3 s."""
    result = timed_result(
        0.0, 0.3, [(0.1, 1), (0.15, 1), (0.25, 4)], {"completion_tokens": 6}, None, 0
    )
    assert result["ttft_s"] == pytest.approx(0.1)
    assert result["token_gaps_s"] == pytest.approx([0.05, 0.025, 0.025, 0.025, 0.025])
    assert result["tpot_s"] == pytest.approx(0.2 / 5)
    assert result["chunk_tokens"] == [1, 1, 4]


def test_chunked_sse_split_anywhere_across_reads_gives_the_same_events() -> None:
    """Chunk framing and SSE messages cut at every byte boundary: the events come out whole,
    each once, when the read that completes them arrives."""
    events = [{"choices": [{"delta": {"content": f" w{i}"}}]} for i in range(3)]
    sse = b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events)
    sse += b"data: [DONE]\n\n"
    wire_bytes = (
        b"".join(
            f"{len(part):x}\r\n".encode() + part + b"\r\n"
            for part in (sse[:7], sse[7:50], sse[50:])
        )
        + b"0\r\n\r\n"
    )
    for cut in range(1, len(wire_bytes)):
        body, stream = ResponseBody(chunked=True, length=None), EventStream()
        first = stream.feed(body.feed(wire_bytes[:cut]))
        rest = stream.feed(body.feed(wire_bytes[cut:]))
        assert first + rest == events, cut
        assert body.finished
        assert sum(map(content_tokens, first + rest)) == 3
