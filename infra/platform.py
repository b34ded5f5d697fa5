"""The GKE platform a stack needs, derived and checked before any resource is registered.

`plan_platform` turns a stack (its config and its models' plans) into one frozen spec per
component: the network, the cluster, the system node pool and one GPU node pool per machine
type the plans use. Each spec's validators hold that component's invariants; a stack that breaks
one gets a `ServestackError` naming the file, the key and a fix. The Pulumi components in
`infra/components/` turn specs into resources and decide nothing; `servestack pools` prints the
same specs offline.

This module also owns the scheduling contract with the workloads on the cluster: the labels and
the taint GPU nodes carry, which the RayService's worker groups select and tolerate.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from ipaddress import IPv4Network
from itertools import combinations
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from infra.config import (
    NAMESPACE,
    GpuPoolOptions,
    KubeRayInstall,
    MaintenanceExclusion,
    ReleaseChannel,
    Stack,
)
from infra.disruption import Resilience, resilience_for
from infra.fits import PodFit, check_fits, stack_pods
from infra.manifests import check_sizes, compile_for, model_objects
from serving import catalog
from serving.catalog import MachineType
from serving.compiler import CompiledModel
from serving.errors import FixableValueError, ProfileValidationError, ServestackError
from serving.exposure import SMALLEST_AUTHORIZED_PREFIX, too_wide
from serving.loading import display_path, validate
from serving.planner import Plan, plan
from serving.scheduling import NODE_SURGE, gpu_node_selector
from serving.spec import ModelSpec

_ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
_CLOCK = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")
_MACHINE_TYPE = re.compile(r"^[a-z][a-z0-9]*-[a-z0-9-]+$")
# A plan error whose fix is in this part of a model profile.
_VERDICT_FIELDS = {
    "does-not-fit": "parallelism",
    "tp-crosses-node": "parallelism.tensor",
    "tp-heads": "parallelism.tensor",
    "ep-on-dense": "parallelism.expert",
    "ep-size-indivisible": "parallelism.data",
    "needless-span": "parallelism",
    "placement-strategy": "placement",
}


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NetworkSpec(_Frozen):
    """The VPC: one subnet in the region, with secondary ranges for pods and services.

    Invariants: every range is private (RFC 1918), no two ranges overlap, and the control
    plane's range is the /28 GKE requires.
    """

    region: str
    subnet_cidr: IPv4Network
    pods_cidr: IPv4Network
    services_cidr: IPv4Network
    control_plane_cidr: IPv4Network

    @model_validator(mode="after")
    def _private_and_disjoint(self) -> NetworkSpec:
        ranges = {
            "subnet_cidr": self.subnet_cidr,
            "pods_cidr": self.pods_cidr,
            "services_cidr": self.services_cidr,
            "control_plane_cidr": self.control_plane_cidr,
        }
        for name, cidr in ranges.items():
            if not cidr.is_private:
                raise FixableValueError(
                    f"{cidr} is not a private range; nodes, pods and services stay off the "
                    "internet",
                    "use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16",
                    field=name,
                )
        for (one, first), (other, second) in combinations(ranges.items(), 2):
            if first.overlaps(second):
                raise FixableValueError(
                    f"{first} overlaps {other} ({second})",
                    f"give {one} and {other} disjoint ranges",
                    field=one,
                )
        if self.control_plane_cidr.prefixlen != 28:
            raise FixableValueError(
                f"{self.control_plane_cidr} is a /{self.control_plane_cidr.prefixlen}; GKE "
                "gives the control plane exactly a /28",
                "use a /28, e.g. 172.16.0.0/28",
                field="control_plane_cidr",
            )
        return self


class ClusterSpec(_Frozen):
    """A private, regional or zonal GKE Standard cluster.

    Invariants: a zonal cluster's zone is in the region, and the control plane is never open to
    a block wider than `serving.exposure` allows unless the stack says so explicitly.
    """

    project: str
    region: str
    cluster_zone: str | None = None
    release_channel: ReleaseChannel = "REGULAR"
    master_authorized_networks: tuple[IPv4Network, ...] = ()
    allow_public_control_plane: bool = False
    deletion_protection: bool = True
    maintenance_window_start: str = "03:00"
    maintenance_exclusions: tuple[MaintenanceExclusion, ...] = ()
    kuberay_install: KubeRayInstall = "helm"
    binary_authorization: bool = True

    @field_validator("maintenance_window_start")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not _CLOCK.fullmatch(value):
            raise FixableValueError(
                f"'{value}' is not a time of day", "write HH:MM in UTC, e.g. '03:00'"
            )
        return value

    @model_validator(mode="after")
    def _located_and_closed(self) -> ClusterSpec:
        zone = self.cluster_zone
        outside = zone is not None and catalog.region_of(zone) != self.region
        if zone is not None and (not _ZONE.fullmatch(zone) or outside):
            raise FixableValueError(
                f"'{zone}' is not a zone of gcp:region {self.region}",
                f"use a zone such as {self.region}-a, or unset it for a regional cluster",
                field="cluster_zone",
            )
        wide = too_wide(self.master_authorized_networks)
        if wide and not self.allow_public_control_plane:
            raise FixableValueError(
                f"{wide[0]} opens the control plane to a /{wide[0].prefixlen}, wider than the "
                f"/{SMALLEST_AUTHORIZED_PREFIX} the policy pack accepts: as good as the internet",
                "list the CIDR blocks of your offices, VPN or CI runners instead (e.g. "
                "203.0.113.7/32); if you really mean it, also set "
                f"{NAMESPACE}:allow_public_control_plane: true",
                field="master_authorized_networks",
            )
        return self

    @property
    def location(self) -> str:
        """Where GKE runs the control plane: the zone of a zonal cluster, else the region."""
        return self.cluster_zone or self.region


class SystemPoolSpec(_Frozen):
    """The CPU pool for what is not a model: Ray heads, the ingress, operators.

    Invariants: at most as many nodes at minimum as at maximum, and a CPU machine type (a GPU
    machine would spend GPUs on pods that cannot use them).
    """

    machine_type: str
    min_nodes: int = Field(ge=0)
    max_nodes: int = Field(ge=1)

    @field_validator("machine_type")
    @classmethod
    def _cpu_machine(cls, value: str) -> str:
        if value in catalog.MACHINE_TYPES:
            raise FixableValueError(
                f"{value} is a GPU machine type; the system pool runs CPU pods only",
                "use a CPU machine type such as e2-standard-4 or n2-standard-8",
            )
        if not _MACHINE_TYPE.fullmatch(value):
            raise FixableValueError(
                f"'{value}' is not a GCE machine type name", "use a name such as e2-standard-4"
            )
        if value not in catalog.CPU_MACHINE_TYPES:
            # Unknown, its allocatable cannot be checked against the heads and the edge.
            raise FixableValueError(
                f"{value} is not in the catalog of CPU machine types, so no pod can be "
                "checked against it",
                "use one of: " + ", ".join(catalog.CPU_MACHINE_TYPES),
            )
        return value

    @model_validator(mode="after")
    def _ordered(self) -> SystemPoolSpec:
        if self.min_nodes > self.max_nodes:
            raise FixableValueError(
                f"the minimum ({self.min_nodes} nodes) is above the maximum ({self.max_nodes})",
                f"raise the maximum to at least {self.min_nodes}, or lower the minimum",
                field="min_nodes",
            )
        return self


class GpuPoolSpec(GpuPoolOptions):
    """One GPU node pool: the nodes of one machine type for every model planned onto it.

    Invariants: node bounds are ordered; every zone is in the region and stocks the GPU; compact
    placement (wherever a replica spans nodes, or the stack asks) means exactly one zone; Spot,
    flex-start and queued provisioning do not mix and take no reservation; queued provisioning
    starts no node by itself and cannot be compact; a machine type GCP does not sell on demand
    is obtained through Spot, flex-start or queued provisioning.
    """

    machine_type: str
    region: str
    min_nodes: int = Field(ge=0, description="Sum of the plans' minimum nodes on this type.")
    max_nodes: int = Field(
        ge=1,
        description="Sum of the plans' maximum nodes on this type, plus the upgrade room.",
    )
    upgrade_room_nodes: int = Field(
        default=0,
        ge=0,
        description="Nodes a RayService upgrade (NewCluster) adds on top: the new cluster's "
        "workers at the largest model's minimum, while the old one still serves.",
    )
    replicas_span_nodes: bool = Field(
        default=False, description="Some replica needs more than one node of this type."
    )
    models: tuple[str, ...] = Field(default=(), description="The models planned onto it.")

    @field_validator("machine_type")
    @classmethod
    def _known_machine(cls, value: str) -> str:
        catalog.machine_type(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> GpuPoolSpec:
        self._check_bounds()
        self._check_zones()
        self._check_provisioning()
        return self

    def _check_bounds(self) -> None:
        if self.min_nodes > self.max_nodes:
            raise FixableValueError(
                f"the plans need at least {self.min_nodes} {self.machine_type} nodes but allow "
                f"at most {self.max_nodes}",
                "check the models' autoscaling.min_replicas and max_replicas",
                field="min_nodes",
            )

    def _check_zones(self) -> None:
        stocking = catalog.zones_offering(self.machine.gke_accelerator, self.region)
        gpu = f"{self.machine.gke_accelerator} ({self.machine_type})"
        if not self.zones:
            raise FixableValueError(
                f"the {self.machine_type} pool has no zone",
                f"list zones of {self.region} that stock {gpu}: {', '.join(stocking)}",
                field="zones",
            )
        for zone in self.zones:
            if catalog.region_of(zone) != self.region:
                raise FixableValueError(
                    f"{zone} is not in gcp:region {self.region}",
                    f"use zones of {self.region}: {', '.join(stocking) or 'none stock it'}",
                    field="zones",
                )
            if zone not in stocking:
                raise FixableValueError(
                    f"{zone} does not stock {gpu}",
                    f"use a zone that does: {', '.join(stocking)}",
                    field="zones",
                )
        if self.compact and len(self.zones) != 1:
            why = "a replica spans nodes" if self.replicas_span_nodes else "compact_placement"
            raise FixableValueError(
                f"compact placement ({why}) keeps a pool in one zone, not {len(self.zones)}",
                f"list one zone, e.g. zones: [{self.zones[0]}]",
                field="zones",
            )

    def _check_provisioning(self) -> None:
        if self.spot and (self.flex_start or self.queued_provisioning):
            raise FixableValueError(
                "spot does not combine with flex_start or queued_provisioning",
                "choose one way to obtain the nodes",
                field="spot",
            )
        if (self.flex_start or self.queued_provisioning) and self.reservation_affinity != "none":
            raise FixableValueError(
                "flex-start and queued provisioning take capacity as it frees up, never from "
                "a reservation",
                "set reservation_affinity: none, or drop flex_start / queued_provisioning",
                field="reservation_affinity",
            )
        if (self.reservation_affinity == "specific") != bool(self.reservations):
            raise FixableValueError(
                "reservations name the reservations of reservation_affinity: specific, and "
                "only of it",
                "set both (reservation_affinity: specific and reservations: [name]) or neither",
                field="reservations",
            )
        if self.spot_shutdown_grace_s is not None and not self.spot:
            raise FixableValueError(
                "spot_shutdown_grace_s is the notice of a preempted Spot node; this pool is "
                f"{self.provisioning}",
                "drop spot_shutdown_grace_s, or set spot: true",
                field="spot_shutdown_grace_s",
            )
        if self.reservation_affinity == "specific" and self.reserved_nodes is None:
            raise FixableValueError(
                "a pool bound to specific reservations must say how many VMs they hold, or "
                "its upgrade room cannot be checked",
                "set reserved_nodes to the reservations' VM count",
                field="reserved_nodes",
            )
        if self.queued_provisioning and self.compact:
            raise FixableValueError(
                "queued provisioning cannot use compact placement, which this pool needs"
                + (" because a replica spans nodes" if self.replicas_span_nodes else ""),
                "drop queued_provisioning (flex_start: true obtains nodes in a similar way)",
                field="queued_provisioning",
            )
        if self.queued_provisioning and self.min_nodes:
            raise FixableValueError(
                f"queued provisioning starts nodes only for ProvisioningRequests, but "
                f"{', '.join(self.models) or 'the plans'} keep {self.min_nodes} node(s) up",
                "set autoscaling.min_replicas: 0 in those profiles, or drop queued_provisioning",
                field="queued_provisioning",
            )
        if not self.machine.on_demand and self.provisioning == "on-demand":
            raise FixableValueError(
                f"GCP sells {self.machine_type} only as Spot, flex-start or queued "
                "provisioning, not on demand",
                "set spot: true (or flex_start: true or queued_provisioning: true), or set the "
                "profiles' machine_type to a size sold on demand such as "
                f"{self._on_demand_sibling()}",
                field="spot",
            )

    def _on_demand_sibling(self) -> str:
        siblings = [m.name for m in catalog.machines_for(self.machine.accelerator) if m.on_demand]
        return siblings[0] if siblings else "another machine type"

    @property
    def machine(self) -> MachineType:
        return catalog.MACHINE_TYPES[self.machine_type]

    @property
    def compact(self) -> bool:
        """A replica spanning nodes talks between them over the network at every step;
        compact placement puts the pool's nodes close together so that hop stays short."""
        if self.compact_placement is not None:
            return self.compact_placement
        return self.replicas_span_nodes

    @property
    def provisioning(self) -> str:
        if self.spot:
            return "spot"
        if self.queued_provisioning:
            return "queued" + (" flex-start" if self.flex_start else "")
        return "flex-start" if self.flex_start else "on-demand"

    @property
    def node_selector(self) -> dict[str, str]:
        return gpu_node_selector(self.machine_type)

    @property
    def initial_nodes_per_zone(self) -> int:
        """GKE starts a pool with this many nodes in each of its zones; the autoscaler then
        holds the total between min_nodes and max_nodes."""
        return math.ceil(self.min_nodes / len(self.zones))


