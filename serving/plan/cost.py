"""What serving costs: one replica's share of its nodes, and the $ per million output tokens of
a plan on nodes of a given machine type at a given node price (a capacity chain's step, a
consumption mode's price). Cost per token is linear in the node price; a step on another
machine type of the same GPU runs the same layout at the same speed, but packs its replicas on
nodes of its own size."""

from __future__ import annotations

from typing import TYPE_CHECKING

from serving.catalog import MachineType
from serving.plan.placement import Placement, placement

if TYPE_CHECKING:
    from serving.plan.planner import Plan


def replica_share(node_price: float, where: Placement) -> float:
    """One replica's share of its nodes' price: a node's price split over the replicas it
    holds, or the price of every node a replica spans."""
    if where.replicas_per_node:
        return node_price / where.replicas_per_node
    return node_price * where.nodes_per_replica


def usd_per_million_on(
    plan: Plan, machine: MachineType, node_price: float, replacing: str | None = None
) -> float | None:
    """$ per million output tokens of `plan`'s serving unit (one replica of each group) on
    `machine` nodes at `node_price` USD per node-hour; None where the plan serves nothing.
    With `replacing`, only the groups planned on that machine type move to `machine`; the
    others keep their planned share."""
    if not plan.output_tokens_per_s:
        return None
    unit_price = 0.0
    for group in plan.groups:
        if replacing is not None and group.placement.machine_type != replacing:
            unit_price += group.cost.price_per_hour_usd
        else:
            unit_price += replica_share(node_price, placement(machine, group.replica_group))
    return unit_price / (plan.output_tokens_per_s * 3600) * 1e6
