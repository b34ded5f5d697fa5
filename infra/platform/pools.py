"""The GPU node pools a stack's plans need: `gpu_demands` sums what every model's replica groups
ask of each machine type (nodes, upgrade room, the widest tensor group), and `gpu_pools_of`
turns one machine type's demand and its `servestack:gpu_pools` options into its `GpuPoolSpec`,
or one per step of its capacity chain, refusing what GKE would not provision.
`infra.platform.plan` plans the rest of the platform around them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.kube.compute_class import compute_class_name
from infra.platform.capacity_config import GpuPoolOptions
from infra.platform.config import Stack
from infra.platform.pool_specs import GpuPoolSpec
from infra.platform.specs import ClusterSpec
from infra.platform.stack_config import NAMESPACE
from serving import catalog
from serving.catalog.consumption import (
    compact_refusal,
    reservation_refusal,
    run_limit_refusal,
)
from serving.compile.compiler import CompiledModel
from serving.compile.scheduling import NODE_SURGE
from serving.errors import ProfileValidationError, ServestackError
from serving.plan.rules import tensor_across_nodes
from serving.plan.rules.step_holds_layout import step_cannot_hold
from serving.spec.loading import display_path, validate


@dataclass
class Demand:
    """What the plans ask of one machine type, summed over models and replica groups."""

    min_nodes: int = 0
    max_nodes: int = 0
    upgrade_room: int = 0
    spans_nodes: bool = False
    models: list[str] = field(default_factory=list)
    tensor: int = 0  # the widest tensor-parallel group
    pod_gpus: int = 0  # the GPUs of the largest worker pod


def gpu_demands(
    stack: Stack, models: dict[str, CompiledModel], judge_layouts: bool = True
) -> dict[str, Demand]:
    """Nodes per machine type over every model's replica groups; a plan that cannot work, or a
    tensor-parallel group wider than its pool's nodes, stops the platform here."""
    problems: list[ServestackError] = []
    demands: dict[str, Demand] = {}
    for model, compiled in models.items():
        model_plan = compiled.plan
        where = display_path(stack.profile_path(model))
        look = f"`servestack plan {stack.name} --model {model}` shows a layout that fits"
        too_wide = False
        for group in model_plan.groups:
            placement = group.placement
            tensor = group.parallelism.tensor
            if tensor > placement.gpus_per_node:
                too_wide = True
                problems.append(
                    ServestackError(
                        where,
                        "parallelism.tensor",
                        tensor_across_nodes(
                            tensor, placement.machine_type, placement.gpus_per_node
                        ),
                        f"use tensor: {placement.gpus_per_node} or less, with pipeline stages "
                        f"across nodes; {look}",
                    )
                )
            demand = demands.setdefault(placement.machine_type, Demand())
            demand.spans_nodes |= placement.spans_nodes
            demand.tensor = max(demand.tensor, tensor)
            if model not in demand.models:
                demand.models.append(model)
        # The pool holds what the model's RayService worker groups may scale to (one pod per
        # node), so the two can never disagree.
        for shape in compiled.worker_shapes:
            demand = demands[shape.machine_type]
            demand.pod_gpus = max(demand.pod_gpus, shape.gpus)
            demand.min_nodes += shape.min_replicas
            demand.max_nodes += shape.max_replicas
            # Models upgrade one at a time: the largest new cluster at its minimum.
            demand.upgrade_room = max(demand.upgrade_room, shape.min_replicas)
        for verdict in model_plan.verdicts:
            if verdict.severity != "error" or (too_wide and verdict.code == "tp-crosses-node"):
                continue
            problems.append(ServestackError(where, verdict.field, verdict.message, look))
    if problems and judge_layouts:
        raise ProfileValidationError(problems)
    return demands


