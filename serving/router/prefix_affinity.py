"""servestack's prefix-affinity request router for Ray Serve 2.56.

Why not Ray's PrefixCacheAffinityRouter: under HAProxy + direct streaming, HAProxy asks the
LLMRouter deployment for a replica through `handle.choose_replica(..., _reserve=False)`. That
fast path (ray/serve/_private/router.py) calls the router's `choose_replicas` and takes the first
replica of the first rank; it never calls `on_request_routed` (where Ray's router fills its
prefix tree) and never probes queue lengths. Ray's tree stays empty, every replica ties, and the
first one takes every request. (Ray's power of two on that path is a uniform random pick of
two, first one taken: no queue is ever compared.)

This router keeps everything it needs inside `choose_replicas`, so it works the same on that
fast path and on Serve's normal path. Under HAProxy + direct streaming (the default) there is
one instance per application: Ray pins the ingress request router deployment (`LLMRouter`) to
one replica, since HAProxy expects a single router endpoint
(ray/llm/_internal/serve/core/ingress/builder.py), so one instance sees every request. On
Serve's normal path each ingress replica routes with an instance of its own, and affinity
weakens as the ingress scales out.

- prefix matching on hashed text chunks of the prompt (chained, so a chunk's hash names the
  whole prefix up to it). The router remembers which replicas it sent each chunk to; the ones
  holding the longest matching run are the prompt's holders;
- load bound without a round trip: the router counts the requests it sent to each replica in
  the last `window_s` seconds (it sees no completions on the fast path); a replica above
  `imbalance_ratio` x the least-loaded replica's count plus `slack_requests` is overloaded.
  The slack absorbs a short window's fluctuations, but over a window of W requests it lets two
  replicas settle at (ratio x W + slack) / (W - slack) to one: 2.7 at the 25-odd requests a
  window holds at a small deployment's rate. So a prompt's share of the replica's count takes
  that share of the slack away, down to twice the least loaded's count plus `MIN_HEADROOM`:
  past that line a replica sheds the prompt carrying most of its requests (a hot one), which
  gets a second home, while a prompt with few of them stays home (moving it would cost a miss
  for little balance). Below the line nothing changes;
- a holder that is not overloaded takes the request (the least loaded of them): a cache hit;
- a prompt nobody holds goes to the replica holding the fewest chunks (the emptiest cache, as
  far as the router knows), so shared prompts spread evenly before any load builds up;
- under skew, when every holder is overloaded, power of two on the counts picks among the
  replicas that are not, and that replica becomes one more holder: a hot prompt ends up cached
  on as many replicas as its traffic needs, and each of its requests is still a hit;
- a replica the router first saw less than `NEW_REPLICA_GRACE_S` ago is not handed new
  prompts or spill-over while older ones can take them: Serve tells the router about a new
  replica a few hundred ms before HAProxy's server list has it, and HAProxy answers 503
  ("unknown_replica_id") to a request routed there. Being the emptiest, a new replica would
  otherwise draw every new prompt in that window.

LoRA adapters (`serving.router.adapters`): a request for an adapter (`model: base:adapter`) goes
to a replica holding the adapter first, then by prefix among those: a holder within the load
bound (the adapter's share of the holder's requests taking the slack away, as a prompt's does)
keeps it, so the engine loads nothing; when nobody holds it, or every holder is past its bound,
it gets a new home among the replicas within the bound: one where it pushes out no adapter that
lives nowhere else (whose next request would need a new home in turn), then the one holding the
fewest adapters. A base-model request routes on its prefix alone.

Each decision is counted (`DECISIONS`) and exported per application as
`servestack_router_decisions` (scraped as `ray_servestack_router_decisions_total`), so that a
router that stops paying is seen rather than inferred from a falling hit rate: `no_prompt` means
the router saw no prompt text (the request body was not forwarded to it, or held no prompt) and
placed the request as a new prompt; `spill` that every replica holding the prompt was past its
load bound. A request for an adapter is counted once more, per adapter, in
`servestack_router_adapter_decisions` (`ADAPTER_DECISIONS`): `adapter_held`, `adapter_spill`,
`adapter_new`; the share of `adapter_new` is the share of requests that made an engine load.
"""

from __future__ import annotations

import random
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Hashable, Sequence
from typing import Any

