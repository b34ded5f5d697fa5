"""The precise router on real Ray Serve (HAProxy + direct streaming), with the simulated engine
and with vLLM's CPU build: the replicas' reports reach the router through Serve's routing
stats, they list what the engine caches (for vLLM, from its own KV-cache events), and a replica
whose cache is cleared (`reset_prefix_cache`) stops drawing its prompt as a hit within one
stats period.

Two replicas both hold one system prompt (served on each, through the replica's own `chat`), so
the router shares that prompt's requests between them; each request's cached prompt tokens, as
the engine counts them in its usage, are the whole blocks it shares with what that replica
served before. After one replica's reset, and one stats period, every request of that prompt
goes to the other."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from compiled_support import compile_spec
from local_support import engines_cores
from repo import REPO

from serving.compile.routers import ROUTERS
from serving.local.bench import runner as bench
from serving.local.bench.prefix import BLOCK_TOKENS, chat_tokens
from serving.local.bench.stats import RequestResult
from serving.local.engine.simulation import (
    SimulationSettings,
    chat_prompt,
    settings_from_plan,
    tokenize,
)
from serving.local.engine.tiny_models import tiny_model
from serving.local.runtime.app import Engine
from serving.local.runtime.local_ray import local_serve
from serving.router.cache_report import REPORT_KEY
from serving.router.prefix_affinity import DEFAULT_WINDOW_S, MIN_HEADROOM
from serving.router.prompts import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_MAX_CHUNKS,
    chunk_hashes,
    request_text,
)
from serving.spec.loading import load_profile
from serving.spec.parts import Autoscaling, Router
from serving.spec.profile import ModelSpec

PROFILE = REPO / "stacks" / "models" / "llama-3.1-8b.yaml"
KIND = "servestack_precise_prefix"
PERIOD_S = ROUTERS[KIND].stats_period_s or 0.0
# Serve's controller asks each replica within 0.9-1.1 periods and broadcasts on its next loop.
ONE_PERIOD_S = 1.1 * PERIOD_S + 0.5
# A call into a replica (a request, a reset, a report) ends within this.
CALL_TIMEOUT_S = 120.0
# Two vLLM engines take minutes on two cores: marked long; CI runs the one-replica form below.
ENGINES = [
    pytest.param("simulated", id="simulated"),
    pytest.param("vllm", id="vllm", marks=pytest.mark.vllm_long),
]
Tokens = Callable[[dict[str, Any]], list[Any]]


def precise_spec(replicas: int = 2) -> ModelSpec:
    spec = load_profile(PROFILE)
    return spec.model_copy(
        update={
            "router": Router(kind=KIND),
            "autoscaling": Autoscaling(min_replicas=replicas, max_replicas=replicas),
        }
    )


def test_the_precise_router_ships_its_server_and_asks_for_stats_every_period() -> None:
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    from serving.router.cache_server import CacheReportingServer

    config = compile_spec(precise_spec()).llm_config()
    assert config["deployment_config"]["request_router_config"] == {
        "request_router_class": "serving.router.precise:PrecisePrefixRouter",
        "request_routing_stats_period_s": PERIOD_S,
    }
    # Ray Serve LLM resolves the server class from the string, as the cluster will.
    assert LLMConfig(**config).server_cls is CacheReportingServer


def body(system: str, question: str, model: str) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": question},
        ],
        "max_tokens": 2,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


# --- run inside the replicas (Ray's __ray_call__, on the replica actor's event loop) ---------


def _server(actor: Any) -> Any:
    return actor._replica_impl._user_callable_wrapper._callable


def _replica_of(actor: Any) -> str | None:
    """The replica's id, as its responses name it, if it is a reporting LLM server."""
    from ray import serve

    if getattr(_server(actor), "_ledger", None) is None:
        return None
    return str(serve.get_replica_context().replica_id.unique_id)


