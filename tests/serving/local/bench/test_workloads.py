"""`--workload` names, checked in one place for `bench --local` and `bench --url` alike; the
adapter workload, on which adapter-aware routing is weighed against power of two."""

from __future__ import annotations

import random
from collections import Counter, OrderedDict
from types import SimpleNamespace

import pytest

from serving.errors import ServestackError
from serving.local.bench.workloads import (
    ADAPTER_WORKLOAD,
    WORKLOADS,
    adapter_names,
    adapter_workload,
    build_requests,
    chosen_workloads,
)


def test_no_name_means_every_workload_at_the_flags_sizes() -> None:
    found = chosen_workloads((), 10, 4, 2, 300, 0.5)
    assert list(found) == list(WORKLOADS)
    assert found["decode-heavy"].requests == 10


def test_named_workloads_only() -> None:
    assert list(chosen_workloads(("hot-prompt",), 10, 4, 2, 300, 0.5)) == ["hot-prompt"]


def test_an_unknown_name_is_refused_naming_the_flag_and_the_workloads() -> None:
    with pytest.raises(ServestackError) as caught:
        chosen_workloads(("decode-hevy",), 10, 4, 2, 300, 0.5)
    assert caught.value.field == "--workload"
    assert "decode-heavy" in caught.value.render()


def test_the_adapter_workload_takes_each_adapter_in_turn_the_same_every_run() -> None:
    workload = adapter_workload(adapters=4, requests=12)
    requests = build_requests(workload, "llama")
    models = Counter(request["model"] for request in requests)
    assert models == Counter({f"llama:{name}": 3 for name in adapter_names(4)})
    assert [r["model"] for r in requests] == [r["model"] for r in build_requests(workload, "llama")]
    # the prompts are those of the same shape without adapters
    plain = build_requests(workload.model_copy(update={"adapters": 0}), "llama")
    assert [r["messages"] for r in requests] == [r["messages"] for r in plain]
    assert ADAPTER_WORKLOAD not in WORKLOADS  # it runs only on a profile with adapters


def engine_loads(picks: list[tuple[str, str]], per_replica: int) -> int:
    """Adapter loads of engines whose LoRA cache holds `per_replica` adapters, least recently
    used out (vLLM's max_cpu_loras), for (replica, adapter) placements in order."""
    caches: dict[str, OrderedDict[str, None]] = {}
    loads = 0
    for replica, adapter in picks:
        cache = caches.setdefault(replica, OrderedDict())
        if adapter not in cache:
            loads += 1
        cache.pop(adapter, None)
        cache[adapter] = None
        while len(cache) > per_replica:
            cache.popitem(last=False)
    return loads


def test_adapter_aware_routing_loads_far_fewer_adapters_than_power_of_two() -> None:
    """Eight adapters, four replicas holding two each: the adapter-aware router gives each
    adapter a home and loads each about once (a few more while early bursts spill); a uniform
    pick of two (Ray's power of two on the
    direct-streaming path compares no queues) finds the adapter in the replica's cache about
    2 times in 8, so it loads on about 3 requests in 4."""
    from serving.router.prefix_affinity import PrefixAffinityRouter
    from serving.router.prompts import request_text

    replicas, per_replica = ["r1", "r2", "r3", "r4"], 2
    workload = adapter_workload(adapters=8, requests=400)
    requests = build_requests(workload, "llama")
    router = PrefixAffinityRouter.__new__(PrefixAffinityRouter)
    router.initialize_state(adapters_per_replica=per_replica)
    random.seed(5)  # the router breaks ties between empty caches at random
    rng = random.Random(3)
    aware, two = [], []
    for index, request in enumerate(requests):
        body = SimpleNamespace(**request)
        adapter = request["model"].split(":", 1)[1]
        chosen = router.pick(replicas, request_text(body), 3.0 + 0.05 * index, request["model"])
        aware.append((chosen, adapter))
        two.append((rng.sample(replicas, 2)[0], adapter))
    assert engine_loads(aware, per_replica) <= 2 * workload.adapters
    assert engine_loads(two, per_replica) >= 0.6 * len(requests)
    placed = Counter(replica for replica, _ in aware)
    assert max(placed.values()) <= 2 * min(placed.values())  # and the load stays balanced