# Ray's public module re-exports these without __all__, which strict mypy does not count.
from ray.serve.request_router import (  # type: ignore[attr-defined]
    PendingRequest,
    ReplicaID,
    RequestRouter,
    RunningReplica,
)
from ray.util import metrics as ray_metrics

from serving.router.adapters import AdapterHomes, AdapterLabels, adapter_of
from serving.router.prompts import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_MAX_CHUNKS,
    chunk_hashes,
    prompt_text,
    request_model_of,
)

ROUTER_CLASS = "serving.router.prefix_affinity:PrefixAffinityRouter"

DEFAULT_WINDOW_S = 10.0
DEFAULT_IMBALANCE_RATIO = 1.5
DEFAULT_SLACK_REQUESTS = 8
# Requests a replica may take past twice the least loaded's before it sheds a hot prompt, so
# the first repeats of a new prompt stay home.
MIN_HEADROOM = 2
DEFAULT_MAX_ENTRIES = 200_000
# Measured locally: HAProxy learned of new replicas up to 0.3 s after the router did.
NEW_REPLICA_GRACE_S = 2.0

# What the router decided for a request: a holder with room took it; every holder was past its
# bound (spilled to another replica); nobody held the prompt; the router saw no prompt at all.
AFFINITY, SPILL, NEW_PROMPT, NO_PROMPT = "affinity", "spill", "new_prompt", "no_prompt"
DECISIONS = (AFFINITY, SPILL, NEW_PROMPT, NO_PROMPT)
DECISION_METRIC = "servestack_router_decisions"
DECISION_TAGS = ("application", "decision")
# What it decided for an adapter's request: a holder with room took it; every holder was past
# its bound; nobody held it (both of the last two make the chosen replica's engine load it).
ADAPTER_HELD, ADAPTER_SPILL, ADAPTER_NEW = "adapter_held", "adapter_spill", "adapter_new"
ADAPTER_DECISIONS = (ADAPTER_HELD, ADAPTER_SPILL, ADAPTER_NEW)
ADAPTER_DECISION_METRIC = "servestack_router_adapter_decisions"
ADAPTER_DECISION_TAGS = ("application", "adapter", "decision")


def share(part: int, whole: int) -> float:
    """`part` over `whole`, at most 1; 0 for nothing."""
    return min(1.0, part / whole) if whole else 0.0


