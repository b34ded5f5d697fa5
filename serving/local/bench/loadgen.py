"""The one load generator of every benchmark (the local one, the real engine's, the capacity
sweep, and later `bench --url`): OpenAI chat requests over HTTP/1.1, streamed, timed by a
process of its own.

Why a process of its own, at a raised priority: a client that shares its process (or its CPU
time, unprioritised) with the engine it measures reads the server-sent events late, several at
once, and its inter-token gaps then measure its own scheduling, not the service (issue 34: ITL
p50 0.0 ms for every Ray Serve configuration). `python -m serving.local.bench.loadgen` runs the
load; on start it raises its own priority to nice -10 (`os.setpriority`, allowed to root or with
CAP_SYS_NICE), so that the kernel runs it as soon as bytes arrive. Where that is refused it pins
itself to the last core instead, which other processes still share, and says so: the run records
which (`LoadRun.isolation`).

What is timed, and how:
- every read from a connection is timestamped (`time.perf_counter`) the moment it returns,
  before anything is parsed; the events that read completes carry that time. An arrival is one
  read that carried content: its tokens are the content events in it (one token per event, as
  vLLM and the simulated engine stream them);
- TTFT: the first arrival with content, from the request's start;
- TPOT per request: (end to end - TTFT) / (tokens - 1), tokens from the response's usage where it
  reports them, else the content events counted;
- ITL per token: each later arrival's gap since the previous one, spread over the tokens it
  carried (a gap of 50 ms that brought 5 tokens is 5 samples of 10 ms), so a server that batches
  its tokens into fewer writes reads as the cadence it delivers tokens at, not as zeros;
- tokens per arrival, as they came.

The HTTP client is the standard library's asyncio streams with its own framing (`wire`): a
few microseconds per read where httpx spends far more, which matters when the capacity sweep
runs it at high concurrency on the same two cores as the service.

Only the standard library (and `wire`, which imports only that) is imported at module level: the
child process starts in a fraction of a second and holds nothing the parent's benchmark needs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from serving.local.bench.wire import (
    READ_BYTES,
    Connection,
    EventStream,
    ResponseBody,
    content_tokens,
)

# The priority the load generator asks for: above every process started at the default 0.
RAISED_NICE = -10
# Line prefixes on the child's stdout: one finished request, the run's end.
RESULT_PREFIX = "R "
DONE_PREFIX = "D "
CHAT_PATH = "/v1/chat/completions"


class LoadError(RuntimeError):
    """The load generator's process failed; the message has its last words."""


# --- the parent's side -------------------------------------------------------------------


@dataclass(frozen=True)
class LoadRun:
    """What one load produced: a raw result per request (the fields of
    `serving.local.bench.stats.RequestResult`), the wall time from the first request to the
    last answer, and how the load generator kept the engine from starving it."""

    results: list[dict[str, Any]]
    duration_s: float
    isolation: str
    window: dict[str, Any] = field(default_factory=dict)


def generate_load(
    endpoint: str,
    requests: Sequence[dict[str, Any]],
    concurrency: int,
    on_done: Callable[[], None] | None = None,
    timeout_s: float = 600.0,
    closed_loop: tuple[float, float] | None = None,
) -> LoadRun:
    """Send `requests` to `endpoint` from the load generator's own process, at most
    `concurrency` in flight, and wait for the answers. With `closed_loop=(warm_up_s,
    measure_s)` every worker sends the requests over and over (cycling) for warm-up then measure
    seconds, and the run reports the requests finished inside the measured window only
    (`LoadRun.window`): the closed loop of a capacity sweep."""
    from serving.router.cache_report import REPLICA_HEADER

    job = {
        "endpoint": endpoint,
        "replica_header": REPLICA_HEADER,
        "requests": list(requests),
        "concurrency": concurrency,
        "timeout_s": timeout_s,
        "closed_loop": list(closed_loop) if closed_loop is not None else None,
    }
    command = [sys.executable, "-m", "serving.local.bench.loadgen"]
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(job))
    process.stdin.close()
    results: list[dict[str, Any]] = []
    done: dict[str, Any] | None = None
    for line in process.stdout:
        if line.startswith(RESULT_PREFIX):
            results.append(json.loads(line[len(RESULT_PREFIX) :]))
            if on_done is not None:
                on_done()
        elif line.startswith(DONE_PREFIX):
            done = json.loads(line[len(DONE_PREFIX) :])
    process.wait()
    if done is None or process.returncode != 0:
        tail = " | ".join((process.stderr.read() if process.stderr else "").splitlines()[-5:])
        raise LoadError(f"the load generator exited with {process.returncode}: {tail}")
    if process.stderr is not None:
        process.stderr.close()
    return LoadRun(
        results=results,
        duration_s=done["duration_s"],
        isolation=done["isolation"],
        window=done.get("window") or {},
    )


# --- the child's side: isolation ---------------------------------------------------------