def gpu_pools_of(
    machine_type: str,
    demand: Demand,
    options: GpuPoolOptions | None,
    cluster: ClusterSpec,
    source: str,
    judge_layouts: bool = True,
) -> list[GpuPoolSpec]:
    """The pool of one machine type, or one pool per step of its capacity chain."""
    if options is None or not options.capacity:
        return [_gpu_pool(machine_type, demand, options, cluster, source, judge_layouts)]
    key = f"{NAMESPACE}:gpu_pools.{machine_type}.capacity"
    name = compute_class_name(machine_type)
    pools = []
    for index, step in enumerate(options.capacity):
        step_machine = step.machine_type or machine_type
        cannot = step_cannot_hold(
            step_machine,
            catalog.MACHINE_TYPES[machine_type].accelerator,
            tensor=demand.tensor,
            pod_gpus=demand.pod_gpus,
        )
        if cannot is not None and judge_layouts:
            raise ServestackError(
                source, f"{key}.{index}.machine_type",
                f"{cannot} ({', '.join(demand.models)})",
                f"use a machine type of the same GPU with {demand.pod_gpus} or more GPUs per "
                f"node, e.g. {machine_type}, or drop the step",
            )  # fmt: skip
        reservation = step.reservation
        flex = step.flex_start
        stepped = options.model_copy(
            update={
                "capacity": [],
                "spot": step.mode == "spot",
                "flex_start": flex is not None,
                "reservation_affinity": reservation.affinity if reservation else "none",
                "reservations": [reservation.name] if reservation and reservation.name else [],
                "spot_shutdown_grace_s": (
                    options.spot_shutdown_grace_s if step.mode == "spot" else None
                ),
            }
        )
        # Zones are the pool's option (or the reservation's zone), not a key of the step.
        zones_key = (
            f"{key}.{index}.reservation.zone"
            if reservation and reservation.zone and not options.zones
            else f"{NAMESPACE}:gpu_pools.{machine_type}.zones"
        )
        pool = _gpu_pool(
            step_machine, demand, stepped, cluster, f"{source}", judge_layouts,
            key_prefix=f"{key}.{index}.", zones_key=zones_key,
            chain={
                "compute_class": name, "chain_of": machine_type, "chain_step": index,
                "max_run_duration_s": flex.max_run_duration_s if flex else None,
                "class_min_nodes": demand.min_nodes, "min_nodes": 0,
                "reservation_machine_type": reservation.machine_type if reservation else None,
                "reservation_zone": reservation.zone if reservation else None,
            },
            default_zones=[reservation.zone] if reservation and reservation.zone else None,
        )  # fmt: skip
        if judge_layouts:
            _check_step(pool, cluster, source, f"{key}.{index}")
        pools.append(pool)
    return pools


def _check_step(pool: GpuPoolSpec, cluster: ClusterSpec, source: str, key: str) -> None:
    """What GKE will not provision of one chain step, in the pack's words."""
    if pool.reservation_machine_type and pool.reservation_zone and pool.reservations:
        refusal = reservation_refusal(
            pool.reservations[0], pool.reservation_machine_type, pool.reservation_zone,
            pool.machine_type, pool.zones,
        )  # fmt: skip
        if refusal is not None:
            raise ServestackError(
                source, f"{key}.reservation", refusal,
                f"give the step the reservation's machine type and zone (machine_type: "
                f"{pool.reservation_machine_type}, zones: [{pool.reservation_zone}]), or name "
                f"a reservation of {pool.machine_type} in {', '.join(pool.zones)}",
            )  # fmt: skip
    if pool.compact:
        refusal = compact_refusal(
            pool.machine_type,
            zones=len(pool.zones),
            flex_start=pool.flex_start,
            queued=pool.queued_provisioning,
        )
        if refusal is not None:
            raise ServestackError(
                source, key, refusal,
                "put a reservation, Spot or on-demand step in its place, or a layout that "
                "needs no compact placement (inside one node)",
            )  # fmt: skip
    if pool.max_run_duration_s is not None:
        for exclusion in cluster.maintenance_exclusions:
            window = (exclusion.end_time - exclusion.start_time).total_seconds()
            refusal = run_limit_refusal(
                pool.machine_type, pool.max_run_duration_s, exclusion.name, window
            )
            if refusal is not None:
                raise ServestackError(
                    source, key, refusal,
                    "drop the flex-start step (or the exclusion), or split the exclusion into "
                    f"windows of at most {pool.max_run_duration_s // 86400} days",
                )  # fmt: skip


