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

The endpoint is an OpenAI base address: `http://HOST:PORT` or `https://EDGE/MODEL`; requests go
to its path followed by `/v1/chat/completions`, over TLS for https. A bearer key, where the job
names the environment variable holding it, is read by the child from its own environment: it
never passes through the job, the results or the parent's output.

Loads: at most `concurrency` in flight, each worker sending its next request when its last is
answered (a closed loop); or arrivals at `rate` requests/s, Poisson and seeded, whatever is in
flight (an open loop). `max_seconds` stops sending new requests after that long; those in
flight are answered. Interrupted (Ctrl-C), the parent ends the child and waits for it: no
request is left running.

Only the standard library (and `stream` and `wire`, which import only that) is imported at module
level: the
child process starts in a fraction of a second and holds nothing the parent's benchmark needs.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from serving.local.bench.stream import CHAT_PATH, one_request, timed_result
from serving.local.bench.wire import Connection

__all__ = ["CHAT_PATH", "LoadError", "LoadRun", "generate_load", "one_request", "timed_result"]

# The priority the load generator asks for: above every process started at the default 0.
RAISED_NICE = -10
# Line prefixes on the child's stdout: one finished request, the run's end.
RESULT_PREFIX = "R "
DONE_PREFIX = "D "


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
    *,
    rate: float | None = None,
    seed: int = 0,
    max_seconds: float | None = None,
    bearer_variable: str | None = None,
) -> LoadRun:
    """Send `requests` to `endpoint` from the load generator's own process, at most
    `concurrency` in flight, and wait for the answers. With `closed_loop=(warm_up_s,
    measure_s)` every worker sends the requests over and over (cycling) for warm-up then measure
    seconds, and the run reports the requests finished inside the measured window only
    (`LoadRun.window`): the closed loop of a capacity sweep. With `rate`, requests arrive at
    that many per second (Poisson, from `seed`) whatever is in flight. `max_seconds` stops
    sending after that long; `bearer_variable` names the environment variable whose key the
    child sends as `Authorization: Bearer`. Interrupted, the child is ended and waited for."""
    from serving.router.cache_report import REPLICA_HEADER

    job = {
        "endpoint": endpoint,
        "replica_header": REPLICA_HEADER,
        "requests": list(requests),
        "concurrency": concurrency,
        "timeout_s": timeout_s,
        "closed_loop": list(closed_loop) if closed_loop is not None else None,
        "rate": rate,
        "seed": seed,
        "max_seconds": max_seconds,
        "bearer_variable": bearer_variable,
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
    try:
        for line in process.stdout:
            if line.startswith(RESULT_PREFIX):
                results.append(json.loads(line[len(RESULT_PREFIX) :]))
                if on_done is not None:
                    on_done()
            elif line.startswith(DONE_PREFIX):
                done = json.loads(line[len(DONE_PREFIX) :])
    except BaseException:
        # Ctrl-C (or any failure here): the child's requests end with it, now.
        process.kill()
        process.wait()
        raise
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


# --- the child's side: the load ----------------------------------------------------------


def _target(job: dict[str, Any]) -> tuple[str, int, bool, str, str]:
    """Host, port, TLS, the chat path under the endpoint's own path, and the extra header
    lines (the bearer key, read from the variable the job names)."""
    address = urlsplit(job["endpoint"])
    tls = address.scheme == "https"
    port = address.port or (443 if tls else 80)
    path = address.path.rstrip("/") + CHAT_PATH
    variable = job.get("bearer_variable")
    key = os.environ.get(variable, "") if variable else ""
    headers = f"Authorization: Bearer {key}\r\n" if key else ""
    return address.hostname or "127.0.0.1", port, tls, path, headers


async def _load(job: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    host, port, tls, path, extra_headers = _target(job)
    requests: list[dict[str, Any]] = job["requests"]
    concurrency: int = job["concurrency"]
    closed_loop = job.get("closed_loop")
    timeout_s: float = job["timeout_s"]
    next_index = 0
    start = time.perf_counter()
    deadline = start + job["max_seconds"] if job.get("max_seconds") else None
    window: dict[str, Any] = {}
    if closed_loop is not None:
        warm_up_s, measure_s = closed_loop
        opens, closes = start + warm_up_s, start + warm_up_s + measure_s
        window = {"warm_up_s": warm_up_s, "measure_s": measure_s, "finished": 0, "failed": 0,
                  "latencies_s": [], "errors": []}  # fmt: skip

    async def send(connection: Connection, index: int) -> dict[str, Any]:
        body = requests[index % len(requests)]
        try:
            return await asyncio.wait_for(
                one_request(
                    connection, body, index, job.get("replica_header", ""), path, extra_headers
                ),
                timeout_s,
            )
        except TimeoutError:
            connection.close()
            now = time.perf_counter()
            return {"ok": False, "error": f"no answer in {timeout_s:g} s",
                    "start_s": now - timeout_s, "end_s": now, "index": index}  # fmt: skip

    async def worker() -> None:
        nonlocal next_index
        connection = Connection(host, port, tls)
        try:
            while True:
                if deadline is not None and time.perf_counter() >= deadline:
                    return
                if closed_loop is None:
                    if next_index >= len(requests):
                        return
                elif time.perf_counter() >= closes:
                    return
                index = next_index
                next_index += 1
                result = await send(connection, index)
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

    async def open_loop(rate: float) -> None:
        # Arrivals on their own schedule: a slow answer delays no later request.
        arrivals = random.Random(job.get("seed", 0))
        idle: list[Connection] = []
        opened: list[Connection] = []

        async def arrive(index: int) -> None:
            connection = idle.pop() if idle else Connection(host, port, tls)
            if connection not in opened:
                opened.append(connection)
            emit(await send(connection, index))
            idle.append(connection)

        tasks = []
        at = start
        try:
            for index in range(len(requests)):
                at += arrivals.expovariate(rate)
                if deadline is not None and at >= deadline:
                    break
                await asyncio.sleep(max(0.0, at - time.perf_counter()))
                tasks.append(asyncio.create_task(arrive(index)))
            await asyncio.gather(*tasks)
        finally:
            for connection in opened:
                connection.close()

    if job.get("rate"):
        await open_loop(job["rate"])
    else:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"duration_s": time.perf_counter() - start, "window": window}


def main() -> int:
    job = json.loads(sys.stdin.read())
    isolation = isolate()

    def emit(result: dict[str, Any]) -> None:
        sys.stdout.write(RESULT_PREFIX + json.dumps(result) + "\n")
        sys.stdout.flush()

    try:
        done = asyncio.run(_load(job, emit))
    except KeyboardInterrupt:  # Ctrl-C reaches the child too: end quietly, the parent reports
        return 130
    sys.stdout.write(DONE_PREFIX + json.dumps(done | {"isolation": isolation}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