class PrefixAffinityRouter(RequestRouter):
    """Routes a shared prefix to a replica that already holds it, unless all of them are
    overloaded; new prefixes to the emptiest replica; power of two under skew."""

    def initialize_state(
        self,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
        max_chunks: int = DEFAULT_MAX_CHUNKS,
        window_s: float = DEFAULT_WINDOW_S,
        imbalance_ratio: float = DEFAULT_IMBALANCE_RATIO,
        slack_requests: int = DEFAULT_SLACK_REQUESTS,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        adapters_per_replica: int | None = None,
        adapters: Sequence[str] | None = None,
        **_: Any,  # Ray's signature; the profile's router section admits only the names above
    ) -> None:
        self._chunk_chars = chunk_chars
        self._max_chunks = max_chunks
        self._window_s = window_s
        self._imbalance_ratio = imbalance_ratio
        self._slack_requests = slack_requests
        self._max_entries = max_entries
        # chunk hash -> the replicas it was sent to, most recent first
        self._holders: OrderedDict[int, list[ReplicaID]] = OrderedDict()
        self._held: Counter[ReplicaID] = Counter()  # chunks each replica holds
        self._recent: dict[ReplicaID, deque[float]] = {}
        # a prompt's first chunk (or an adapter's name) -> when the router last routed it, over
        # the load window
        self._prompt_recent: OrderedDict[Hashable, deque[float]] = OrderedDict()
        self._adapters = AdapterHomes(adapters_per_replica)
        self._adapter_labels = AdapterLabels(adapters)
        self._first_seen: dict[ReplicaID, float] = {}
        self.decisions: Counter[str] = Counter()
        self.last_decision: str | None = None
        # (adapter label, decision) -> requests
        self.adapter_decisions: Counter[tuple[str, str]] = Counter()
        self.last_adapter_decision: tuple[str, str] | None = None
        self._exported: Any = None
        self._exported_adapters: Any = None

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        if not candidate_replicas:
            return []
        by_id = {replica.replica_id: replica for replica in candidate_replicas}
        model = request_model_of(pending_request)
        chosen = self.pick(list(by_id), prompt_text(pending_request), time.monotonic(), model)
        self._export(self.last_decision, self.last_adapter_decision)
        return [[by_id[chosen]]]

    def _export(self, decision: str | None, adapter_decision: tuple[str, str] | None) -> None:
        """Count the decisions in Ray's metrics, by application (made on first use: only a
        router running inside Ray exports)."""
        if decision is None:
            return
        deployment = getattr(self, "_deployment_id", None)
        application = getattr(deployment, "app_name", "") or ""
        if self._exported is None:
            self._exported = ray_metrics.Counter(
                DECISION_METRIC,
                "Requests servestack's prefix router placed, by what it decided.",
                tag_keys=DECISION_TAGS,
            )
        self._exported.inc(tags={"application": application, "decision": decision})
        if adapter_decision is None:
            return
        if self._exported_adapters is None:
            self._exported_adapters = ray_metrics.Counter(
                ADAPTER_DECISION_METRIC,
                "Requests for a LoRA adapter servestack's router placed, by adapter and by "
                "whether a replica held it.",
                tag_keys=ADAPTER_DECISION_TAGS,
            )
        label, placed = adapter_decision
        self._exported_adapters.inc(
            tags={"application": application, "adapter": label, "decision": placed}
        )

    # Pure decision logic, separate from Ray's types so it can be tested on its own.
    def pick(
        self, candidates: Sequence[ReplicaID], text: str, now: float, model: str | None = None
    ) -> ReplicaID:
        if not hasattr(self, "_holders"):
            self.initialize_state()
        load = {replica: self._load(replica, now) for replica in candidates}
        settled = self._settled(candidates, now)
        least = min(load.values())
        limit = self._imbalance_ratio * least + self._slack_requests
        adapter = adapter_of(model)
        self.last_adapter_decision = None
        if adapter is not None:
            pool = self._adapter_pool(adapter, candidates, settled, load, limit, least, now)
            load = {replica: load[replica] for replica in pool}
            settled = [replica for replica in settled if replica in load] or pool
        hashes = chunk_hashes(text, self._chunk_chars, self._max_chunks) if text else []
        holders = self._longest_match(hashes, load)
        prompt_load = self._prompt_load(hashes[0], now) if hashes else 0
        with_room = [
            replica
            for replica in holders
            if load[replica] <= self._bound(limit, least, load[replica], prompt_load)
        ]
        if with_room:
            chosen, decision = min(with_room, key=load.__getitem__), AFFINITY
        elif holders:
            chosen = self._power_of_two(
                [replica for replica in settled if load[replica] <= limit] or settled, load
            )
            decision = SPILL
        else:
            shuffled = random.sample(settled, k=len(settled))
            chosen = min(shuffled, key=lambda replica: (self._cache_size(replica), load[replica]))
            decision = NEW_PROMPT if hashes else NO_PROMPT
        self.decisions[decision] += 1
        self.last_decision = decision
        self._remember(hashes, chosen)
        self._recent.setdefault(chosen, deque()).append(now)
        if adapter is not None:
            self._adapters.sent(adapter, chosen)
            self._adapters.forget_gone(candidates)
        return chosen

    def _adapter_pool(
        self,
        adapter: str,
        candidates: Sequence[ReplicaID],
        settled: list[ReplicaID],
        load: dict[ReplicaID, int],
        limit: float,
        least: int,
        now: float,
    ) -> list[ReplicaID]:
        """The replicas an adapter's request may go to, and the adapter decision: its holders
        with room; else (nobody holds it, or every holder is past its bound) the settled
        replicas within the bound where a new adapter costs least (`_home_cost`): one whose
        engine would push out no adapter that lives nowhere else, then the fewest adapters."""
        adapter_load = self._recent_count(("adapter", adapter), now)
        holders = self._adapter_holders(adapter, candidates)
        with_room = [
            replica
            for replica in holders
            if load[replica] <= self._bound(limit, least, load[replica], adapter_load)
        ]
        if with_room:
            pool, decision = with_room, ADAPTER_HELD
        else:
            others = [replica for replica in settled if replica not in holders] or settled
            room = [replica for replica in others if load[replica] <= limit] or others
            cost = {replica: self._home_cost(replica, candidates) for replica in room}
            cheapest = min(cost.values())
            pool = [replica for replica in room if cost[replica] == cheapest]
            decision = ADAPTER_SPILL if holders else ADAPTER_NEW
        label = self._adapter_labels.label(adapter)
        self.adapter_decisions[(label, decision)] += 1
        self.last_adapter_decision = (label, decision)
        return pool

    def _home_cost(self, replica: ReplicaID, candidates: Sequence[ReplicaID]) -> tuple[int, int]:
        """What a new adapter there costs: whether it pushes out an adapter no other replica
        holds (whose next request then needs a new home in turn), then the adapters held."""
        victim = self._adapters.victim(replica)
        orphaned = victim is not None and not any(
            other != replica and self._adapters.holds(victim, other) for other in candidates
        )
        return int(orphaned), self._adapters.count(replica)

    def _adapter_holders(self, adapter: str, candidates: Sequence[ReplicaID]) -> list[ReplicaID]:
        """The live replicas holding the adapter, as far as the router's sends say."""
        return [replica for replica in candidates if self._adapters.holds(adapter, replica)]

    def _settled(self, candidates: Sequence[ReplicaID], now: float) -> list[ReplicaID]:
        """The candidates seen for at least the grace period (all of them if none has been)."""
        for replica in candidates:
            self._first_seen.setdefault(replica, now)
        if len(self._first_seen) > 2 * len(candidates) + 16:  # forget replicas long gone
            self._first_seen = {r: self._first_seen[r] for r in candidates}
        settled = [r for r in candidates if now - self._first_seen[r] >= NEW_REPLICA_GRACE_S]
        return settled or list(candidates)

    def _cache_size(self, replica: ReplicaID) -> int:
        """How much the replica caches, as far as the router knows: chunks sent there."""
        return self._held[replica]

    def _longest_match(self, hashes: list[int], load: dict[ReplicaID, int]) -> list[ReplicaID]:
        """The live replicas holding the longest run of the prompt's leading chunks."""
        holders: list[ReplicaID] = []
        for block in hashes:
            held_by = [r for r in self._holders.get(block, ()) if r in load]
            if holders:
                held_by = [r for r in held_by if r in holders]
            if not held_by:
                break
            holders = held_by
        return holders

    def _remember(self, hashes: list[int], chosen: ReplicaID) -> None:
        """The prefix now also lives where this request went."""
        for block in hashes:
            held_by = self._holders.pop(block, [])
            if chosen in held_by:
                held_by.remove(chosen)
            else:
                self._held[chosen] += 1
            self._holders[block] = [chosen, *held_by]
        while len(self._holders) > self._max_entries:
            _, forgotten = self._holders.popitem(last=False)
            self._held.subtract(forgotten)

    def _bound(self, limit: float, least: int, replica_load: int, prompt_load: int) -> float:
        """The most requests a holder may have had in the window and still take the prompt: the
        ratio's bound with its slack, less the prompt's share of the slack (its requests in the
        window, to any replica, over the holder's count, at most all of it), but not below twice
        the least loaded's count plus `MIN_HEADROOM`."""
        line = max(self._imbalance_ratio, 2.0) * least + MIN_HEADROOM
        return min(
            limit, max(line, limit - self._slack_requests * share(prompt_load, replica_load))
        )

    def _prompt_load(self, first_chunk: int, now: float) -> int:
        """Requests routed with this first chunk (any replica) in the load window, this one
        counted: prompts that share it share cached blocks, so they move together."""
        return self._recent_count(first_chunk, now)

    def _recent_count(self, key: Hashable, now: float) -> int:
        """Requests routed under `key` (a prompt's first chunk, an adapter) in the load window,
        this one counted."""
        sent = self._prompt_recent.pop(key, None) or deque()
        self._prompt_recent[key] = sent  # most recently routed last
        while sent and now - sent[0] > self._window_s:
            sent.popleft()
        sent.append(now)
        while len(self._prompt_recent) > self._max_entries:
            self._prompt_recent.popitem(last=False)
        return len(sent)

    def _load(self, replica: ReplicaID, now: float) -> int:
        sent = self._recent.get(replica)
        if sent is None:
            return 0
        while sent and now - sent[0] > self._window_s:
            sent.popleft()
        return len(sent)

    @staticmethod
    def _power_of_two(candidates: Sequence[ReplicaID], load: dict[ReplicaID, int]) -> ReplicaID:
        pair = random.sample(list(candidates), k=min(2, len(candidates)))
        return min(pair, key=load.__getitem__)