def _gpu_pool(
    machine_type: str,
    demand: Demand,
    options: GpuPoolOptions | None,
    cluster: ClusterSpec,
    source: str,
    judge_layouts: bool = True,
    *,
    key_prefix: str | None = None,
    chain: dict[str, Any] | None = None,
    default_zones: list[str] | None = None,
    zones_key: str | None = None,
) -> GpuPoolSpec:
    options = options or GpuPoolOptions()
    prefix = key_prefix or f"{NAMESPACE}:gpu_pools.{machine_type}."
    machine = catalog.MACHINE_TYPES[machine_type]
    stocking = catalog.zones_offering(machine.gke_accelerator, cluster.region)
    if not stocking:
        regions = ", ".join(catalog.regions_offering(machine.gke_accelerator))
        raise ServestackError(
            source, "gcp:region",
            f"{cluster.region} has no zone stocking {machine.gke_accelerator}, the GPU of "
            f"{machine_type}, on which {', '.join(demand.models)} are planned",
            f"use a region that stocks it ({regions}), or give those models another accelerator",
        )  # fmt: skip
    wanted = demand.max_nodes + demand.upgrade_room + NODE_SURGE
    reserved = options.reserved_nodes
    specific = options.reservation_affinity == "specific"
    if specific and reserved is not None and reserved < wanted and judge_layouts:
        raise ServestackError(
            source, f"{NAMESPACE}:gpu_pools.{machine_type}.reserved_nodes",
            f"at peak the {machine_type} pool needs {wanted} nodes ({demand.max_nodes} at "
            f"the models' max_replicas, {demand.upgrade_room} for a RayService upgrade's new "
            f"cluster, {NODE_SURGE} surge node for a node upgrade) but its reservations "
            f"hold {reserved}: an upgrade at peak would wait for capacity that never comes",
            f"reserve {wanted} VMs (reserved_nodes: {wanted}), use reservation_affinity: "
            "any (the rest on demand), or lower the models' max_replicas",
        )  # fmt: skip
    compact = demand.spans_nodes if options.compact_placement is None else options.compact_placement
    if demand.spans_nodes and not compact and judge_layouts:
        raise ServestackError(
            source, f"{NAMESPACE}:gpu_pools.{machine_type}.compact_placement",
            f"a replica of {', '.join(demand.models)} spans {machine_type} nodes, and without "
            "compact placement its ranks may sit racks apart",
            "remove compact_placement: false (compact placement is on wherever a replica spans "
            "nodes)",
        )  # fmt: skip
    if options.zones:
        zones = list(options.zones)
    elif default_zones:
        # A reservation step's pool lies where its reservation does.
        zones = list(default_zones)
    elif cluster.cluster_zone:
        zones = [cluster.cluster_zone]
    else:
        # Where the pool may span zones, every stocking zone widens the autoscaler's choice.
        zones = list(stocking[:1] if compact else stocking)
    fields = options.model_dump() | {
        "zones": zones,
        "machine_type": machine_type,
        "region": cluster.region,
        "min_nodes": demand.min_nodes,
        "max_nodes": demand.max_nodes + demand.upgrade_room,
        "upgrade_room_nodes": demand.upgrade_room,
        "replicas_span_nodes": demand.spans_nodes,
        "models": tuple(demand.models),
    }
    try:
        return validate(GpuPoolSpec, fields | (chain or {}), source, prefix)
    except ProfileValidationError as exc:
        if zones_key is None:
            raise
        # A chain step's zones are its pool's (or its reservation's), not a key of the step.
        for error in exc.errors:
            if error.field == f"{prefix}zones":
                error.field = zones_key
        raise ProfileValidationError(exc.errors) from None
