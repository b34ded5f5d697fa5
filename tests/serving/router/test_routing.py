"""servestack's prefix-affinity router decides on its own state, with no round trip: a shared
prefix returns to the replica that served it, load stays bounded, a hot prompt spreads, and the
compiler emits the class with the body forwarded to it."""

from __future__ import annotations

import random
from collections import Counter
from types import SimpleNamespace
from typing import Any

from serving.router import prefix_affinity as routing
from serving.router.prefix_affinity import PrefixAffinityRouter
from serving.router.prompts import chunk_hashes, prompt_text

REPLICAS = ["r1", "r2", "r3", "r4"]


def router(**kwargs: Any) -> PrefixAffinityRouter:
    # The decision logic needs none of Ray's wiring (handles, metrics), only its own state.
    instance = PrefixAffinityRouter.__new__(PrefixAffinityRouter)
    instance.initialize_state(**kwargs)
    return instance


def system_prompt(index: int, words: int = 400) -> str:
    return " ".join(f"p{index}w{i}" for i in range(words))


def send(chosen: PrefixAffinityRouter, prompts: list[str], gap_s: float = 0.05) -> list[Any]:
    return [chosen.pick(REPLICAS, prompt, now=i * gap_s) for i, prompt in enumerate(prompts)]


def test_a_shared_prefix_returns_to_the_replica_that_served_it() -> None:
    chosen = router()
    first = chosen.pick(REPLICAS, system_prompt(0) + " question one", now=0.0)
    assert chosen.pick(REPLICAS, system_prompt(0) + " another question", now=0.1) == first


def test_eight_prompts_on_four_replicas_stay_home_and_balanced() -> None:
    random.seed(3)
    order = [i % 8 for i in range(400)]
    random.shuffle(order)
    chosen = router()
    picks = send(chosen, [system_prompt(i) + f" q{n}" for n, i in enumerate(order)])
    homes: dict[int, Counter[Any]] = {}
    for prompt, replica in zip(order, picks, strict=True):
        homes.setdefault(prompt, Counter())[replica] += 1
    # Nearly every request of a prompt lands where that prompt lives.
    at_home = sum(counter.most_common(1)[0][1] for counter in homes.values())
    assert at_home / len(order) >= 0.9
    counts = Counter(picks)
    assert len(counts) == len(REPLICAS)
    assert max(counts.values()) <= 2 * min(counts.values())


def test_new_prompts_go_to_the_emptiest_replica() -> None:
    """Before any load builds up, eight new prompts land two on each of four replicas (power of
    two on empty counts would pile them up by chance)."""
    for seed in range(10):
        random.seed(seed)
        picks = send(router(), [system_prompt(i) for i in range(8)])
        assert sorted(Counter(picks).values()) == [2, 2, 2, 2]


def test_a_hot_prompt_gains_holders_and_spreads_evenly() -> None:
    chosen = router()
    picks = send(chosen, [system_prompt(0) + f" q{n}" for n in range(400)])
    counts = Counter(picks)
    assert len(counts) == len(REPLICAS)
    assert max(counts.values()) <= 2 * min(counts.values())
    # it was cached on each replica once, then every request went to a replica holding it
    assert len(chosen._longest_match(chunk_hashes(system_prompt(0), 256, 256), counts)) == 4


def test_a_hot_prompt_among_others_spreads_and_the_others_stay_home() -> None:
    random.seed(11)
    order = [0] * 200 + [1 + i % 7 for i in range(200)]
    random.shuffle(order)
    picks = send(router(), [system_prompt(i) + f" q{n}" for n, i in enumerate(order)])
    counts = Counter(picks)
    assert max(counts.values()) <= 2 * min(counts.values())
    homes: dict[int, Counter[Any]] = {}
    for prompt, replica in zip(order, picks, strict=True):
        homes.setdefault(prompt, Counter())[replica] += 1
    assert len(homes[0]) >= 3  # the hot prompt is served from most replicas
    cold_at_home = sum(homes[p].most_common(1)[0][1] for p in range(1, 8))
    assert cold_at_home / 200 >= 0.8


def test_a_prompt_whose_replica_is_gone_goes_to_a_live_one() -> None:
    chosen = router()
    first = chosen.pick(REPLICAS, system_prompt(1), now=0.0)
    others = [r for r in REPLICAS if r != first]
    assert chosen.pick(others, system_prompt(1), now=0.1) in others


