"""Where a replica group lands: the machine type that holds it, the nodes its replicas take, and
how many nodes several groups of one machine type need together."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from serving import catalog
from serving.catalog import MachineType
from serving.frozen import Frozen
from serving.plan.replicas import ReplicaGroup
from serving.spec.profile import ModelSpec


class Placement(Frozen):
    machine_type: str
    gke_accelerator: str
    gpus_per_node: int
    gpus_per_replica: int
    nodes_per_replica: int
    replicas_per_node: int = Field(description="0 when one replica spans several nodes.")
    spans_nodes: bool
    expert_parallel_size: int
    min_replicas: int
    max_replicas: int
    min_nodes: int
    max_nodes: int


def choose_machine(spec: ModelSpec, gpus_per_replica: int) -> MachineType:
    """The profile's machine type, else the cheapest node that holds a whole replica, else the
    largest node (the replica then spans nodes, a whole node per pod)."""
    if spec.machine_type:
        return spec.machine
    machines = catalog.machines_for(spec.accelerator)
    holding = [m for m in machines if m.gpus_per_node >= gpus_per_replica]
    if holding:
        return min(holding, key=lambda m: (m.gpus_per_node, m.price_per_hour_usd))
    largest = max(m.gpus_per_node for m in machines)
    return min(
        (m for m in machines if m.gpus_per_node == largest), key=lambda m: m.price_per_hour_usd
    )


def placement(machine: MachineType, group: ReplicaGroup) -> Placement:
    """Where a group's replicas land on nodes of the machine `choose_machine` picked for it."""
    gpus = group.gpus_per_replica
    nodes_per_replica = math.ceil(gpus / machine.gpus_per_node)
    replicas_per_node = machine.gpus_per_node // gpus if nodes_per_replica == 1 else 0

    def nodes(replicas: int) -> int:
        if replicas_per_node:
            return math.ceil(replicas / replicas_per_node)
        return replicas * nodes_per_replica

    return Placement(
        machine_type=machine.name,
        gke_accelerator=machine.gke_accelerator,
        gpus_per_node=machine.gpus_per_node,
        gpus_per_replica=gpus,
        nodes_per_replica=nodes_per_replica,
        replicas_per_node=replicas_per_node,
        spans_nodes=nodes_per_replica > 1,
        expert_parallel_size=group.parallelism.expert_parallel_size,
        min_replicas=group.min_replicas,
        max_replicas=group.max_replicas,
        min_nodes=nodes(group.min_replicas),
        max_nodes=nodes(group.max_replicas),
    )


def nodes_for(placements: list[Placement], bound: Literal["min", "max"]) -> int:
    """Nodes of one machine type that hold every replica of these groups at once (a P/D pair's
    two sides, say). Replicas whose GPU count divides the node share nodes without gaps: Ray
    places each replica's bundles on any node with free GPUs. Replicas that span nodes, or leave
    a node's GPUs in an unusable remainder, take their nodes alone."""
    if not placements:
        return 0
    per_node = placements[0].gpus_per_node
    assert all(p.gpus_per_node == per_node for p in placements), "one machine type at a time"

    def replicas(p: Placement) -> int:
        return p.min_replicas if bound == "min" else p.max_replicas

    sharing = [p for p in placements if p.replicas_per_node and per_node % p.gpus_per_replica == 0]
    alone = [p for p in placements if p not in sharing]
    shared_gpus = sum(p.gpus_per_replica * replicas(p) for p in sharing)
    return math.ceil(shared_gpus / per_node) + sum(
        p.min_nodes if bound == "min" else p.max_nodes for p in alone
    )


def largest_node(spec: ModelSpec) -> int:
    """GPUs of the largest node the spec may run on: its machine type's, else its accelerator's
    largest."""
    if spec.machine_type:
        return spec.machine.gpus_per_node
    return max(m.gpus_per_node for m in catalog.machines_for(spec.accelerator))
