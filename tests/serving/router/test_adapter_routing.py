"""servestack's routers place a LoRA adapter's request on a replica that holds the adapter
first, then by prefix among those, within the load bound; a hot adapter spills to the replica
holding the fewest adapters; each placement is counted per adapter. Numbers worked by hand with
the defaults: imbalance_ratio 1.5, slack_requests 8, MIN_HEADROOM 2, a 10 s window."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from serving.router import prefix_affinity as routing
from serving.router.adapters import OTHER_ADAPTER, AdapterHomes, adapter_of
from serving.router.precise import PrecisePrefixRouter
from serving.router.prefix_affinity import (
    ADAPTER_HELD,
    ADAPTER_NEW,
    ADAPTER_SPILL,
    AFFINITY,
    NEW_PROMPT,
    PrefixAffinityRouter,
)
from serving.router.prompts import request_model_of, request_text

ALL = ["r1", "r2", "r3"]


def router(**kwargs: Any) -> PrefixAffinityRouter:
    # The decision logic needs none of Ray's wiring (handles, metrics), only its own state.
    instance = PrefixAffinityRouter.__new__(PrefixAffinityRouter)
    instance.initialize_state(**kwargs)
    return instance


def system_prompt(index: int, words: int = 400) -> str:
    return " ".join(f"p{index}w{i}" for i in range(words))


def text(model: str, prompt: str) -> str:
    """The prompt as the router reads it off a request for `model`."""
    return request_text(SimpleNamespace(model=model, prompt=prompt))


def test_the_adapter_is_read_from_the_body_or_from_serves_multiplexed_id() -> None:
    body = SimpleNamespace(model="llama:support", messages=[{"role": "user", "content": "hi"}])
    direct = SimpleNamespace(args=[body], metadata=SimpleNamespace(multiplexed_model_id=""))
    assert request_model_of(direct) == "llama:support"
    serve_path = SimpleNamespace(args=[], metadata=SimpleNamespace(multiplexed_model_id="llama:x"))
    assert request_model_of(serve_path) == "llama:x"
    assert adapter_of("llama:support") == "support"
    assert adapter_of("llama:team:v2") == "team:v2"  # Ray's get_lora_id: after the first colon
    assert adapter_of("llama") is None and adapter_of(None) is None and adapter_of("llama:") is None


def test_an_adapters_prompt_is_a_prefix_of_its_own() -> None:
    """vLLM caches an adapter's blocks apart from the base model's: the same prompt under two
    adapters, or under an adapter and the base, names different prefixes."""
    prompt = system_prompt(0)
    assert text("llama", prompt) == prompt
    assert len({text("llama", prompt), text("llama:a1", prompt), text("llama:a2", prompt)}) == 3


def test_the_adapter_comes_before_the_prefix() -> None:
    """r3 served a1 with prompt P, then a2 pushed a1 out of its one-adapter cache; r1 holds a1.
    At t=0.3 loads are r1 1, r2 0, r3 2: least 0, limit 0 x 1.5 + 8 = 8. a1 has 3 requests in
    the window (this one counted), all of r1's 1, so r1's bound is max(2 x 0 + 2, 8 - 8) = 2 and
    it has room: a1 stays on r1 though only r3 ever held P under a1 (a new prompt there)."""
    chosen = router(adapters_per_replica=1)
    assert chosen.pick(["r3"], text("m:a1", system_prompt(0)), 0.0, "m:a1") == "r3"
    assert chosen.pick(["r3"], text("m:a2", system_prompt(1)), 0.1, "m:a2") == "r3"
    assert chosen._adapters.evictions == 1
    assert chosen.pick(["r1"], text("m:a1", system_prompt(2)), 0.2, "m:a1") == "r1"
    assert chosen.pick(ALL, text("m:a1", system_prompt(0)), 0.3, "m:a1") == "r1"
    assert chosen.last_adapter_decision == ("a1", ADAPTER_HELD)
    assert chosen.last_decision == NEW_PROMPT


def test_among_the_adapters_holders_the_prefix_decides() -> None:
    """r1 and r2 hold a1, r2 with prompt P. At t=0.2 loads r1 1, r2 1, r3 0: both holders' bound
    is max(2, 8 - 8) = 2, both have room; P's holder r2 (bound 2 for P's 2 requests) takes it."""
    chosen = router()
    chosen.pick(["r1"], text("m:a1", system_prompt(5)), 0.0, "m:a1")
    chosen.pick(["r2"], text("m:a1", system_prompt(0)), 0.1, "m:a1")
    prompt = system_prompt(0) + " and a question"
    assert chosen.pick(ALL, text("m:a1", prompt), 0.2, "m:a1") == "r2"
    assert (chosen.last_adapter_decision, chosen.last_decision) == (("a1", ADAPTER_HELD), AFFINITY)


def test_a_hot_adapter_spills_to_the_replica_holding_fewest_adapters() -> None:
    """r3 holds b1 and b2, r2 holds b3, r1 holds a1 (loads 1, 1, 2 when a1's burst starts at
    t=3, every replica past its grace period). Least 1, limit 1.5 + 8 = 9.5; a1 carries all
    of r1's requests, so r1's bound is max(2 x 1 + 2, 9.5 - 8) = 4: r1 takes a1's next four
    (loads 1 to 4), and the fifth, with r1 at 5, goes to r2, which holds one adapter to r3's
    two. Then r1 (5) and r2 (2) both hold a1 under the bound max(2 x 2 + 2, 11 - 8) = 6."""
    chosen = router()
    chosen.pick(["r3"], text("m:b1", system_prompt(1)), 0.0, "m:b1")
    chosen.pick(["r3"], text("m:b2", system_prompt(2)), 0.1, "m:b2")
    chosen.pick(["r2"], text("m:b3", system_prompt(3)), 0.2, "m:b3")
    chosen.pick(["r1"], text("m:a1", system_prompt(4)), 0.3, "m:a1")
    placed = []
    for k in range(1, 7):
        prompt = text("m:a1", system_prompt(10 + k))
        placed.append(
            (chosen.pick(ALL, prompt, 3.0 + 0.01 * k, "m:a1"), chosen.last_adapter_decision)
        )
    assert placed[:5] == [("r1", ("a1", ADAPTER_HELD))] * 4 + [("r2", ("a1", ADAPTER_SPILL))]
    assert placed[5][0] in {"r1", "r2"} and placed[5][1] == ("a1", ADAPTER_HELD)
    assert chosen.adapter_decisions == Counter(
        {("b1", ADAPTER_NEW): 1, ("b2", ADAPTER_NEW): 1, ("b3", ADAPTER_NEW): 1,
         ("a1", ADAPTER_NEW): 1, ("a1", ADAPTER_HELD): 5, ("a1", ADAPTER_SPILL): 1}
    )  # fmt: skip


def test_a_new_home_pushes_out_no_adapter_that_lives_nowhere_else() -> None:
    """One adapter per replica: r1 holds a (only there), r2 and r3 both hold b. At t=3 loads
    are 1 each (limit 1.5 + 8), so every replica has room for c: on r1 it would push out a,
    whose next request would need a new home in turn; on r2 or r3 it pushes out a copy of b."""
    for seed in range(5):  # ties between r2 and r3 break at random; r1 never wins
        random.seed(seed)
        chosen = router(adapters_per_replica=1)
        chosen.pick(["r1"], "", 0.0, "m:a")
        chosen.pick(["r2"], "", 0.1, "m:b")
        chosen.pick(["r3"], "", 0.2, "m:b")
        assert chosen.pick(ALL, "", 3.0, "m:c") in {"r2", "r3"}
        assert chosen._adapter_holders("a", ALL) == ["r1"]


def test_a_replica_holds_at_most_its_adapters_least_recently_used_out() -> None:
    homes = AdapterHomes(per_replica=2)
    for adapter in ("a", "b", "a", "c"):  # c pushes out b, the least recently sent
        homes.sent(adapter, "r1")
    assert [homes.holds(a, "r1") for a in "abc"] == [True, False, True]
    assert (homes.count("r1"), homes.evictions) == (2, 1)
    with pytest.raises(ValueError, match="adapters_per_replica"):
        AdapterHomes(per_replica=0)


def test_adapter_labels_stay_bounded_by_the_profiles_list() -> None:
    """A client may name any adapter: one the profile does not list is counted as `other`."""
    chosen = router(adapters=["a1"])
    chosen.pick(ALL, "", 0.0, "m:made-up")
    assert chosen.last_adapter_decision == (OTHER_ADAPTER, ADAPTER_NEW)
    chosen.pick(ALL, "", 0.1, "m")
    assert chosen.last_adapter_decision is None  # the base model: no adapter decision
    assert chosen.adapter_decisions == Counter({(OTHER_ADAPTER, ADAPTER_NEW): 1})


def test_the_precise_router_takes_serves_word_on_loaded_adapters() -> None:
    """On Serve's normal path a replica says which multiplexed models it has loaded."""
    precise = PrecisePrefixRouter.__new__(PrecisePrefixRouter)
    precise.initialize_state()
    precise.observe_loaded("r2", {"m:a1"})
    assert precise.pick(ALL, text("m:a1", system_prompt(0)), 0.0, "m:a1", wall=1.0) == "r2"
    assert precise.last_adapter_decision == ("a1", ADAPTER_HELD)


