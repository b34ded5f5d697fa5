"""Where the precise prefix router places prompts: against the ideal placement the bench
measures by, what it hands the replica, the engine's KV-cache events it is started with, and how
it shares new and hot prompts out."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from precise_router_support import BLOCK, REPLICAS, Replica, chat, router, text_of, words

from serving.local.bench.workloads import Workload
from serving.router.prefix_affinity import (
    DEFAULT_IMBALANCE_RATIO,
)


def test_ideal_placement_misses_each_system_prompt_once() -> None:
    """The bench's yardstick: with words for tokens, four 160-word prompts asked 8 times each
    hit on 7 of 8 requests, on their whole block-aligned system prompt."""
    from serving.local.bench import prefix as prefix_bench

    workload = Workload(
        name="multi-prompt", input_tokens=170, output_tokens=1, requests=32, concurrency=1,
        shared_prefixes=4, prefix_tokens=160,
    )  # fmt: skip

    ideal = prefix_bench.ideal_hit_rate(workload, "m", words, BLOCK)
    # 28 of 32 requests hit their system prompt (160 words and two role tags, block-aligned to
    # 160) of a 173-token prompt; a placement that missed each prompt twice would give 24/32.
    assert 28 * 160 / (32 * 175) < ideal < 28 * 176 / (32 * 170)
    assert prefix_bench.cache_blocks(workload, "m", words, 2, BLOCK) * BLOCK >= 2 * 170


def test_hits_short_of_ideal_are_told_apart_by_whether_the_replica_had_the_prompt() -> None:
    """The bench says why a run fell short of ideal placement: a prompt's first request on a
    replica that never served it (a new home, the load bound's price) or a miss on a replica
    that had (its engine evicted the prompt). Two requests of a prompt that start together and
    reach the engine in the other order cost nothing: the shares add up to the gap."""
    from serving.local.bench import prefix as prefix_bench
    from serving.local.bench.stats import RequestResult
    from serving.local.bench.workloads import build_requests

    workload = Workload(
        name="multi-prompt", input_tokens=170, output_tokens=1, requests=12, concurrency=1,
        shared_prefixes=2, prefix_tokens=160,
    )  # fmt: skip

    bodies = build_requests(workload, "m")
    ideal = prefix_bench.ideal_cached(workload, "m", words, BLOCK)
    first: dict[str, int] = {}
    for index, body in enumerate(bodies):
        first.setdefault(body["messages"][0]["content"], index)

    def requests_of(prompt: int) -> list[int]:
        system = bodies[prompt]["messages"][0]["content"]
        return [i for i, b in enumerate(bodies) if b["messages"][0]["content"] == system]

    prompt_a, prompt_b = requests_of(0), requests_of(next(i for i in first.values() if i))
    new_home, lost = prompt_a[1], prompt_a[2]
    # prompt B's first two requests start together and reach the engine in the other order
    swapped = {prompt_b[0]: ideal[prompt_b[1]][1], prompt_b[1]: 0}
    results = []
    for index in reversed(range(len(bodies))):  # finished in any order; started in order
        # prompt A's first repeat goes to a second replica, cold; its next one back home, where
        # the engine has evicted the prompt's tail; every other request hits as ideal would
        replica = "r2" if index == new_home else "r1"
        cached = {new_home: 0, lost: BLOCK, **swapped}.get(index, ideal[index][1])
        result = RequestResult(
            ok=True, start_s=float(index), end_s=100.0 - index, replica=replica,
            prompt_tokens=ideal[index][0], cached_tokens=cached, index=index,
        )  # fmt: skip
        results.append(result)
    total = sum(r.prompt_tokens for r in ideal)
    shares = prefix_bench.lost_hits(workload, "m", words, results, BLOCK)
    assert shares[prefix_bench.NEW_HOME] == ideal[new_home][1] / total > 0
    assert shares[prefix_bench.LOST] == (ideal[lost][1] - BLOCK) / total > 0
    hit = sum(r.cached_tokens for r in results) / total
    ideal_rate = prefix_bench.ideal_hit_rate(workload, "m", words, BLOCK)
    assert hit == pytest.approx(ideal_rate - sum(shares.values()))


def test_the_replica_reads_each_prompt_and_hands_the_request_on_untouched() -> None:
    """Direct streaming's app (vLLM's has built its middleware stack before the server sees
    it): the recorder gets the body, the route gets the same body, the response names the
    replica."""
    import asyncio

    from serving.router.cache_report import REPLICA_HEADER
    from serving.router.cache_server import record_prompts

    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def echo(raw: Request) -> dict[str, Any]:
        return {"got": (await raw.body()).decode()}

    app.middleware_stack = app.build_middleware_stack()  # as vLLM's app arrives
    recorded: list[bytes] = []
    record_prompts(app, recorded.append, "replica-7")
    body = b'{"messages": [{"role": "user", "content": "hi"}]}'

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post("/v1/chat/completions", content=body)

    response = asyncio.run(post())
    assert response.json() == {"got": body.decode()}
    assert response.headers[REPLICA_HEADER] == "replica-7"
    assert recorded == [body]


def test_the_engine_is_started_with_kv_cache_events_on_the_replicas_endpoint() -> None:
    """Ray Serve LLM starts vLLM from the engine config the LLMConfig derived when validated:
    the events must reach that, not only the LLMConfig's engine_kwargs."""
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    from serving.router.cache_server import ask_for_kv_events

    config = LLMConfig(
        model_loading_config={"model_id": "m", "model_source": "m"},
        engine_kwargs={"max_model_len": 64},
    )
    config.get_engine_config()  # derived before the server sees it, as in a replica
    assert ask_for_kv_events(config, "ipc:///tmp/x") == "ipc:///tmp/x"
    engine_kwargs = config.get_engine_config().engine_kwargs
    assert engine_kwargs["kv_events_config"]["endpoint"] == "ipc:///tmp/x"
    assert engine_kwargs["kv_events_config"]["enable_kv_cache_events"] is True


