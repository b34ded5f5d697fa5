"""The precise router on real Ray Serve (HAProxy + direct streaming, the simulated engine): the
replicas' reports reach the router through Serve's routing stats, and a replica whose cache is
cleared (`reset_prefix_cache`) stops drawing its prompt as a hit within one stats period.

Two replicas both hold one system prompt (served on each, straight into its engine), so the
router shares that prompt's requests between them; after one replica's reset, and one stats
period, every request of that prompt goes to the other."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from compiled_support import compile_spec

from serving.cache_report import REPORT_KEY
from serving.loading import load_profile
from serving.local import bench
from serving.local.bench_stats import RequestResult
from serving.local.engine import FINGERPRINT_PREFIX
from serving.local.runtime import local_serve
from serving.local.simulation import chat_prompt, settings_from_plan, tokenize
from serving.routers import ROUTERS
from serving.spec import ModelSpec
from serving.spec_parts import Autoscaling, Router

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "stacks" / "models" / "llama-3.1-8b.yaml"
KIND = "servestack_precise_prefix"
PERIOD_S = ROUTERS[KIND].stats_period_s or 0.0
# Serve's controller asks each replica within 0.9-1.1 periods and broadcasts on its next loop.
ONE_PERIOD_S = 1.1 * PERIOD_S + 0.5


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

    from serving.cache_server import CacheReportingServer

    config = compile_spec(precise_spec()).llm_config()
    assert config["deployment_config"]["request_router_config"] == {
        "request_router_class": "serving.precise_routing:PrecisePrefixRouter",
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


def _server(actor: Any) -> Any:
    return actor._replica_impl._user_callable_wrapper._callable


def _replica_of(actor: Any) -> str | None:
    """The replica's id, as its responses name it, if it is a reporting LLM server."""
    server = _server(actor)
    if getattr(server, "_ledger", None) is None:
        return None
    return str(server.engine.fingerprint).removeprefix(FINGERPRINT_PREFIX)


def _serve_directly(actor: Any, request: dict[str, Any]) -> int:
    """The replica serves the request straight into its engine, as if routed there."""
    server = _server(actor)
    server._arrived(SimpleNamespace(**request))
    return int(server.engine.cache.admit(tokenize(chat_prompt(request["messages"]))))


def _reset(actor: Any) -> None:
    server = _server(actor)
    server.engine.cache.clear()
    server._ledger.cleared()


@pytest.mark.timeout(900)
def test_a_cleared_cache_stops_drawing_its_prompt_within_one_stats_period() -> None:
    import ray
    from ray import cloudpickle

    # The helpers below run inside the replicas (Ray's __ray_call__), where tests/ is not a
    # package on the path: they travel by value.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spec = precise_spec()
    settings = settings_from_plan(spec, time_scale=0.05, cache_tokens=100_000)
    system = " ".join(f"s{i}" for i in range(600))
    with local_serve(spec, settings) as running:
        servers = {}
        for entry in ray.util.list_named_actors(all_namespaces=True):
            if not entry["name"].startswith("SERVE_REPLICA"):
                continue
            actor = ray.get_actor(entry["name"], namespace=entry["namespace"])
            replica = ray.get(actor.__ray_call__.remote(_replica_of))
            if replica is not None:
                servers[replica] = actor
        assert len(servers) == 2, servers
        for actor in servers.values():
            ray.get(actor.__ray_call__.remote(_serve_directly, body(system, "warm", spec.name)))
        time.sleep(ONE_PERIOD_S)

        def send(count: int, tag: str) -> list[RequestResult]:
            requests = [body(system, f"{tag} {n}", spec.name) for n in range(count)]
            results, _ = asyncio.run(bench.run_load(running.endpoint, requests, 1))
            assert all(r.ok for r in results), [r.error for r in results]
            return results

        before = send(6, "before")
        assert {r.replica for r in before} == set(servers), "both replicas hold the prompt"
        assert all(r.cached_tokens > 0 for r in before)

        cleared, kept = sorted(servers)
        ray.get(servers[cleared].__ray_call__.remote(_reset))
        reset_at = time.monotonic()
        time.sleep(ONE_PERIOD_S)
        after = send(6, "after")
        assert time.monotonic() - reset_at < ONE_PERIOD_S + 30
        assert [r.replica for r in after] == [kept] * len(after)
        assert all(r.cached_tokens > 0 for r in after)
        stats = ray.get(servers[cleared].__ray_call__.remote(lambda a: _server(a)._ledger.report()))
        assert stats[REPORT_KEY]["held"] == []