class PlatformPlan(_Frozen):
    """Everything the Pulumi program builds for one stack, before it builds it."""

    stack: str
    node_service_account_id: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    network: NetworkSpec
    cluster: ClusterSpec
    system_pool: SystemPoolSpec
    gpu_pools: tuple[GpuPoolSpec, ...]
    pods: tuple[PodFit, ...] = Field(
        default=(), description="Every kind of pod and the room a node of its pool has."
    )
    models: dict[str, CompiledModel] = Field(
        default_factory=dict,
        exclude=True,
        description="Each model planned and compiled once, by profile name, for the serving "
        "plane and its dashboards.",
    )


@dataclass
class _Demand:
    """What the plans ask of one machine type, summed over models and replica groups."""

    min_nodes: int = 0
    max_nodes: int = 0
    upgrade_room: int = 0
    spans_nodes: bool = False
    models: list[str] = field(default_factory=list)


def plan_platform(stack: Stack, *, judge_layouts: bool = True) -> PlatformPlan:
    """The specs for one stack, or a `ServestackError` naming the file, key and fix.

    `pulumi up` refuses a model whose plan cannot work before registering anything
    (`judge_layouts`). `servestack preview` turns that off to register every resource and let
    the policy pack judge the layouts, as `pulumi preview --policy-pack` would, every violation
    at once and by name.
    """
    source = display_path(stack.path)
    config = stack.config
    prefix = f"{NAMESPACE}:"
    project = _required(stack.gcp.project, source, "gcp:project", "your GCP project id")
    region = _required(stack.gcp.region, source, "gcp:region", "a region, e.g. us-central1")
    models = compile_stack(stack)
    demands = _gpu_demands(stack, models, judge_layouts)
    for profile, model in models.items():
        check_sizes(stack_objects(stack, model), display_path(stack.profile_path(profile)))
    network = validate(
        NetworkSpec,
        {"region": region} | config.model_dump(
            include={"subnet_cidr", "pods_cidr", "services_cidr", "control_plane_cidr"}
        ),
        source,
        prefix,
    )  # fmt: skip
    cluster = validate(
        ClusterSpec,
        {"project": project, "region": region} | config.model_dump(
            include=set(ClusterSpec.model_fields) - {"project", "region"}
        ),
        source,
        prefix,
    )  # fmt: skip
    system_pool = validate(
        SystemPoolSpec,
        {
            "machine_type": config.system_machine_type,
            "min_nodes": config.system_min_nodes,
            "max_nodes": config.system_max_nodes,
        },
        source,
        f"{prefix}system_",
    )
    for machine_type in config.gpu_pools.keys() - demands.keys():
        planned = ", ".join(sorted(demands)) or "none"
        raise ServestackError(
            source, f"{prefix}gpu_pools.{machine_type}",
            f"no model of this stack is planned onto {machine_type} (planned: {planned})",
            f"remove the entry, or set machine_type: {machine_type} in a model profile",
        )  # fmt: skip
    gpu_pools = tuple(
        _gpu_pool(
            machine_type,
            demand,
            config.gpu_pools.get(machine_type),
            cluster,
            source,
            judge_layouts,
        )
        for machine_type, demand in demands.items()
    )
    pods = stack_pods(stack, models, system_pool.machine_type)
    if judge_layouts:
        # The preview registers a pod that cannot fit, for the policy pack to name.
        check_fits(stack, pods, system_pool.max_nodes)
    return PlatformPlan(
        stack=stack.name,
        node_service_account_id=node_service_account_id(stack.name),
        network=network,
        cluster=cluster,
        system_pool=system_pool,
        gpu_pools=gpu_pools,
        pods=tuple(pods),
        models=models,
    )


