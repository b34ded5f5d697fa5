"""The precise prefix router and the replica ledger behind it: the router's holders are what
each engine says it caches (its block events), the sent-history only fills the gap since the
last report and stands in for replicas that do not report."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request

from serving.local.bench.workloads import Workload
from serving.local.engine.simulation import PrefixCache, chat_prompt, tokenize
from serving.router.cache_report import REPORT_KEY, CacheLedger, EngineView
from serving.router.precise import PrecisePrefixRouter
from serving.router.prefix_affinity import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_IMBALANCE_RATIO,
    chunk_hashes,
    request_text,
)

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


def test_the_report_lists_what_the_engine_holds_and_drops_what_it_evicts() -> None:
    replica = Replica(capacity_prompts=1.5)  # one prompt fits, not two
    replica.serve(chat(0, "first"), now=1.0)
    held = set(replica.stats(now=100.0)[REPORT_KEY]["held"])
    prompt0 = chunk_hashes(text_of(chat(0, "x")), DEFAULT_CHUNK_CHARS, 256)[:8]
    assert set(prompt0) <= held
    # Prompt 1 evicts prompt 0's blocks, least recently used (its first ones) first: its leading
    # chunk is no longer held, so no prefix of it matches.
    replica.serve(chat(1, "second"), now=2.0)
    held = set(replica.stats(now=100.0)[REPORT_KEY]["held"])
    assert prompt0[0] not in held
    prompt1 = chunk_hashes(text_of(chat(1, "x")), DEFAULT_CHUNK_CHARS, 256)[:8]
    assert set(prompt1) <= held


def test_a_cleared_cache_reports_nothing_even_for_prompts_just_sent() -> None:
    replica = Replica()
    replica.serve(chat(0, "first"), now=1.0)
    epoch = replica.stats(now=1.5)[REPORT_KEY]["epoch"]
    replica.cache.clear()
    report = replica.stats(now=1.6)[REPORT_KEY]
    assert report["held"] == []
    assert report["epoch"] != epoch


def test_a_prompt_is_pending_until_the_engine_stores_it() -> None:
    """Arrived but not yet prefilled (queued in the engine): held for the router, so the
    prompt's next requests follow it; once stored and evicted, no longer."""
    ledger = CacheLedger(BLOCK, pending_s=30.0)
    body = chat(0, "q")
    ledger.served(text_of(body), tokenize(chat_prompt(body["messages"])), now=10.0)
    assert ledger.held_chunks(now=11.0)
    assert not ledger.held_chunks(now=41.0)
    cache = PrefixCache(100_000, BLOCK)
    cache.listeners.append(ledger)
    cache.admit(tokenize(chat_prompt(body["messages"])))
    cache.clear()
    assert not ledger.held_chunks(now=11.0)


def test_a_prompt_served_from_the_cache_is_not_held_once_the_engine_evicts_it() -> None:
    """A request that hits the cache makes the engine store nothing (no event for blocks it
    holds already): when those blocks are evicted soon after, its prompt is not held, pending
    or not (it was reported held for the whole pending time: a false hit for the router)."""
    import time

    replica = Replica(capacity_prompts=1.5)  # one prompt fits, not two
    # On the wall clock, as the engine's events are: each request arrives, then is served.
    replica.serve(chat(0, "first"), now=time.time())
    assert replica.serve(chat(0, "again"), now=time.time()) > 0
    replica.serve(chat(1, "other"), now=time.time())
    held = set(replica.stats(now=time.time())[REPORT_KEY]["held"])
    prompt0 = chunk_hashes(text_of(chat(0, "x")), DEFAULT_CHUNK_CHARS, 256)[:8]
    assert prompt0[0] not in held
    assert set(chunk_hashes(text_of(chat(1, "x")), DEFAULT_CHUNK_CHARS, 256)[:8]) <= held


def test_blocks_under_an_unknown_parent_are_left_out() -> None:
    """A lost store event: what follows it cannot be named, so it is not claimed."""
    ledger = CacheLedger(BLOCK)
    ledger.stored(["b2"], "never-seen", ["t"] * BLOCK)
    assert ledger.unknown_parents == 1
    assert ledger.report()[REPORT_KEY]["blocks"] == 0


def test_the_ledger_stays_bounded() -> None:
    ledger = CacheLedger(BLOCK, max_anchors=50, max_report=10)
    cache = PrefixCache(10_000_000, BLOCK)
    cache.listeners.append(ledger)
    for system in range(20):
        body = chat(system, "q")
        tokens = tokenize(chat_prompt(body["messages"]))
        ledger.served(text_of(body), tokens, now=1.0)
        cache.admit(tokens)
    assert len(ledger.held_chunks(now=100.0)) == 10