def _begin(actor: Any, key: str, call: Callable[[Any], Any]) -> None:
    """Start `call(server)` on the loop the replica runs its server's code on; `_outcome` polls
    it (that loop may be this one: the call cannot be awaited here)."""
    wrapper = actor._replica_impl._user_callable_wrapper
    calls = actor.__dict__.setdefault("_servestack_test_calls", {})
    calls[key] = asyncio.run_coroutine_threadsafe(call(wrapper._callable), wrapper.event_loop)


def _outcome(actor: Any, key: str) -> tuple[bool, Any]:
    future = actor._servestack_test_calls[key]
    return (True, future.result()) if future.done() else (False, None)


async def _chat(server: Any, request: dict[str, Any]) -> None:
    """The replica serves the request itself, as if routed there."""
    from ray.llm._internal.serve.core.configs.openai_api_models import ChatCompletionRequest

    async for _ in await server.chat(ChatCompletionRequest(**request)):
        pass


async def _reset(server: Any) -> None:
    await server.reset_prefix_cache()


async def _stats(server: Any) -> dict[str, Any]:
    """What Serve's controller gets from the replica every period."""
    stats: dict[str, Any] = await server.record_routing_stats()
    return stats


# --- the test's side -------------------------------------------------------------------------


def call(actor: Any, make: Callable[[Any], Any]) -> Any:
    import ray

    key = f"{time.monotonic_ns()}"
    ray.get(actor.__ray_call__.remote(_begin, key, make))
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while time.monotonic() < deadline:
        done, result = ray.get(actor.__ray_call__.remote(_outcome, key))
        if done:
            return result
        time.sleep(0.2)
    raise AssertionError(f"the replica's call did not end within {CALL_TIMEOUT_S} s")


def reporting_replicas() -> dict[str, Any]:
    import ray

    servers = {}
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if not entry["name"].startswith("SERVE_REPLICA"):
            continue
        actor = ray.get_actor(entry["name"], namespace=entry["namespace"])
        replica = ray.get(actor.__ray_call__.remote(_replica_of))
        if replica is not None:
            servers[replica] = actor
    return servers


def engine_tokens(engine: Engine, settings: SimulationSettings | None) -> tuple[Tokens, int]:
    """How the engine tokenizes a chat request, and its KV block, as the test knows them (not
    as the server under test learns them)."""
    if settings is None:
        return chat_tokens(str(tiny_model("llama"))), BLOCK_TOKENS
    return (lambda request: tokenize(chat_prompt(request["messages"]))), settings.block_tokens


def cached_by_prefix(tokens: Tokens, block: int, earlier: list[dict[str, Any]], now: Any) -> int:
    """Prompt tokens a prefix cache holding `earlier`'s blocks serves `now` from: the whole
    blocks of its longest common prefix with any of them."""
    ids = tokens(now)
    longest = 0
    for other in earlier:
        common = next(
            (i for i, (a, b) in enumerate(zip(tokens(other), ids, strict=False)) if a != b),
            min(len(ids), len(tokens(other))),
        )
        longest = max(longest, common)
    return longest // block * block


def prompt_chunks(request: dict[str, Any]) -> set[int]:
    """The chunks the router names the request's prompt by."""
    text = request_text(SimpleNamespace(**request))
    return set(chunk_hashes(text, DEFAULT_CHUNK_CHARS, DEFAULT_MAX_CHUNKS))