def stack_resilience(stack: Stack) -> Resilience:
    """The notice, drains and caches of the stack's nodes (without the GCS store's address,
    which only the Pulumi program knows)."""
    config = stack.config
    return resilience_for(
        config.gpu_pools,
        stream_timeout_s=config.stream_timeout_s,
        weights_cache=config.weights_cache,
    )


def compile_model(stack: Stack, spec: ModelSpec, model_plan: Plan) -> CompiledModel:
    """One planned model of the stack, compiled for the stack's nodes."""
    return compile_for(spec, model_plan, stack_resilience(stack))


def compile_stack(stack: Stack) -> dict[str, CompiledModel]:
    """Every model of the stack planned once (at the stack's prices) and compiled once."""
    return {
        profile: compile_model(stack, spec, plan(spec, stack.config.prices))
        for profile, spec in stack.profiles.items()
    }


def stack_objects(stack: Stack, model: CompiledModel) -> list[dict[str, Any]]:
    """One model's Kubernetes objects as this stack registers them."""
    config = stack.config
    spec = model.spec
    return model_objects(
        model,
        image=config.ray_image,
        host=config.edge_host,
        requests_per_second=config.edge_rate_limit_rps,
        stream_timeout_s=config.stream_timeout_s,
        with_hf_token="hf_token" in stack.secrets and not spec.source.startswith("gs://"),
        token_generation=config.ray_token_generation,
        resilience=stack_resilience(stack),
    )