def isolate() -> str:
    """Raise this process's priority, or failing that pin it to the last core; say which."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, RAISED_NICE)
        return f"raised priority (nice {RAISED_NICE})"
    except PermissionError as exc:
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[-1]})
        return f"pinned to core {cores[-1]}, shared (raising priority was refused: {exc})"


# --- the child's side: one request -------------------------------------------------------


async def one_request(
    connection: Connection, body: dict[str, Any], index: int, replica_header: str = ""
) -> dict[str, Any]:
    """Send one streamed chat request; time its arrivals as they come. A reporting server names
    its replica in `replica_header` (vLLM's fingerprint does not)."""
    payload = json.dumps(body).encode()
    head = (
        f"POST {CHAT_PATH} HTTP/1.1\r\nHost: {connection.host}:{connection.port}\r\n"
        f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode()
    start = time.perf_counter()
    arrivals: list[tuple[float, int]] = []  # (time of the read, content tokens it completed)
    usage: dict[str, Any] = {}
    replica: str | None = None
    try:
        reader, writer = await connection.open()
        writer.write(head + payload)
        await writer.drain()
        header_bytes = await reader.readuntil(b"\r\n\r\n")
        lines = header_bytes.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        pairs = (h.partition(":") for h in lines[1:] if h)
        headers = {name.strip().lower(): value.strip() for name, _, value in pairs}
        length = headers.get("content-length")
        body_reader = ResponseBody(
            headers.get("transfer-encoding", "").lower() == "chunked",
            int(length) if length is not None else None,
        )
        replica = headers.get(replica_header.lower()) if replica_header else None
        text = b""
        events = EventStream()
        while not body_reader.finished:
            data = await reader.read(READ_BYTES)
            now = time.perf_counter()
            if not data:
                break
            payload_bytes = body_reader.feed(data)
            if status != 200:
                text += payload_bytes
                continue
            tokens = 0
            for event in events.feed(payload_bytes):
                replica = replica or event.get("system_fingerprint")
                usage = event.get("usage") or usage
                tokens += content_tokens(event)
            if tokens:
                arrivals.append((now, tokens))
        end = time.perf_counter()
        if headers.get("connection", "").lower() == "close" or not body_reader.finished:
            connection.close()
        if status != 200:
            error = f"HTTP {status}: {text.decode(errors='replace')[:300]}"
            return {"ok": False, "error": error, "start_s": start, "end_s": end, "index": index}
        if not body_reader.finished:
            return {"ok": False, "error": "the server closed the stream before its end",
                    "start_s": start, "end_s": end, "index": index}  # fmt: skip
    except (OSError, ValueError, IndexError, asyncio.IncompleteReadError) as exc:
        connection.close()
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                "start_s": start, "end_s": time.perf_counter(), "index": index}  # fmt: skip
    return timed_result(start, end, arrivals, usage, replica, index)


def timed_result(
    start: float,
    end: float,
    arrivals: Sequence[tuple[float, int]],
    usage: dict[str, Any],
    replica: str | None,
    index: int,
) -> dict[str, Any]:
    """A request's figures from its arrivals (time, tokens): TTFT, TPOT, ITL per token."""
    counted = sum(tokens for _, tokens in arrivals)
    output_tokens = int(usage.get("completion_tokens") or counted)
    ttft = arrivals[0][0] - start if arrivals else None
    itl: list[float] = []
    for (before, _), (now, tokens) in itertools.pairwise(arrivals):
        itl += [(now - before) / tokens] * tokens
    tpot = None
    if ttft is not None and output_tokens > 1:
        tpot = (end - start - ttft) / (output_tokens - 1)
    details = usage.get("prompt_tokens_details") or {}
    return {
        "ok": True,
        "start_s": start,
        "end_s": end,
        "ttft_s": ttft,
        "tpot_s": tpot,
        "token_gaps_s": itl,
        "chunk_tokens": [tokens for _, tokens in arrivals],
        "output_tokens": output_tokens,
        "prompt_tokens": int(usage.get("prompt_tokens", 0)),
        "cached_tokens": int(details.get("cached_tokens") or 0),
        "replica": replica,
        "index": index,
    }


# --- the child's side: the load ----------------------------------------------------------


async def _load(job: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    address = urlsplit(job["endpoint"])
    host, port = address.hostname or "127.0.0.1", address.port or 80
    requests: list[dict[str, Any]] = job["requests"]
    concurrency: int = job["concurrency"]
    closed_loop = job.get("closed_loop")
    timeout_s: float = job["timeout_s"]
    next_index = 0
    start = time.perf_counter()
    window: dict[str, Any] = {}
    if closed_loop is not None:
        warm_up_s, measure_s = closed_loop
        opens, closes = start + warm_up_s, start + warm_up_s + measure_s
        window = {"warm_up_s": warm_up_s, "measure_s": measure_s, "finished": 0, "failed": 0,
                  "latencies_s": [], "errors": []}  # fmt: skip

    async def worker() -> None:
        nonlocal next_index
        connection = Connection(host, port)
        try:
            while True:
                if closed_loop is None:
                    if next_index >= len(requests):
                        return
                elif time.perf_counter() >= closes:
                    return
                index = next_index
                next_index += 1
                body = requests[index % len(requests)]
                try:
                    result = await asyncio.wait_for(
                        one_request(connection, body, index, job.get("replica_header", "")),
                        timeout_s,
                    )
                except TimeoutError:
                    connection.close()
                    now = time.perf_counter()
                    result = {"ok": False, "error": f"no answer in {timeout_s:g} s",
                              "start_s": now - timeout_s, "end_s": now, "index": index}  # fmt: skip
                if closed_loop is None:
                    emit(result)
                elif opens <= result["end_s"] < closes:
                    key = "finished" if result["ok"] else "failed"
                    window[key] += 1
                    if result["ok"]:
                        window["latencies_s"].append(result["end_s"] - result["start_s"])
                    elif len(window["errors"]) < 3:
                        window["errors"].append(result["error"])
        finally:
            connection.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"duration_s": time.perf_counter() - start, "window": window}


def main() -> int:
    job = json.loads(sys.stdin.read())
    isolation = isolate()

    def emit(result: dict[str, Any]) -> None:
        sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
        sys.stdout.flush()

    done = asyncio.run(_load(job, emit))
    sys.stdout.write(DONE_PREFIX + json.dumps(done | {"isolation": isolation}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
