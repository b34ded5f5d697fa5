"""Which CPUs each local vLLM engine's threads run on.

vLLM's CPU build binds an engine's OpenMP threads as VLLM_CPU_OMP_THREADS_BIND says, read by the
engine core's process when it starts (`vllm.utils.ompmultiprocessing.OMPProcessManager`). Its
automatic binding gives local rank 0 the first core of the first NUMA node and reserves the next
for the scheduler: so every engine on this machine gets core 0. Two replicas' engines then share
one core while the other runs the rest (both replicas' logs said `core ids=[0]`), and a
benchmark of two replicas measures one core's throughput, not the routing between them.

A local run of several replicas tells each the number of engines its deployment starts with
(`ENGINE_SLOTS`, in the LLMConfig's runtime_env: Serve's own `world_size` is the deployment's
`num_replicas`, not what autoscaling starts), and the replica's server
(`serving.local.engine.bound_servers`) binds its engine to the share of the CPUs its replica rank
names before the engine starts. One engine alone keeps vLLM's automatic binding.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# The number of engines the deployment starts with: each replica's rank names its slot among them.
ENGINE_SLOTS = "SERVESTACK_ENGINE_SLOTS"
# `module:Class` for each server class a compiled LLMConfig may name (None: Ray's LLMServer), to
# the local server that binds its engine's CPUs first.
BOUND_SERVERS: dict[str | None, str] = {
    None: "serving.local.engine.bound_servers:BoundLLMServer",
    "serving.router.cache_server:CacheReportingServer": (
        "serving.local.engine.bound_servers:BoundCacheReportingServer"
    ),
}


def engine_ranks(engine_kwargs: Mapping[str, Any]) -> int:
    """The ranks one engine runs: tensor parallel × pipeline parallel."""
    return int(engine_kwargs.get("tensor_parallel_size", 1)) * int(
        engine_kwargs.get("pipeline_parallel_size", 1)
    )


def _allowed(cpus: list[int] | None) -> list[int]:
    """`cpus`, or this process's CPUs when not given."""
    return sorted(os.sched_getaffinity(0)) if cpus is None else cpus


def omp_binding(workers: int, cpus: list[int] | None = None, *, whole_machine: bool = True) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for an engine of `workers` ranks (TP × PP) on `cpus` (this
    process's CPUs when not given). On the whole machine one rank keeps vLLM's automatic binding.
    That binding gives each rank a NUMA node of its own and refuses to start TP=2 on a one-node
    machine ("Not enough allowed NUMA nodes to bind threads of 2 local CPUWorkers"); so each rank
    gets its own share of the CPUs, or none is bound when there are fewer CPUs than ranks."""
    if workers <= 1 and whole_machine:
        return "auto"
    allowed = _allowed(cpus)
    if len(allowed) < workers:
        return "nobind"
    share = len(allowed) // max(workers, 1)
    groups = [allowed[rank * share : (rank + 1) * share] for rank in range(max(workers, 1))]
    return "|".join(",".join(str(cpu) for cpu in group) for group in groups)


def slot_binding(workers: int, slot: int, slots: int, cpus: list[int] | None = None) -> str:
    """The binding of engine `slot` of `slots`: an equal share of the CPUs each, split among its
    ranks. With fewer CPUs than engines, engines take the CPUs in turn, one each (pinned, so
    that no engine's threads outnumber its CPU); a slot past the count (a deployment scaled
    beyond what was counted) wraps around."""
    allowed = _allowed(cpus)
    if slots <= 1:
        return omp_binding(workers, allowed)
    share = len(allowed) // slots
    if share == 0:
        return omp_binding(workers, [allowed[slot % len(allowed)]], whole_machine=False)
    own = slot % slots
    return omp_binding(workers, allowed[own * share : (own + 1) * share], whole_machine=False)


def parse_slots(value: str) -> int:
    """The engine count from ENGINE_SLOTS."""
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{ENGINE_SLOTS}={value!r}: expected the number of engines, at least 1")
    return int(value)


def bound_server(server_cls: str | None) -> str:
    """The local server for a compiled LLMConfig's `server_cls`: a server class the compiler
    learns to emit without a local counterpart stops the run rather than run unbound."""
    if server_cls not in BOUND_SERVERS:
        known = ", ".join(str(name) for name in BOUND_SERVERS)
        raise ValueError(
            f"server_cls {server_cls!r} has no local counterpart that gives its engine CPUs of "
            f"its own; known: {known} (serving.local.engine.cpu_binding.BOUND_SERVERS)"
        )
    return BOUND_SERVERS[server_cls]
