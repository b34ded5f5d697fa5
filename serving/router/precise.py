"""servestack's precise prefix router: prefix affinity on what each replica's engine says it
caches (`serving.router.cache_report`), not only on where the router sent prompts.

It is `serving.router.prefix_affinity.PrefixAffinityRouter` (load bound, new-replica grace, a hot
prompt spread over as many replicas as its traffic needs, nothing asked of a replica per request)
with one change: whom a prefix is held by. For a replica that reports (its deployment's server is
`serving.router.cache_server.CacheReportingServer`), a text chunk is held when its last report lists
it, or when the router sent it there after that report was made (the engine cannot have said
so yet). So a replica whose engine evicted a prompt, reset its cache or restarted stops being
a holder at its next report, and a router that restarts knows every replica's cache from the
first update Serve gives it. A replica that has not reported (yet, or ever) is judged by the
router's own sent-history, as `PrefixAffinityRouter` judges every replica.

An adapter is held by a replica the router sent it to (`serving.router.adapters`) and by one
whose Serve replica says it has loaded it (`RunningReplica.multiplexed_model_ids`, pushed by
`serve.multiplexed` on Serve's normal path; under direct streaming Ray's loader never runs and
the set stays empty, so the sent-history alone decides).

A prompt nobody holds still goes where the router has sent the fewest chunks, not to the
replica reporting the fewest: in steady state every cache is full and reports about the same
size whatever it holds, the replica serving a hot prompt a little more (each of its requests
leaves a distinct question's blocks), so the reported size would send every new prompt to the
other replica, whose cache then evicts them in turn.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ray.serve.request_router import (  # type: ignore[attr-defined]
    PendingRequest,
    ReplicaID,
    RunningReplica,
)

from serving.router.adapters import adapter_of
from serving.router.cache_report import REPORT_KEY, EngineView
from serving.router.prefix_affinity import PrefixAffinityRouter

ROUTER_CLASS = "serving.router.precise:PrecisePrefixRouter"
# Clocks of the router's and the replicas' machines may differ by this much: a prompt sent this
# long before a report's time still counts as held until the next report.
CLOCK_SKEW_S = 0.1


class PrecisePrefixRouter(PrefixAffinityRouter):
    """Prefix affinity on the engines' own reports, sent-history where there is none."""

    def initialize_state(self, **kwargs: Any) -> None:  # type: ignore[override]
        super().initialize_state(**kwargs)
        self._views: dict[ReplicaID, EngineView] = {}
        # per replica: chunk -> when the router last sent it there (wall clock, as reports are)
        self._sent_at: dict[ReplicaID, OrderedDict[int, float]] = {}
        self._wall_now = time.time()
        # per replica: the adapters Serve says it has loaded
        self._loaded: dict[ReplicaID, frozenset[str]] = {}

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        for replica in candidate_replicas:
            self.observe(replica.replica_id, replica.routing_stats)
            self.observe_loaded(replica.replica_id, replica.multiplexed_model_ids)
        return await super().choose_replicas(candidate_replicas, pending_request)

    def observe(self, replica: ReplicaID, stats: dict[str, object] | None) -> None:
        """Take a replica's latest report, if it is newer than the one the router has."""
        current = self._views.get(replica)
        raw = (stats or {}).get(REPORT_KEY)
        if current is not None and isinstance(raw, dict) and raw.get("ts") == current.ts:
            return  # the same report: parse it once
        view = EngineView.parse(stats, self._chunk_chars)
        if view is not None and (current is None or view.ts > current.ts):
            self._views[replica] = view
            self._forget_sent_before(replica, view.ts - CLOCK_SKEW_S)

    def observe_loaded(self, replica: ReplicaID, model_ids: object) -> None:
        """The multiplexed model ids Serve says the replica has loaded (`base:adapter`)."""
        if isinstance(model_ids, (set, frozenset, list, tuple)):
            adapters = frozenset(a for m in model_ids if (a := adapter_of(m)) is not None)
            self._loaded[replica] = adapters

    def pick(
        self,
        candidates: Sequence[ReplicaID],
        text: str,
        now: float,
        model: str | None = None,
        wall: float | None = None,
    ) -> ReplicaID:
        """`now` is the monotonic clock of the load window; `wall` the clock reports carry."""
        self._wall_now = time.time() if wall is None else wall
        if len(self._views) > 2 * len(candidates) + 16:  # forget replicas long gone
            for gone in [r for r in self._views if r not in candidates]:
                self._views.pop(gone, None)
                self._sent_at.pop(gone, None)
                self._loaded.pop(gone, None)
        return super().pick(candidates, text, now, model)

    def _adapter_holders(self, adapter: str, candidates: Sequence[ReplicaID]) -> list[ReplicaID]:
        """Where the router sent the adapter, and where Serve says it is loaded."""
        sent = set(super()._adapter_holders(adapter, candidates))
        return [r for r in candidates if r in sent or adapter in self._loaded.get(r, ())]

    # --- whom a prefix is held by ------------------------------------------------------------

    def _holds(self, replica: ReplicaID, chunk: int) -> bool:
        view = self._views.get(replica)
        if view is None:
            return replica in self._holders.get(chunk, ())
        return chunk in view.held or chunk in self._sent_at.get(replica, {})

    def _longest_match(self, hashes: list[int], load: dict[ReplicaID, int]) -> list[ReplicaID]:
        holders: list[ReplicaID] = list(load)
        matched = False
        for chunk in hashes:
            held_by = [replica for replica in holders if self._holds(replica, chunk)]
            if not held_by:
                break
            holders, matched = held_by, True
        return holders if matched else []

    def _remember(self, hashes: list[int], chosen: ReplicaID) -> None:
        super()._remember(hashes, chosen)
        sent = self._sent_at.setdefault(chosen, OrderedDict())
        for chunk in hashes:
            sent.pop(chunk, None)
            sent[chunk] = self._wall_now
        while len(sent) > self._max_entries:
            sent.popitem(last=False)

    def _forget_sent_before(self, replica: ReplicaID, cutoff: float) -> None:
        """What the replica's report already covers: its engine has said whether it holds it."""
        sent = self._sent_at.get(replica)
        while sent and next(iter(sent.values())) < cutoff:
            sent.popitem(last=False)
