"""A server with a known cadence, for the load generator's tests: an OpenAI-style chat endpoint
that streams `--tokens` content events, one every `--every-ms` milliseconds, `--per-write` of
them per write (1: each token on its own; more: batched, as a path that buffers its stream), and
then the usage. Tokens are due at absolute times from the request's start (token i at
(i + 1) x every-ms), so a late wake-up delays one write and not every one after it.

    python tests/cadence_server.py 0 --every-ms 20 --tokens 40 --per-write 1

Standard library only: it starts in a fraction of a second and prints `ready PORT` when it
listens (port 0: one the system picks). It raises its own priority as the load generator does
(nice -10, where allowed): its cadence is the test's known quantity, and at the default priority
a machine busier than the test's own busy loops (CI's other worker) would slow the server's
writes themselves, which no client could measure away.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import time


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(payload: object) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


async def _serve(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    every_s: float,
    tokens: int,
    per_write: int,
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            start = time.perf_counter()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            for first in range(0, tokens, per_write):
                last = min(first + per_write, tokens)
                due = start + last * every_s
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                data = b"".join(
                    _event({"choices": [{"index": 0, "delta": {"content": f" w{i}"}}]})
                    for i in range(first, last)
                )
                writer.write(_chunk(data))
                await writer.drain()
            usage = {"prompt_tokens": 3, "completion_tokens": tokens, "total_tokens": tokens + 3}
            writer.write(_chunk(_event({"choices": [], "usage": usage}) + b"data: [DONE]\n\n"))
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def main(port: int, every_s: float, tokens: int, per_write: int) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve(r, w, every_s, tokens, per_write), "127.0.0.1", port
    )
    port = server.sockets[0].getsockname()[1]
    print(f"ready {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--every-ms", type=float, default=20.0)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--per-write", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(main(args.port, args.every_ms / 1e3, args.tokens, args.per_write))