class Served:
    """The replicas of a run, what each was sent, and the checks every request passes."""

    def __init__(self, engine: Engine, settings: SimulationSettings | None, endpoint: str):
        self.tokens, self.block = engine_tokens(engine, settings)
        self.endpoint = endpoint
        self.actors = reporting_replicas()
        self.earlier: dict[str, list[dict[str, Any]]] = {replica: [] for replica in self.actors}

    def direct(self, replica: str, request: dict[str, Any]) -> None:
        """The replica serves the request through its own `chat`, as if routed there."""
        call(self.actors[replica], lambda server: _chat(server, request))
        self.earlier[replica].append(request)

    def send(self, requests: list[dict[str, Any]]) -> list[RequestResult]:
        """Through HAProxy and the router, one at a time: each request meets the blocks of
        those served before it on its replica, and the engine's usage counts exactly those."""
        results = bench.run_load(self.endpoint, requests, 1).results
        assert all(r.ok for r in results), [r.error for r in results]
        for request, result in zip(requests, results, strict=True):
            assert result.replica in self.earlier, result.replica
            assert result.prompt_tokens == len(self.tokens(request))
            earlier = self.earlier[result.replica]
            expected = cached_by_prefix(self.tokens, self.block, earlier, request)
            assert result.cached_tokens == expected, (result, expected)
            earlier.append(request)
        return results

    def report(self, replica: str) -> dict[str, Any]:
        """The replica's report, as Serve's controller gets it."""
        stats: dict[str, Any] = call(self.actors[replica], _stats)
        report: dict[str, Any] = stats[REPORT_KEY]
        assert report["unknown_parents"] == report["lost_events"] == 0
        return report

    def reset(self, replica: str) -> None:
        """Reset the replica's prefix cache (the engine holds no request's blocks): its
        report says so at once."""
        call(self.actors[replica], _reset)
        self.earlier[replica] = []
        report = self.report(replica)
        assert report["held"] == [] and report["blocks"] == 0

    def assert_holds(self, replica: str, request: dict[str, Any]) -> None:
        """The report lists every chunk of the prompt, on the engine's word: the blocks it
        stored, told by its events (the simulation's cache, or vLLM's KV-cache events)."""
        report = self.report(replica)
        assert prompt_chunks(request) <= set(report["held"])
        assert report["blocks"] >= len(self.tokens(request)) // self.block


def while_streaming(endpoint: str, request: dict[str, Any], act: Callable[[], Any]) -> int:
    """Send the request and `act` once its first token has arrived, while the engine still
    holds its blocks (checked: the request is still streaming when `act` returns); the tokens
    it generated in all, as its usage counts them."""
    import json
    import threading

    import httpx

    streaming, usage = threading.Event(), {}

    def send() -> None:
        url = f"{endpoint}/v1/chat/completions"
        with httpx.stream("POST", url, json=request, timeout=CALL_TIMEOUT_S) as response:
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    chunk = json.loads(line[6:])
                    usage.update(chunk.get("usage") or {})
                    if any(c.get("delta", {}).get("content") for c in chunk["choices"]):
                        streaming.set()

    sender = threading.Thread(target=send)
    sender.start()
    assert streaming.wait(CALL_TIMEOUT_S), "the request never streamed"
    act()
    assert sender.is_alive(), "the request ended before the act: make it longer"
    sender.join(CALL_TIMEOUT_S)
    return int(usage.get("completion_tokens", 0))


