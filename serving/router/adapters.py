"""Which replica holds which LoRA adapter, as far as servestack's routers know: the adapter a
request names, where the router sent each adapter, and the bounded labels its decisions are
counted under. Standard library only: the routers ship whole into the cluster.

Ray Serve LLM 2.56 names an adapter in the OpenAI `model` field as `base:adapter` (everything
after the first colon is the adapter: ray/llm/_internal/common/utils/lora_utils.py
`get_lora_id`). How that name reaches a request router depends on the path:

- Serve's normal path: the ingress (`OpenAiIngress._get_configured_serve_handle`) sets the
  handle's `multiplexed_model_id` to the full model id for an adapter (never for the base), so
  it is in `pending_request.metadata.multiplexed_model_id`, and the parsed request in
  `pending_request.args[0]` carries `model` too;
- HAProxy + direct streaming: `LLMRouter.route` (ray/llm/_internal/serve/core/ingress/
  router.py) passes only a namespace of the forwarded JSON body to `choose_replica`, with no
  multiplexed model id; the adapter is readable from the body's `model` and nowhere else, so
  without RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY the router cannot see it.

A replica holds an adapter when the router sent it a request for that adapter and, if the
replica holds at most `per_replica` adapters (the engine's LoRA cache, vLLM's `max_cpu_loras`),
no more than `per_replica` other adapters went there since: the engine's cache is least
recently used, and so is this one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

# An adapter's label when the profile does not name it (a client may send any model name: the
# labels stay bounded), and how many distinct labels a router without the profile's list gives.
OTHER_ADAPTER = "other"
MAX_ADAPTER_LABELS = 64
# Marks an adapter's prompts apart from the base model's: vLLM keys its prefix cache by LoRA,
# so the same text under two adapters is two prefixes (cache_report's ledger reads it the same).
ADAPTER_MARK = "\x00lora:"


def adapter_of(model: object) -> str | None:
    """The adapter a model id names (`base:adapter`), None for a base model or no id."""
    if not isinstance(model, str) or ":" not in model:
        return None
    adapter = model.split(":", 1)[1]
    return adapter or None


def request_model(request: Any, multiplexed_model_id: str = "") -> str | None:
    """The model id a request asks for: the body's `model` (both paths), else Serve's
    multiplexed model id (the normal path sets it for adapters only)."""
    model = getattr(request, "model", None) if request is not None else None
    if isinstance(model, str) and model:
        return model
    return multiplexed_model_id or None


class AdapterHomes:
    """Per replica, the adapters sent to it, least recently sent first; at most `per_replica`
    each (None: no bound the router knows of)."""

    def __init__(self, per_replica: int | None = None) -> None:
        if per_replica is not None and per_replica < 1:
            raise ValueError(f"adapters_per_replica must be at least 1, got {per_replica}")
        self.per_replica = per_replica
        self._held: dict[Hashable, OrderedDict[str, None]] = {}
        self.evictions = 0  # adapters pushed out of a replica's cache by the router's sends

    def holds(self, adapter: str, replica: Hashable) -> bool:
        return adapter in self._held.get(replica, ())

    def count(self, replica: Hashable) -> int:
        """How many adapters the replica holds."""
        return len(self._held.get(replica, ()))

    def victim(self, replica: Hashable) -> str | None:
        """The adapter one more adapter would push out of the replica (its least recently
        sent), None while it has room."""
        held = self._held.get(replica)
        if not held or self.per_replica is None or len(held) < self.per_replica:
            return None
        return next(iter(held))

    def sent(self, adapter: str, replica: Hashable) -> None:
        """A request for the adapter went to the replica: it holds it, most recently used."""
        held = self._held.setdefault(replica, OrderedDict())
        held.pop(adapter, None)
        held[adapter] = None
        while self.per_replica is not None and len(held) > self.per_replica:
            held.popitem(last=False)
            self.evictions += 1

    def forget_gone(self, live: Sequence[Hashable]) -> None:
        """Drop replicas long gone (bounded memory across scale-downs)."""
        if len(self._held) > 2 * len(live) + 16:
            self._held = {r: held for r, held in self._held.items() if r in live}


class AdapterLabels:
    """The `adapter` label of a decision: the adapter's own name when the profile lists it (or,
    without a list, among the first MAX_ADAPTER_LABELS seen), else OTHER_ADAPTER."""

    def __init__(self, known: Sequence[str] | None = None) -> None:
        self._known = frozenset(known) if known is not None else None
        self._seen: set[str] = set()

    def label(self, adapter: str) -> str:
        if self._known is not None:
            return adapter if adapter in self._known else OTHER_ADAPTER
        if adapter in self._seen or len(self._seen) < MAX_ADAPTER_LABELS:
            self._seen.add(adapter)
            return adapter
        return OTHER_ADAPTER
