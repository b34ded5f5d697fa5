"""Ray Serve LLM's servers, each binding its engine to CPUs of its own before the engine starts.

A local run with several engines names these as LLMConfig.server_cls in place of what was
compiled (`serving.local.engine.cpu_binding` says why and which CPUs). The engine core is a child
process of the replica and inherits its environment, so the binding is set in the replica's
environment before the server starts the engine; nothing else about the server changes.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ray import serve
from ray.llm._internal.serve.core.server.llm_server import LLMServer

from serving.catalog.environment import VLLM_CPU_OMP_THREADS_BIND
from serving.local.engine.cpu_binding import (
    ENGINE_SLOTS,
    engine_ranks,
    parse_slots,
    slot_binding,
)
from serving.router.cache_server import CacheReportingServer

logger = logging.getLogger(__name__)


def bind_engine_cpus(llm_config: Any) -> str:
    """Set this replica's engine binding from its rank among ENGINE_SLOTS engines and say it."""
    slots = os.environ.get(ENGINE_SLOTS)
    if slots is None:
        raise RuntimeError(f"{ENGINE_SLOTS} is not set: this server is for local runs only")
    total = parse_slots(slots)
    rank = serve.get_replica_context().rank
    if rank is None:
        raise RuntimeError("Serve gave this replica no rank: its engine's CPUs cannot be chosen")
    binding = slot_binding(engine_ranks(llm_config.engine_kwargs), rank.rank, total)
    os.environ[VLLM_CPU_OMP_THREADS_BIND] = binding
    logger.info("engine slot %d of %d: %s=%s", rank.rank, total, VLLM_CPU_OMP_THREADS_BIND, binding)
    return binding


class BoundLLMServer(LLMServer):
    """Ray's LLMServer, its engine on CPUs of its own."""

    async def __init__(self, llm_config: Any, **kwargs: Any) -> None:  # type: ignore[misc]
        bind_engine_cpus(llm_config)
        await super().__init__(llm_config, **kwargs)


class BoundCacheReportingServer(CacheReportingServer):
    """The precise router's cache-reporting server, its engine on CPUs of its own."""

    async def __init__(self, llm_config: Any, **kwargs: Any) -> None:  # type: ignore[misc]
        bind_engine_cpus(llm_config)
        await super().__init__(llm_config, **kwargs)