def travel_by_value() -> None:
    """The helpers above run inside the replicas (Ray's __ray_call__), where tests/ is not a
    package on the path: they travel by value."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


SYSTEM = " ".join(f"s{i}" for i in range(600))


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("engine", ENGINES)
def test_a_cleared_cache_stops_drawing_its_prompt_within_one_stats_period(engine: Engine) -> None:
    travel_by_value()
    spec = precise_spec()
    settings = None
    if engine == "simulated":
        settings = settings_from_plan(spec, time_scale=0.05, cache_tokens=100_000)
    with local_serve(spec, settings, engine=engine) as running:
        run = Served(engine, settings, running.endpoint)
        assert len(run.actors) == 2, run.actors
        if engine == "vllm" and len(os.sched_getaffinity(0)) >= 2:
            # Each replica's engine on a core of its own, not both on vLLM's automatic core 0.
            cores = engines_cores()
            assert len(cores) == 2 and len(set(cores)) == 2, cores
        warm = body(SYSTEM, "warm", spec.name)
        for replica in run.actors:
            run.direct(replica, warm)
        time.sleep(ONE_PERIOD_S)
        for replica in run.actors:
            run.assert_holds(replica, warm)

        before = run.send([body(SYSTEM, f"before {n}", spec.name) for n in range(6)])
        assert {r.replica for r in before} == set(run.actors), "both replicas hold the prompt"
        assert all(r.cached_tokens > 0 for r in before)

        # The router's load is its count of the last window's requests: once it has passed, a
        # holder may take up to MIN_HEADROOM + 1 requests of a hot prompt before the router
        # gives the prompt a second home for balance. Those are what tell where it sees hits.
        time.sleep(DEFAULT_WINDOW_S)
        cleared, kept = sorted(run.actors)
        run.reset(cleared)
        reset_at = time.monotonic()
        time.sleep(ONE_PERIOD_S)
        after = run.send([body(SYSTEM, f"after {n}", spec.name) for n in range(MIN_HEADROOM + 1)])
        assert time.monotonic() - reset_at < ONE_PERIOD_S + 30
        assert [r.replica for r in after] == [kept] * len(after)
        assert all(r.cached_tokens > 0 for r in after)
        report = run.report(cleared)
        assert report["held"] == [] and report["blocks"] == 0


# The short form's KV cache, in vLLM's blocks: one of its system prompts (about 10 blocks of the
# CPU build's 128 tokens) and a half, so a second prompt evicts part of the first.
SHORT_FORM_BLOCKS = 16


@pytest.mark.vllm
@pytest.mark.timeout(900)
def test_one_vllm_replica_reports_what_its_engine_caches() -> None:
    """The short form of the above with the real engine (one replica; two engine starts cost
    CI too much): what vLLM stores, evicts and drops, told by its KV-cache events, is what the
    replica reports, on the path a routed request takes (HAProxy into the replica's own app)."""
    travel_by_value()
    spec = ModelSpec.model_validate(
        precise_spec(replicas=1).model_dump()
        | {
            "engine_args": {"num_gpu_blocks_override": SHORT_FORM_BLOCKS},
            # vLLM refuses a KV cache that cannot hold one max_model_len sequence; the typical
            # request (for the plan's estimates) then has to fit in that length too.
            "max_model_len": SHORT_FORM_BLOCKS * BLOCK_TOKENS,
            "workload": {"input_tokens": 1024, "output_tokens": 16},
        }
    )
    with local_serve(spec, None, engine="vllm") as running:
        run = Served("vllm", None, running.endpoint)
        (replica,) = run.actors
        assert run.report(replica)["held"] == []
        first = body(SYSTEM, "first", spec.name)
        (result,) = run.send([first])
        assert result.cached_tokens == 0
        run.assert_holds(replica, first)
        hits = run.send([body(SYSTEM, f"again {n}", spec.name) for n in range(2)])
        assert all(r.cached_tokens > 0 for r in hits)

        # Another prompt the cache cannot hold beside the first: vLLM evicts some of the first's
        # blocks, and the report drops the chunks anchored there (BlockRemoved).
        other = body(SYSTEM.replace("s", "t"), "other", spec.name)
        bench.run_load(running.endpoint, [other], 1)
        run.assert_holds(replica, other)
        report = run.report(replica)
        assert report["blocks"] <= SHORT_FORM_BLOCKS
        assert not prompt_chunks(first) <= set(report["held"])
        results = bench.run_load(running.endpoint, [body(SYSTEM, "evicted", spec.name)], 1).results
        assert results[0].ok and results[0].cached_tokens < hits[0].cached_tokens

        # vLLM refuses a reset while a request holds blocks: what it caches stays reported.
        long = body(SYSTEM, "running", spec.name) | {"max_tokens": 600, "ignore_eos": True}
        streamed = while_streaming(
            running.endpoint, long, lambda: call(run.actors[replica], _reset)
        )
        assert streamed == 600
        run.assert_holds(replica, long)

        run.reset(replica)
        (result,) = run.send([body(SYSTEM, "after the reset", spec.name)])
        assert result.cached_tokens == 0
        run.assert_holds(replica, body(SYSTEM, "after the reset", spec.name))
