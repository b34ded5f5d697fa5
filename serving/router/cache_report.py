"""What a replica's engine caches, told to the request router: the replica's ledger and the
report it sends, without Ray (so both sides are tested on their own).

The channel is Ray Serve's routing stats: a deployment's `record_routing_stats` is called by the
controller every `request_routing_stats_period_s` and the dict it returns reaches every router
of the deployment as `RunningReplica.routing_stats` (ray/serve/_private/deployment_state.py
`get_routing_stats`, broadcast with the running replicas; ray/serve/_private/request_router/
replica_wrapper.py `routing_stats`). It exists on every path, the HAProxy fast path included,
and the controller keeps each replica's last report, so a router that restarts reads every
replica's cache state from its first update.

The router is tokenizer-free: it names a prefix by chained hashes of fixed-size text chunks
(`serving.router.prompts.chunk_hashes`). The engine names a prefix by the token blocks it
stores. The replica translates: for each request it serves it tokenizes the prompt as its engine
does, computes a content key per full token block (chained over the blocks before it), and anchors
each text chunk to the block holding the token where that chunk ends (by the chunk's share of
the prompt's characters: the approximation, measured in the tests). The engine's block events
(stored, removed, all cleared: vLLM's KV-cache events, or the simulated engine's cache) keep
the set of content keys it holds; the report lists the text chunks whose anchor block is held.

Bounded: the ledger remembers at most `max_anchors` chunks (least recently served forgotten),
the engine's blocks as it reports them (its cache's size), and a report carries at most
`max_report` chunk hashes, most recently served first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from serving.router.prompts import DEFAULT_CHUNK_CHARS, DEFAULT_MAX_CHUNKS, chunk_hashes

# The key of servestack's entry in a replica's routing stats.
REPORT_KEY = "servestack_prefix_cache"
REPORT_VERSION = 1
DEFAULT_MAX_ANCHORS = 65_536
DEFAULT_MAX_REPORT = 2_048
# A request's prefix counts as held from its arrival until the engine has had time to store it
# (it may wait in the engine's queue); the engine's next word on its blocks (stored or removed)
# or a cache reset ends that at once.
DEFAULT_PENDING_S = 30.0
# The response header naming the replica that served it, for benchmarks: vLLM's
# system_fingerprint is a hash of its configuration, the same on every replica.
REPLICA_HEADER = "x-servestack-replica"


def block_keys(tokens: Sequence[Hashable], block_tokens: int) -> list[int]:
    """Content keys of the prompt's full blocks, each chained over the blocks before it: the
    key the ledger gives a block the engine reports as stored with the same tokens."""
    keys, previous = [], 0
    for start in range(0, len(tokens) - block_tokens + 1, block_tokens):
        previous = hash((previous, tuple(tokens[start : start + block_tokens])))
        keys.append(previous)
    return keys


def chunk_anchors(
    text: str, tokens: Sequence[Hashable], block_tokens: int, chunk_chars: int, max_chunks: int
) -> list[tuple[int, int]]:
    """(text chunk hash, content key of the last full block before the token where the chunk
    ends) for each whole text chunk of a prompt of at least one full block. Chunks that end
    inside the first block anchor to it: the router matches a prompt from its first chunk on,
    so a first chunk left out would hide every later one (with a 128-token block, the first
    256 characters end inside it)."""
    keys = block_keys(tokens, block_tokens)
    if not keys or not text:
        return []
    anchors = []
    for index, chunk in enumerate(chunk_hashes(text, chunk_chars, max_chunks)):
        end_token = (index + 1) * chunk_chars * len(tokens) // len(text)
        block = max(min(end_token // block_tokens, len(keys)) - 1, 0)
        anchors.append((chunk, keys[block]))
    return anchors


class CacheLedger:
    """The replica's side: what it served, what its engine holds, and the report."""

    def __init__(
        self,
        block_tokens: int,
        *,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
        max_chunks: int = DEFAULT_MAX_CHUNKS,
        max_anchors: int = DEFAULT_MAX_ANCHORS,
        max_report: int = DEFAULT_MAX_REPORT,
        pending_s: float = DEFAULT_PENDING_S,
        epoch: str = "",
    ) -> None:
        self.block_tokens = block_tokens
        self.chunk_chars = chunk_chars
        self.max_chunks = max_chunks
        self.max_anchors = max_anchors
        self.max_report = max_report
        self.pending_s = pending_s
        self.epoch = epoch
        # text chunk -> (anchor block key, when a request carrying it arrived)
        self._anchors: OrderedDict[int, tuple[int, float]] = OrderedDict()
        self._held_keys: set[int] = set()  # content keys of the blocks the engine holds
        self._engine_keys: dict[Hashable, int] = {}  # engine block hash -> content key
        # content key -> when the engine last stored or removed it: a request's prefix is
        # pending (held before the engine says so) only until the engine next says anything
        # about its blocks. Stored is not enough: a request that hits the cache stores nothing,
        # and its blocks' eviction must end its pending time as well.
        self._told_at: OrderedDict[int, float] = OrderedDict()
        self._cleared_at = 0.0
        self.resets = 0
        self.unknown_parents = 0  # stored blocks whose parent the ledger never saw

    # --- what the replica serves ---------------------------------------------------------

    def served(self, text: str, tokens: Sequence[Hashable], now: float | None = None) -> None:
        """A request arrived: anchor its text chunks to the token blocks it will occupy."""
        now = time.time() if now is None else now
        anchors = chunk_anchors(text, tokens, self.block_tokens, self.chunk_chars, self.max_chunks)
        for chunk, key in anchors:
            self._anchors.pop(chunk, None)
            self._anchors[chunk] = (key, now)
        while len(self._anchors) > self.max_anchors:
            self._anchors.popitem(last=False)

    # --- what the engine says ------------------------------------------------------------

    def stored(
        self,
        block_hashes: Sequence[Hashable],
        parent: Hashable | None,
        tokens: Sequence[Hashable],
        now: float | None = None,
    ) -> None:
        """Blocks the engine stored: `tokens` are all their tokens, in order."""
        now = time.time() if now is None else now
        previous = 0
        if parent is not None:
            known = self._engine_keys.get(parent)
            if known is None:  # a lost event: these blocks cannot be named
                self.unknown_parents += 1
                return
            previous = known
        for index, engine_hash in enumerate(block_hashes):
            start = index * self.block_tokens
            previous = hash((previous, tuple(tokens[start : start + self.block_tokens])))
            self._engine_keys[engine_hash] = previous
            self._held_keys.add(previous)
            self._told(previous, now)

    def removed(self, block_hashes: Iterable[Hashable], now: float | None = None) -> None:
        now = time.time() if now is None else now
        for engine_hash in block_hashes:
            key = self._engine_keys.pop(engine_hash, None)
            if key is not None:
                self._held_keys.discard(key)
                self._told(key, now)

    def _told(self, key: int, now: float) -> None:
        self._told_at.pop(key, None)
        self._told_at[key] = now
        while len(self._told_at) > self.max_anchors:
            self._told_at.popitem(last=False)

    def cleared(self, now: float | None = None) -> None:
        """The engine dropped every block (a prefix-cache reset)."""
        self._engine_keys.clear()
        self._held_keys.clear()
        self._cleared_at = time.time() if now is None else now
        self.resets += 1

    # --- the report ----------------------------------------------------------------------

    def held_chunks(self, now: float) -> list[int]:
        """Text chunks the engine holds (or was just sent), most recently served first."""
        held: list[int] = []
        for chunk, (key, arrived) in reversed(self._anchors.items()):
            if key in self._held_keys or (
                arrived > self._cleared_at
                and now - arrived < self.pending_s
                and self._told_at.get(key, 0.0) < arrived
            ):
                held.append(chunk)
            else:
                continue
            if len(held) >= self.max_report:
                break
        return held

    def report(self, now: float | None = None) -> dict[str, Any]:
        now = time.time() if now is None else now
        return {
            REPORT_KEY: {
                "v": REPORT_VERSION,
                "ts": now,
                "epoch": f"{self.epoch}:{self.resets}",
                "chunk_chars": self.chunk_chars,
                "held": self.held_chunks(now),
                "blocks": len(self._held_keys),
                "unknown_parents": self.unknown_parents,
            }
        }


@dataclass(frozen=True)
class EngineView:
    """The router's side: one replica's last report."""

    ts: float
    epoch: str
    held: frozenset[int]

    @classmethod
    def parse(cls, stats: Mapping[str, Any] | None, chunk_chars: int) -> EngineView | None:
        """The report in a replica's routing stats; None when there is none this router can
        use (no report, another version, or chunks of another size)."""
        report = (stats or {}).get(REPORT_KEY)
        if not isinstance(report, Mapping) or report.get("v") != REPORT_VERSION:
            return None
        if report.get("chunk_chars") != chunk_chars:
            return None
        try:
            return cls(float(report["ts"]), str(report["epoch"]), frozenset(report["held"]))
        except (KeyError, TypeError, ValueError):
            return None