def test_a_new_replica_gets_new_prompts_only_after_its_grace_period() -> None:
    """HAProxy learns of a new replica after the router does; until the grace period is over,
    new prompts keep going to the replicas it already knows, though the new one is emptiest."""
    chosen = router()
    send(chosen, [system_prompt(i) for i in range(8)])  # r1..r4 hold two prompts each
    grown = [*REPLICAS, "r5"]
    start = 10.0
    early = [chosen.pick(grown, system_prompt(100 + i), now=start + 0.1 * i) for i in range(5)]
    assert "r5" not in early
    late = chosen.pick(grown, system_prompt(200), now=start + routing.NEW_REPLICA_GRACE_S)
    assert late == "r5"


def test_prompt_text_reads_both_routing_paths() -> None:
    body = SimpleNamespace(messages=[{"role": "system", "content": "be brief"}])
    assert prompt_text(SimpleNamespace(args=[body])) == "system:be brief"  # type: ignore[arg-type]
    completion = SimpleNamespace(prompt=["once upon"], messages=None)
    assert prompt_text(SimpleNamespace(args=[completion])) == "once upon"  # type: ignore[arg-type]
    assert prompt_text(SimpleNamespace(args=[])) == ""  # type: ignore[arg-type]


def test_chunk_hashes_name_whole_prefixes() -> None:
    a, b = "x" * 600 + "tail one", "x" * 600 + "tail two"
    assert chunk_hashes(a, 256, 64)[:2] == chunk_hashes(b, 256, 64)[:2]
    assert chunk_hashes("y" + a[1:], 256, 64)[1] != chunk_hashes(a, 256, 64)[1]


def test_prompts_move_off_a_replica_that_owns_too_many() -> None:
    """Three of four prompts first land on one replica (as a random start can make them); the
    router moves prompts until neither replica gets twice the other's requests."""
    chosen, pair = router(), ["r1", "r2"]
    for prompt in range(3):
        chosen.pick(["r1"], system_prompt(prompt), now=0.0)
    random.seed(5)
    order = [i % 4 for i in range(200)]
    random.shuffle(order)
    picks = [
        chosen.pick(pair, system_prompt(p) + f" q{n}", now=0.01 * n) for n, p in enumerate(order)
    ]
    counts = Counter(picks[40:])  # after the first moves
    assert max(counts.values()) <= 2 * min(counts.values())
    homes: dict[int, Counter[Any]] = {}
    for prompt, replica in zip(order[40:], picks[40:], strict=True):
        homes.setdefault(prompt, Counter())[replica] += 1
    at_home = sum(counter.most_common(1)[0][1] for counter in homes.values())
    assert at_home / len(order[40:]) >= 0.8


def test_each_decision_is_counted_by_what_the_router_saw() -> None:
    """No prompt text (the body not forwarded), a prompt nobody holds, its holder with room,
    then its holder past the bound (a prompt carrying all of a replica's requests may take it
    past twice the least loaded's count plus MIN_HEADROOM, 0 x 2 + 2 here): spilled."""
    chosen = router()
    prompt = system_prompt(0)
    seen = []
    for i, text in enumerate(["", prompt, prompt, prompt, prompt]):
        chosen.pick(REPLICAS, text + f" q{i}" if text else "", now=i * 0.01)
        seen.append(chosen.last_decision)
    assert seen == [routing.NO_PROMPT, routing.NEW_PROMPT, routing.AFFINITY, routing.AFFINITY,
                    routing.SPILL]  # fmt: skip
    assert chosen.decisions == Counter(seen)
    assert set(seen) == set(routing.DECISIONS)


def test_the_catalog_names_the_decisions_as_the_router_exports_them() -> None:
    """The alerts read the router's counter by the catalog's spelling: Ray's exporter prefixes
    `ray_` and a counter gains `_total`."""
    from serving.observability import metrics

    assert metrics.ROUTER_DECISIONS == (
        metrics.RAY_PREFIX + routing.DECISION_METRIC + metrics.COUNTER_SUFFIX
    )
    assert {metrics.ROUTER_NO_PROMPT, metrics.ROUTER_SPILL} <= set(routing.DECISIONS)