def test_new_prompts_are_shared_out_while_a_hot_prompt_fills_one_replica() -> None:
    """Full caches report about the same size whatever they hold, the replica serving a hot
    prompt a little more (each of its requests leaves a distinct question's blocks). New
    prompts must still be shared between the replicas, not all sent to the other one, whose
    cache (four prompts) would then evict them in turn."""
    replicas = {name: Replica(capacity_prompts=4.5) for name in REPLICAS[:2]}
    chosen = router()
    clock = 0.0

    def send(body: dict[str, Any]) -> tuple[str, int]:
        nonlocal clock
        clock += 20.0  # beyond the load window: placement alone decides, not load
        name = chosen.pick(list(replicas), text_of(body), now=clock, wall=clock)
        cached = replicas[name].serve(body, now=clock)
        for other, replica in replicas.items():
            chosen.observe(other, replica.stats(now=clock + 0.5))
        return name, cached

    def question(n: int) -> str:
        return " ".join(f"q{n}x{i}" for i in range(20))

    for system in range(10, 18):  # an earlier workload filled both caches
        send(chat(system, question(system)))
    for n in range(12):
        send(chat(0, question(100 + n)))
    for system in range(1, 7):
        send(chat(system, question(200 + system)))
    misses = [system for system in range(1, 7) if not send(chat(system, question(300)))[1]]
    assert misses == []


@pytest.mark.parametrize("seed", range(4))
def test_a_hot_prompt_gets_a_second_home_at_a_small_deployments_rate(seed: int) -> None:
    """Half the requests share one prompt, the rest seven others, at 2.5 requests/s: the load
    window holds about 25 requests, where a fixed 8 requests of headroom let the hot prompt's
    replica keep up to 2.7 times the other's. The hot prompt must get a second home (there is
    room in both caches), the replicas stay within the router's imbalance ratio, and each
    prompt misses once per replica it lives on, never more."""
    import random

    random.seed(seed)
    replicas = {name: Replica(capacity_prompts=5.5) for name in REPLICAS[:2]}
    chosen = router()
    order = [0] * 40 + [1 + i % 7 for i in range(40)]
    random.shuffle(order)
    picks, misses, reported = [], 0, -1.0
    for n, system in enumerate(order):
        clock = 0.4 * n
        body = chat(system, f"q{n} x")
        name = chosen.pick(list(replicas), text_of(body), now=clock, wall=clock)
        picks.append(name)
        misses += not replicas[name].serve(body, now=clock)
        if clock - reported >= 1.0:  # Serve's stats period
            for other, replica in replicas.items():
                chosen.observe(other, replica.stats(now=clock))
            reported = clock
    counts = Counter(picks)
    assert max(counts.values()) <= DEFAULT_IMBALANCE_RATIO * min(counts.values())
    homes = set(zip(order, picks, strict=True))
    assert {replica for system, replica in homes if system == 0} == set(replicas)
    assert misses == len(homes) == 8 + 1
