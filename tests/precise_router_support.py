"""Builders for the precise prefix router's tests: a router without Ray's wiring, chat
requests on numbered system prompts, and a simulated replica with the ledger its server keeps."""

from __future__ import annotations

from typing import Any

from serving.local.engine.simulation import PrefixCache, chat_prompt, tokenize
from serving.router.cache_report import CacheLedger
from serving.router.precise import PrecisePrefixRouter
from serving.router.prompts import request_text

REPLICAS = ["r1", "r2", "r3", "r4"]
BLOCK = 16


def router(**kwargs: Any) -> PrecisePrefixRouter:
    # The decision logic needs none of Ray's wiring (handles, metrics), only its own state.
    instance = PrecisePrefixRouter.__new__(PrecisePrefixRouter)
    instance.initialize_state(**kwargs)
    return instance


def chat(system: int, question: str) -> dict[str, Any]:
    words = " ".join(f"p{system}w{i}" for i in range(500))
    return {
        "messages": [{"role": "system", "content": words}, {"role": "user", "content": question}]
    }


class Replica:
    """A simulated engine's cache with the ledger the replica's server keeps beside it."""

    def __init__(self, capacity_prompts: float = 100, block: int = BLOCK) -> None:
        self.cache = PrefixCache(int(capacity_prompts * 520), block)
        self.ledger = CacheLedger(block, epoch="e")
        self.cache.listeners.append(self.ledger)

    def serve(self, body: dict[str, Any], now: float) -> int:
        """Serve one request as the engine does; returns its cached prompt tokens."""
        from types import SimpleNamespace

        request = SimpleNamespace(**body)
        tokens = tokenize(chat_prompt(request.messages))
        self.ledger.served(request_text(request), tokens, now=now)
        return self.cache.admit(tokens)

    def stats(self, now: float) -> dict[str, Any]:
        return self.ledger.report(now=now)


def words(body: dict[str, Any]) -> list[int]:
    """The simulated engine's tokens of a chat request, as the bench's yardsticks take them."""
    return [hash(w) for w in tokenize(chat_prompt(body["messages"]))]


def text_of(body: dict[str, Any]) -> str:
    from types import SimpleNamespace

    return request_text(SimpleNamespace(**body))
