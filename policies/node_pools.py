"""Node pools: the GPU pools hold what the stack asks of them — the worker groups at peak plus a
RayService upgrade's new cluster (and a reservation-bound pool its surge node), and what each
pool asks of GKE is what GKE provisions (compact placement, flex-start, capacity-chain steps
able to hold their workers).

Every check reads the resources as registered; the facts (the node-pool surge, what each way of
obtaining nodes allows) come from serving's catalog and scheduling contract."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.common import stack_policy
from policies.pool_selection import gpu_pools, selected, unlabelled_gpu_pools
from policies.views import (
    CLUSTER,
    NODE_POOL,
    ClusterView,
    NodePoolView,
    class_pools,
    rayservices,
    spec_for,
    views,
)
from serving.catalog.consumption import (
    FLEX_START_MAX_RUN_S,
    compact_refusal,
    flex_start_refusal,
    reservation_refusal,
    run_limit_refusal,
)
from serving.compile.scheduling import (
    NODE_SURGE,
    RESERVATION_MACHINE_LABEL,
    RESERVATION_ZONE_LABEL,
    RESERVED_NODES_LABEL,
)
from serving.plan.rules.step_holds_layout import step_cannot_hold

# --- upgrade room -------------------------------------------------------------------------


def _upgrade_room(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    yield from unlabelled_gpu_pools(resources)
    pools = gpu_pools(resources)
    peak: dict[str, int] = {}
    room: dict[str, int] = {}
    for service in rayservices(resources):
        new_cluster = service.upgrade_type
        for group in service.worker_groups:
            machine = selected(group.node_selector) or "no machine type"
            peak[machine] = peak.get(machine, 0) + group.max_replicas
            if new_cluster in (None, "NewCluster"):
                room[machine] = max(room.get(machine, 0), group.min_replicas)
    for machine, pods in peak.items():
        if machine not in pools:
            yield f"worker groups select {machine}, and the stack creates no pool for it"
            continue
        pool = pools[machine]
        ceiling = pool.max_nodes
        needed = pods + room.get(machine, 0)
        if ceiling < needed:
            yield (
                f"the {machine} pool scales to {ceiling} node(s); at peak its worker groups hold "
                f"{pods} and an upgrade's new cluster needs {room.get(machine, 0)} more"
            )
        # A chain's reservation step overflows to its next step: it needs no upgrade room.
        if pool.reservation_affinity == "SPECIFIC_RESERVATION" and not pool.compute_class:
            reserved = pool.resource_labels.get(RESERVED_NODES_LABEL)
            if reserved is None or int(reserved) < ceiling + NODE_SURGE:
                yield (
                    f"the {machine} pool takes only its reservations, which hold "
                    f"{reserved or 'an unknown number of'} VMs, but may need {ceiling} nodes "
                    f"(upgrade room included) and {NODE_SURGE} surge node for a node upgrade"
                )


# --- consumption options GKE will provision -----------------------------------------------


def _consumption(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    exclusions = [
        exclusion
        for cluster in views(resources, CLUSTER, ClusterView)
        for exclusion in cluster.maintenance_exclusions
    ]
    for pool in views(resources, NODE_POOL, NodePoolView):
        machine = str(pool.machine_type)
        yield from _reservation_matches(pool, machine)
        if pool.compact:
            refusal = compact_refusal(
                machine, zones=len(pool.zones), flex_start=pool.flex_start, queued=pool.queued
            )
            if refusal is not None:
                yield f"{pool.name}: {refusal}"
        if pool.flex_start:
            refusal = flex_start_refusal(
                machine,
                auto_repair=pool.auto_repair,
                reservation=(pool.reservation_affinity or "NO_RESERVATION") != "NO_RESERVATION",
                spot=pool.reclaimable,
            )
            if refusal is not None:
                yield f"{pool.name}: {refusal}"
            limit = pool.max_run_s or FLEX_START_MAX_RUN_S
            for name, window in exclusions:
                refusal = run_limit_refusal(machine, limit, name, window)
                if refusal is not None:
                    yield f"{pool.name}: {refusal}"
    steps = class_pools(resources)
    for service in rayservices(resources):
        for group in service.worker_groups:
            chain = group.compute_class
            if chain is None:
                continue
            for deployment in service.deployments:
                accelerator = spec_for(service, deployment).accelerator
                for pool in steps.get(chain, []):
                    refusal = step_cannot_hold(
                        str(pool.machine_type), accelerator,
                        tensor=deployment.layout.tensor, pod_gpus=group.gpus_per_pod,
                    )  # fmt: skip
                    if refusal is not None:
                        yield f"{service.name} ({deployment.role}): {pool.name}: {refusal}"


def _reservation_matches(pool: NodePoolView, machine: str) -> Iterator[str]:
    """A chain step bound to a specific reservation takes its nodes from VMs of its own type
    in its own zone: the reservation's type and zone, as the stack declared them, ride on the
    pool's labels."""
    if pool.reservation_affinity != "SPECIFIC_RESERVATION" or pool.compute_class is None:
        return
    labels = pool.resource_labels
    reserved_machine = labels.get(RESERVATION_MACHINE_LABEL)
    reserved_zone = labels.get(RESERVATION_ZONE_LABEL)
    if not reserved_machine or not reserved_zone or not pool.reservation_names:
        yield (
            f"{pool.name}: a step bound to a specific reservation says neither which "
            "reservation nor what it holds, so no one can check GKE will take nodes from it"
        )
        return
    refusal = reservation_refusal(
        pool.reservation_names[0], reserved_machine, reserved_zone, machine, pool.zones
    )
    if refusal is not None:
        yield f"{pool.name}: {refusal}"


NODE_POOL_POLICIES = [
    stack_policy(
        "stack-nodepool-upgrade-room",
        "GPU pools hold the worker groups at peak plus a RayService upgrade's new cluster, and "
        "a pool bound to specific reservations has them for that and a surge node.",
        "Let the stack size its pools from the plans, and reserve reserved_nodes VMs (or use "
        "reservation_affinity: any).",
        _upgrade_room,
    ),
    stack_policy(
        "stack-nodepool-consumption",
        "Every GPU pool asks GKE for what it provisions: compact placement in one zone, never "
        "with queued provisioning and with flex-start only where GKE offers it; flex-start with "
        "auto-repair off, no reservation and no Spot, its run limit no shorter than a "
        "maintenance exclusion; a reservation step of the machine type and zone its "
        "reservation holds; every capacity step able to hold its workers.",
        "Let `servestack preview` build the pools from servestack:gpu_pools.<type>.capacity "
        "(the same rules refuse the stack there, naming the step and a fix).",
        _consumption,
    ),
]