def node_service_account_id(stack: str) -> str:
    """A service account id (6-30 characters) per stack; a long stack name is shortened with a
    hash of it, so two stacks in one project never share node credentials."""
    slug = re.sub(r"[^a-z0-9]+", "-", stack.lower()).strip("-") or "stack"
    account = f"servestack-{slug}-nodes"
    if len(account) <= 30:
        return account
    digest = hashlib.sha256(stack.encode()).hexdigest()[:4]
    return f"{f'servestack-{slug}'[:19].rstrip('-')}-{digest}-nodes"


def _required(value: str | None, source: str, key: str, what: str) -> str:
    if not value:
        raise ServestackError(
            source, key, "is required to build the cluster",
            f"add '{key}: <{what}>' to the stack file, or run `pulumi config set {key} ...`",
        )  # fmt: skip
    return value


def _gpu_demands(
    stack: Stack, models: dict[str, CompiledModel], judge_layouts: bool = True
) -> dict[str, _Demand]:
    """Nodes per machine type over every model's replica groups; a plan that cannot work, or a
    tensor-parallel group wider than its pool's nodes, stops the platform here."""
    problems: list[ServestackError] = []
    demands: dict[str, _Demand] = {}
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
                        f"tensor={tensor} needs {tensor} GPUs on one node (one NVLink domain), "
                        f"but the {placement.machine_type} pool's nodes have "
                        f"{placement.gpus_per_node}",
                        f"use tensor: {placement.gpus_per_node} or less, with pipeline stages "
                        f"across nodes; {look}",
                    )
                )
            demand = demands.setdefault(placement.machine_type, _Demand())
            demand.spans_nodes |= placement.spans_nodes
            if model not in demand.models:
                demand.models.append(model)
        # The pool holds what the model's RayService worker groups may scale to (one pod per
        # node), so the two can never disagree.
        for shape in compiled.worker_shapes:
            demand = demands[shape.machine_type]
            demand.min_nodes += shape.min_replicas
            demand.max_nodes += shape.max_replicas
            # Models upgrade one at a time: the largest new cluster at its minimum.
            demand.upgrade_room = max(demand.upgrade_room, shape.min_replicas)
        for verdict in model_plan.verdicts:
            if verdict.severity != "error" or (too_wide and verdict.code == "tp-crosses-node"):
                continue
            field_name = _VERDICT_FIELDS.get(verdict.code, "parallelism")
            problems.append(ServestackError(where, field_name, verdict.message, look))
    if problems and judge_layouts:
        raise ProfileValidationError(problems)
    return demands


def _gpu_pool(
    machine_type: str,
    demand: _Demand,
    options: GpuPoolOptions | None,
    cluster: ClusterSpec,
    source: str,
    judge_layouts: bool = True,
) -> GpuPoolSpec:
    options = options or GpuPoolOptions()
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
    elif cluster.cluster_zone:
        zones = [cluster.cluster_zone]
    else:
        # Where the pool may span zones, every stocking zone widens the autoscaler's choice.
        zones = list(stocking[:1] if compact else stocking)
    return validate(
        GpuPoolSpec,
        options.model_dump()
        | {
            "zones": zones,
            "machine_type": machine_type,
            "region": cluster.region,
            "min_nodes": demand.min_nodes,
            "max_nodes": demand.max_nodes + demand.upgrade_room,
            "upgrade_room_nodes": demand.upgrade_room,
            "replicas_span_nodes": demand.spans_nodes,
            "models": tuple(demand.models),
        },
        source,
        f"{NAMESPACE}:gpu_pools.{machine_type}.",
    )
