"""The HTTP/1.1 and server-sent-events framing the load generator reads
(`serving.local.bench.loadgen`): a keep-alive connection, a response body fed read by read
(chunked transfer, a length, or to the end), and the SSE messages in it. Standard library only;
nothing here looks at a clock: the load generator timestamps each read before it hands the
bytes here.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

# Bytes asked of the socket per read: more than any one arrival of tokens holds.
READ_BYTES = 65536


class ResponseBody:
    """A response body fed read by read: chunked transfer decoding, or a length, or to EOF."""

    def __init__(self, chunked: bool, length: int | None) -> None:
        self.chunked, self.left = chunked, length
        self.raw = b""
        self.finished = False
        self._chunk_left = 0  # payload bytes left in the current chunk; -1: expecting its CRLF

    def feed(self, data: bytes) -> bytes:
        """The payload bytes in `data` (after framing is removed); nothing once the body has
        ended (the last chunk's trailer is not payload)."""
        if self.finished:
            return b""
        if not self.chunked:
            if self.left is not None:
                data = data[: self.left]
                self.left -= len(data)
                self.finished = self.left <= 0
            return data
        self.raw += data
        out = bytearray()
        while True:
            if self._chunk_left > 0:
                piece = self.raw[: self._chunk_left]
                out += piece
                self.raw = self.raw[len(piece) :]
                self._chunk_left -= len(piece)
                if self._chunk_left:
                    return bytes(out)
                self._chunk_left = -1
            if self._chunk_left == -1:
                if len(self.raw) < 2:
                    return bytes(out)
                self.raw, self._chunk_left = self.raw[2:], 0
            line_end = self.raw.find(b"\r\n")
            if line_end < 0:
                return bytes(out)
            size = int(self.raw[:line_end].split(b";")[0], 16)
            self.raw = self.raw[line_end + 2 :]
            if size == 0:
                self.finished = True
                return bytes(out)
            self._chunk_left = size


def content_tokens(event: dict[str, Any]) -> int:
    """Content events in an SSE message: one token each, as the engines stream them."""
    tokens = 0
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content") or choice.get("text"):
            tokens += 1
    return tokens


class Connection:
    """One keep-alive HTTP/1.1 connection of a worker, reopened when the server closes it; over
    TLS (the standard library's default context: the system's CAs, the host name checked) where
    `tls` is set."""

    def __init__(self, host: str, port: int, tls: bool = False) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    @property
    def authority(self) -> str:
        """The Host header: the port left out where it is the scheme's own."""
        return self.host if self.port == (443 if self.tls else 80) else f"{self.host}:{self.port}"

    async def open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.reader is None or self.writer is None or self.reader.at_eof():
            context = ssl.create_default_context() if self.tls else None
            self.reader, self.writer = await asyncio.open_connection(
                self.host, self.port, ssl=context
            )
        return self.reader, self.writer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class EventStream:
    """SSE messages as they complete: each `data:` line's JSON, `[DONE]` left out."""

    def __init__(self) -> None:
        self.pending = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        # A message ends with a blank line; some servers write CRLF line ends.
        self.pending = (self.pending + data).replace(b"\r\n", b"\n")
        events = []
        while (cut := self.pending.find(b"\n\n")) >= 0:
            message, self.pending = self.pending[:cut], self.pending[cut + 2 :]
            for line in message.decode().splitlines():
                line = line.strip()
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(json.loads(line[6:]))
        return events
