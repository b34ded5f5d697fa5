"""Which GPU pool a worker group selects, and what notice a reclaimed node of it gives: the
pools by what a group selects (a machine type, or a ComputeClass whose steps count as one pool),
the system pool's machine type, and a pool's notice in seconds. The fault and node-pool policies
(`policies.faults`, `policies.node_pools`) read the resources through these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.views import NODE_POOL, NodePoolView, class_pools, gpu_pools_by_machine, views
from serving.compile.scheduling import (
    COMPUTE_CLASS_LABEL,
    MACHINE_TYPE_LABEL,
    POOL_LABEL,
    SPOT_POD_NOTICE_S,
    SYSTEM_POOL,
)


def gpu_pools(resources: list[Any]) -> dict[str, NodePoolView]:
    """The pools a worker group may select, by what it selects: a machine type, or a
    ComputeClass (keyed `class <name>`), whose steps count as one pool that scales to the
    smallest of their maximums and gives the shortest of their notices."""
    pools: dict[str, NodePoolView] = dict(gpu_pools_by_machine(resources))
    for name, steps in class_pools(resources).items():
        pools[_class_key(name)] = min(steps, key=lambda pool: (pool.max_nodes, _notice_rank(pool)))
    return pools


def unlabelled_gpu_pools(resources: list[Any]) -> list[str]:
    """What no worker group can be checked against: a GPU pool with neither its machine-type
    nor a ComputeClass label (a pool, or a chain's step, registered some other way)."""
    return [
        f"{pool.name}: a GPU pool without the {MACHINE_TYPE_LABEL} or {COMPUTE_CLASS_LABEL} "
        "label, so no worker group can be checked against it"
        for pool in views(resources, NODE_POOL, NodePoolView)
        if pool.has_gpus and not pool.machine and not pool.compute_class
    ]


def _class_key(name: str) -> str:
    return f"class {name}"


def _notice_rank(pool: NodePoolView) -> int:
    notice = notice_s(pool)
    # A drained pool honours any grace: it ranks after every reclaimable one.
    return 2**31 if notice is None else notice


def selected(selector: Mapping[str, Any]) -> str | None:
    """What a GPU worker group selects: its ComputeClass or its machine type."""
    if COMPUTE_CLASS_LABEL in selector:
        return _class_key(str(selector[COMPUTE_CLASS_LABEL]))
    return machine_selected(selector, None)


def system_machine(resources: list[Any]) -> str | None:
    for pool in views(resources, NODE_POOL, NodePoolView):
        if pool.pool_role == SYSTEM_POOL:
            return str(pool.machine_type)
    return None


def machine_selected(selector: Mapping[str, Any], system: str | None) -> str | None:
    if MACHINE_TYPE_LABEL in selector:
        return str(selector[MACHINE_TYPE_LABEL])
    if selector.get(POOL_LABEL) == SYSTEM_POOL:
        return system
    return None


def notice_s(pool: NodePoolView) -> int | None:
    """The seconds a pod on this pool gets when the node is reclaimed; None where nodes are only
    drained (any grace is honoured)."""
    if not pool.reclaimable:
        return None
    total = pool.shutdown_grace_s
    if total is None:
        return SPOT_POD_NOTICE_S
    return total - pool.critical_pods_grace_s
