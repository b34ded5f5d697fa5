"""The load of a fault run, and what its client saw: a bounded, seeded set of long streamed
requests to the local application, each classified as completed (every token and `[DONE]`),
refused (an HTTP error or a broken connection before any token: a clean error a client can
retry), cut (tokens, then the stream broke: the client has half an answer) or hung (no byte for
the stall timeout: the client would wait for ever).

Two waves per fault: the streams in flight when it strikes, and late streams sent just after it
(new requests meeting a dead replica HAProxy still routes to, a restarting controller or GCS)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import httpx
from pydantic import Field

from serving.frozen import Frozen
from serving.local.engine.simulation import FINGERPRINT_PREFIX

Outcome = Literal["completed", "refused", "cut", "hung"]


def retryable(status: int | None) -> bool:
    """A refusal a client retries on its own: a broken connection before any response, or the
    statuses OpenAI's clients retry (408, 409, 429, 5xx)."""
    return status is None or status in (408, 409, 429) or status >= 500


class FaultLoad(Frozen):
    """The load each fault meets and how long to wait for things."""

    streams: int = Field(default=12, ge=1, description="Streamed requests per fault.")
    output_tokens: int = Field(default=400, ge=1, description="Tokens each stream asks for.")
    input_tokens: int = Field(default=50, ge=1)
    spread_s: float = Field(default=3.0, ge=0, description="Streams start over this window.")
    fault_at_s: float = Field(default=5.0, ge=0, description="The fault, after the first start.")
    late_streams: int = Field(
        default=4, ge=0, description="Streams sent after the fault, over `late_spread_s`."
    )
    late_spread_s: float = Field(default=2.0, ge=0)
    scale_hold_s: float = Field(default=6.0, ge=0, description="Time at one more replica.")
    replicas: int = Field(default=2, ge=1)
    stall_s: float = Field(default=30.0, gt=0, description="Silence after which a stream hangs.")
    recover_timeout_s: float = Field(default=120.0, gt=0)
    graceful_shutdown_s: int = Field(
        default=60, ge=1, description="Serve's graceful_shutdown_timeout_s for the replicas."
    )
    seed: int = 7


class StreamResult(Frozen):
    outcome: Outcome
    status: int | None = None
    tokens: int = 0
    replica: str | None = None
    after_fault: bool = False
    start_s: float
    end_s: float
    error: str | None = None


# --- the load -----------------------------------------------------------------------------


def stream_bodies(model: str, load: FaultLoad, count: int, wave: int = 0) -> list[dict[str, Any]]:
    """`count` seeded prompts; each wave of a fault its own."""
    rng = random.Random(load.seed * 1000 + wave)
    return [
        {
            "model": model,
            "messages": [{"role": "user", "content": " ".join(
                f"w{rng.randrange(10_000)}" for _ in range(load.input_tokens)
            )}],
            "max_tokens": load.output_tokens,
            "stream": True,
        }
        for _ in range(count)
    ]  # fmt: skip


class InFlight:
    """Streams in flight per replica (the simulated engine names its replica in each chunk's
    `system_fingerprint`), so a fault can strike the busiest one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: Counter[str] = Counter()

    def add(self, replica: str, count: int) -> None:
        with self._lock:
            self._streams[replica] += count

    def busiest(self) -> str | None:
        with self._lock:
            top = self._streams.most_common(1)
            return top[0][0] if top and top[0][1] > 0 else None


_FINGERPRINT = re.compile(rf'"system_fingerprint":\s*"{re.escape(FINGERPRINT_PREFIX)}([^"]+)"')


async def stream_one(
    client: httpx.AsyncClient,
    endpoint: str,
    body: dict[str, Any],
    origin: float,
    in_flight: InFlight | None = None,
    after_fault: bool = False,
) -> StreamResult:
    start = time.monotonic() - origin
    tokens, status, replica = 0, None, None
    try:
        async with client.stream("POST", f"{endpoint}/v1/chat/completions", json=body) as response:
            status = response.status_code
            if status != 200:
                text = (await response.aread()).decode(errors="replace")[:200]
                return StreamResult(
                    outcome="refused", status=status, start_s=start, after_fault=after_fault,
                    end_s=time.monotonic() - origin, error=f"HTTP {status}: {text}",
                )  # fmt: skip
            async for line in response.aiter_lines():
                if line == "data: [DONE]":
                    if in_flight is not None and replica is not None:
                        in_flight.add(replica, -1)
                    return StreamResult(
                        outcome="completed", status=status, tokens=tokens, start_s=start,
                        end_s=time.monotonic() - origin, replica=replica, after_fault=after_fault,
                    )  # fmt: skip
                if replica is None and (found := _FINGERPRINT.search(line)):
                    replica = found.group(1)
                    if in_flight is not None:
                        in_flight.add(replica, 1)
                if line.startswith("data: ") and '"content"' in line:
                    tokens += 1
                if line.startswith("data: ") and '"error"' in line:
                    raise ValueError(line[6:200])
        error = "the stream ended without [DONE]"
        outcome: Outcome = "cut" if tokens else "refused"
    except httpx.TimeoutException as exc:
        error, outcome = f"{type(exc).__name__}: no byte for the stall timeout", "hung"
    except (httpx.HTTPError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"[:200]
        outcome = "cut" if tokens else "refused"
    if in_flight is not None and replica is not None:
        in_flight.add(replica, -1)
    return StreamResult(
        outcome=outcome, status=status, tokens=tokens, start_s=start, after_fault=after_fault,
        end_s=time.monotonic() - origin, error=error, replica=replica,
    )  # fmt: skip


async def run_streams(
    endpoint: str,
    bodies: Sequence[dict[str, Any]],
    load: FaultLoad,
    origin: float,
    in_flight: InFlight | None = None,
    *,
    spread_s: float,
    after_fault: bool = False,
) -> list[StreamResult]:
    """Start the streams spread over `spread_s` (seeded order), all in flight together."""
    timeout = httpx.Timeout(connect=10.0, read=load.stall_s, write=10.0, pool=10.0)
    limits = httpx.Limits(max_connections=len(bodies) + 4)
    step = spread_s / max(1, len(bodies) - 1)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:

        async def later(index: int, body: dict[str, Any]) -> StreamResult:
            await asyncio.sleep(index * step)
            return await stream_one(client, endpoint, body, origin, in_flight, after_fault)

        return list(await asyncio.gather(*(later(i, b) for i, b in enumerate(bodies))))


def first_success_after(endpoint: str, model: str, since: float, timeout_s: float) -> float | None:
    """Seconds from `since` until a short new request is answered."""
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
    deadline = since + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            response = httpx.post(f"{endpoint}/v1/chat/completions", json=body, timeout=10.0)
            if response.status_code == 200:
                return time.monotonic() - since
        time.sleep(0.25)
    return None