class Recorder:
    def __init__(self) -> None:
        self.tags: list[dict[str, str]] = []

    def inc(self, tags: dict[str, str]) -> None:
        self.tags.append(tags)


def test_choose_replicas_reads_the_forwarded_body_and_counts_per_adapter() -> None:
    """Under HAProxy + direct streaming the router gets a namespace of the body and no
    multiplexed id: the adapter comes from the body's model, and both counters hear of it."""
    chosen = router()
    chosen._deployment_id = SimpleNamespace(app_name="llama")  # type: ignore[attr-defined]
    decisions, adapters = Recorder(), Recorder()
    chosen._exported, chosen._exported_adapters = decisions, adapters
    messages = [{"role": "system", "content": system_prompt(0)}]
    body = SimpleNamespace(model="llama:a1", messages=messages)
    pending = SimpleNamespace(args=[body], metadata=SimpleNamespace(multiplexed_model_id=""))
    replicas = [SimpleNamespace(replica_id=name) for name in ALL]
    ranks = asyncio.run(chosen.choose_replicas(replicas, pending))  # type: ignore[arg-type]
    assert len(ranks) == 1 and len(ranks[0]) == 1
    assert decisions.tags == [{"application": "llama", "decision": routing.NEW_PROMPT}]
    assert adapters.tags == [{"application": "llama", "adapter": "a1", "decision": ADAPTER_NEW}]


def test_the_catalog_names_the_adapter_decisions_as_the_router_exports_them() -> None:
    from serving.observability import metrics

    assert metrics.ROUTER_ADAPTER_DECISIONS == (
        metrics.RAY_PREFIX + routing.ADAPTER_DECISION_METRIC + metrics.COUNTER_SUFFIX
    )
    assert metrics.ROUTER_ADAPTER_DECISIONS in metrics.FAMILIES
