"""One streamed chat request, timed as its bytes arrive: the load generator's unit of work
(`serving.local.bench.loadgen` says what is timed and why). Standard library and `wire` only: it
runs in the load generator's own process."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Sequence
from typing import Any

from serving.local.bench.wire import (
    READ_BYTES,
    Connection,
    EventStream,
    ResponseBody,
    content_tokens,
)

CHAT_PATH = "/v1/chat/completions"


async def one_request(
    connection: Connection,
    body: dict[str, Any],
    index: int,
    replica_header: str = "",
    path: str = CHAT_PATH,
    extra_headers: str = "",
) -> dict[str, Any]:
    """Send one streamed chat request to `path`; time its arrivals as they come. A reporting
    server names its replica in `replica_header` (vLLM's fingerprint does not);
    `extra_headers` are header lines, each ending in CRLF."""
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {connection.authority}\r\n{extra_headers}"
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
            return {"ok": False, "error": error, "status": status, "start_s": start,
                    "end_s": end, "index": index}  # fmt: skip
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