def test_the_router_stops_treating_a_cleared_replica_as_a_holder_at_its_next_report() -> None:
    replicas = {name: Replica() for name in REPLICAS}
    chosen = router()
    first = chosen.pick(REPLICAS, text_of(chat(0, "a")), now=0.0, wall=1.0)
    replicas[first].serve(chat(0, "a"), now=1.0)
    for name, replica in replicas.items():
        chosen.observe(name, replica.stats(now=3.0))
    assert chosen.pick(REPLICAS, text_of(chat(0, "b")), now=0.1, wall=3.1) == first
    replicas[first].cache.clear()  # reset_prefix_cache
    for name, replica in replicas.items():
        chosen.observe(name, replica.stats(now=5.0))
    holders = chosen._longest_match(
        chunk_hashes(text_of(chat(0, "c")), 256, 256), dict.fromkeys(REPLICAS, 0)
    )
    assert holders == []


# 128: vLLM's CPU build's block, longer than the prompt's first text chunk (about 40 tokens).
@pytest.mark.parametrize("block", [BLOCK, 128])
def test_a_new_router_knows_the_holders_from_the_reports_alone(block: int) -> None:
    """A router restart loses nothing the engines can tell again."""
    replicas = {name: Replica(block=block) for name in REPLICAS}
    for system, name in enumerate(REPLICAS):
        replicas[name].serve(chat(system, "warm"), now=1.0)
    fresh = router()
    for name, replica in replicas.items():
        fresh.observe(name, replica.stats(now=2.0))
    for system, name in enumerate(REPLICAS):
        assert fresh.pick(REPLICAS, text_of(chat(system, "again")), now=0.0, wall=2.5) == name


def test_prompts_sent_since_the_last_report_count_until_the_next() -> None:
    chosen = router()
    for name in REPLICAS:
        chosen.observe(name, Replica().stats(now=1.0))
    first = chosen.pick(REPLICAS, text_of(chat(0, "a")), now=0.0, wall=2.0)
    assert chosen.pick(REPLICAS, text_of(chat(0, "b")), now=0.1, wall=2.1) == first
    # The next report of that replica (made after the send) does not list it: no longer held.
    for name in REPLICAS:
        chosen.observe(name, Replica().stats(now=3.0))
    assert (
        chosen._longest_match(
            chunk_hashes(text_of(chat(0, "c")), 256, 256), dict.fromkeys(REPLICAS, 0)
        )
        == []
    )


def test_replicas_without_reports_fall_back_to_the_sent_history() -> None:
    chosen = router()
    first = chosen.pick(REPLICAS, text_of(chat(0, "a")), now=0.0, wall=1.0)
    chosen.observe(first, {"other": 1})  # stats without servestack's report
    assert chosen.pick(REPLICAS, text_of(chat(0, "b")), now=5.0, wall=60.0) == first


def test_a_report_of_another_chunk_size_is_ignored() -> None:
    report = Replica().stats(now=1.0)
    assert EngineView.parse(report, DEFAULT_CHUNK_CHARS) is not None
    assert EngineView.parse(report, 128) is None
    assert EngineView.parse({REPORT_KEY: {"v": 99}}, DEFAULT_CHUNK_CHARS) is None


def test_the_text_chunk_approximation_predicts_the_engines_hits() -> None:
    """The router matches text chunks; the engine caches token blocks. On shared system
    prompts with distinct questions, the prefix the router predicts as cached (its longest
    held run of chunks, in characters) is within 5% of the prompt of what the engine hits."""
    replica = Replica()
    errors = []
    for n in range(40):
        body = chat(n % 4, f"question {n} " + "extra words " * (n % 7))
        text = text_of(body)
        hashes = chunk_hashes(text, DEFAULT_CHUNK_CHARS, 256)
        held = set(replica.stats(now=1000.0 + n)[REPORT_KEY]["held"])
        run = next((i for i, h in enumerate(hashes) if h not in held), len(hashes))
        predicted = run * DEFAULT_CHUNK_CHARS / len(text)
        tokens = tokenize(chat_prompt(body["messages"]))
        actual = replica.serve(body, now=float(n)) / len(tokens)
        if n >= 4:  # each prompt's first request is a miss on both sides
            errors.append(abs(predicted - actual))
    assert max(errors) < 0.05, errors


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
