"""The frozen specs of the platform's node pools: the system pool (Ray heads, ingress,
operators) and one GPU node pool per machine type, or per step of its capacity chain. Each spec's
validators hold that pool's invariants (ordered bounds, a CPU system machine; GPU zones in the
region that stock the GPU, compact placement in one zone, provisioning that GKE accepts); a stack
that breaks one gets a `ServestackError` naming the file, the key and a fix.
`infra.platform.pools` derives the GPU pools from a stack; `infra/deploy/components/node_pools.py`
turns the specs into resources."""

from __future__ import annotations

import math
import re

from pydantic import Field, field_validator, model_validator

from infra.platform.capacity_config import GpuPoolOptions
from serving import catalog
from serving.catalog import MachineType
from serving.catalog.consumption import ConsumptionMode, compact_refusal, flex_start_refusal
from serving.catalog.quota import GLOBAL_GPU_QUOTA, gpu_quota_metric
from serving.compile.scheduling import COMPUTE_CLASS_LABEL, gpu_node_selector
from serving.errors import FixableValueError
from serving.frozen import Frozen

_MACHINE_TYPE = re.compile(r"^[a-z][a-z0-9]*-[a-z0-9-]+$")


class SystemPoolSpec(Frozen):
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
    compute_class: str | None = Field(
        default=None,
        description="The ComputeClass this pool is a step of (labelled and tainted for it), "
        "where the stack gives the pool's machine type a capacity chain.",
    )
    chain_of: str | None = Field(
        default=None, description="The machine type whose chain this step is (its models')."
    )
    chain_step: int | None = Field(default=None, ge=0, description="Its place in the chain.")
    max_run_duration_s: int | None = Field(
        default=None, description="Flex-start: how long a node lives before GKE reclaims it."
    )
    reservation_machine_type: str | None = Field(
        default=None, description="A chain step's specific reservation: the type it holds."
    )
    reservation_zone: str | None = Field(
        default=None, description="A chain step's specific reservation: the zone it lies in."
    )
    class_min_nodes: int = Field(
        default=0,
        ge=0,
        description="The nodes the plans keep up on the whole chain (every step pool itself "
        "starts empty: the class scales whichever step has capacity).",
    )

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
        refusal = compact_refusal(
            self.machine_type, zones=len(self.zones), flex_start=False, queued=False
        )
        if self.compact and refusal is not None:
            why = "a replica spans nodes" if self.replicas_span_nodes else "compact_placement"
            raise FixableValueError(
                f"{refusal} (compact because {why})",
                f"list one zone, e.g. zones: [{self.zones[0]}]",
                field="zones",
            )

    def _check_provisioning(self) -> None:
        refusal = flex_start_refusal(
            self.machine_type,
            auto_repair=False,
            reservation=self.reservation_affinity != "none",
            spot=self.spot,
        )
        if self.flex_start and refusal is not None:
            raise FixableValueError(
                refusal,
                "choose one way to obtain the nodes (a capacity chain orders several)",
                field="spot" if self.spot else "reservation_affinity",
            )
        if self.spot and self.queued_provisioning:
            raise FixableValueError(
                "spot does not combine with queued_provisioning",
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
        chained = self.compute_class is not None
        if self.reservation_affinity == "specific" and self.reserved_nodes is None and not chained:
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
        if self.compute_class is not None:
            return {COMPUTE_CLASS_LABEL: self.compute_class}
        return gpu_node_selector(self.machine_type)

    @property
    def pool_key(self) -> str:
        """Names the pool among the stack's: its machine type, or for a chain's step the
        chain's machine type, the step's place and its way."""
        if self.chain_step is None:
            return self.machine_type
        return f"{self.chain_of}-{self.chain_step}-{self.mode.replace('_', '-')}"

    @property
    def mode(self) -> ConsumptionMode:
        """The pool's way of obtaining nodes, as a chain's step names it."""
        if self.spot:
            return "spot"
        if self.flex_start:
            return "flex_start"
        if self.reservation_affinity != "none":
            return "reservation"
        return "on_demand"

    @property
    def way(self) -> str:
        """How the pool obtains its nodes, in a few words (`servestack pools`)."""
        if self.mode == "reservation":
            named = f" {self.reservations[0]}" if self.reservations else ""
            return f"reservation{named} ({self.reservation_affinity})"
        if self.mode == "flex_start" and self.max_run_duration_s is not None:
            return f"flex-start (nodes live {self.max_run_duration_s / 86400:g} days)"
        return self.provisioning

    @property
    def quota(self) -> list[tuple[str, int]]:
        """The quota metrics (in the pool's region, then global) its nodes count against, and
        the GPUs it may hold at its maximum: any step of a chain may be the one with room."""
        gpus = self.max_nodes * self.machine.gpus_per_node
        accelerator = self.machine.gke_accelerator
        regional = gpu_quota_metric(accelerator, self.mode, queued=self.queued_provisioning)
        return [(regional, gpus), (GLOBAL_GPU_QUOTA, gpus)]

    @property
    def kept_nodes(self) -> int:
        """The nodes this pool (or, for the chain's first step, its class) keeps up."""
        if self.chain_step is None:
            return self.min_nodes
        return self.class_min_nodes if self.chain_step == 0 else 0

    @property
    def initial_nodes_per_zone(self) -> int:
        """GKE starts a pool with this many nodes in each of its zones; the autoscaler then
        holds the total between min_nodes and max_nodes."""
        return math.ceil(self.min_nodes / len(self.zones))
