"""How a stack obtains the nodes of one GPU machine type: `GpuPoolOptions` (a value of
`servestack:gpu_pools`) and its capacity chain, the ordered `CapacityStep`s (a reservation,
flex-start, Spot or on-demand, optionally on another machine type of the same GPU). Here a value
is checked on its own; what must hold against the plans is checked when the pools are planned
(`infra/platform/pools.py`). `StackConfig` (`infra.platform.stack_config`) holds these options."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from serving import catalog
from serving.catalog.consumption import (
    CALENDAR_RESERVATION_MAX_DAYS,
    CONSUMPTION_MODES,
    FLEX_START_MAX_RUN_S,
    FLEX_START_MIN_RUN_S,
    ConsumptionMode,
)
from serving.errors import FixableValueError
from serving.frozen import StrictFrozen

ReservationAffinity = Literal["none", "any", "specific"]
GpuDriverVersion = Literal["LATEST", "DEFAULT", "INSTALLATION_DISABLED"]


class ReservationStep(StrictFrozen):
    """Take the nodes from a reservation."""

    name: str | None = Field(
        default=None,
        pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="The reservation's name; required for affinity: specific.",
    )
    affinity: Literal["specific", "any"] = Field(
        default="specific",
        description="specific: only the named reservation; any: any matching reservation.",
    )
    calendar: bool = Field(
        default=False,
        description=f"A calendar-mode reservation (up to {CALENDAR_RESERVATION_MAX_DAYS} days): "
        "its nodes go when it ends, so a later step must follow.",
    )
    machine_type: str | None = Field(
        default=None,
        description="The machine type the reservation holds (gcloud compute reservations "
        "describe); required for affinity: specific, and must be the step's.",
    )
    zone: str | None = Field(
        default=None,
        pattern=r"^[a-z]+-[a-z]+[0-9]+-[a-z]$",
        description="The zone the reservation lies in; required for affinity: specific. The "
        "step's pool lies there (by default) and nowhere else.",
    )

    @model_validator(mode="after")
    def _named(self) -> ReservationStep:
        if self.affinity == "specific" and self.name is None:
            raise FixableValueError(
                "a specific reservation needs its name",
                "add name: <reservation> (gcloud compute reservations list), or use affinity: any",
                field="name",
            )
        if self.affinity == "any" and (
            self.name is not None or self.calendar or self.machine_type or self.zone
        ):
            raise FixableValueError(
                "affinity: any takes whatever reservation matches, so it names none",
                "drop name, calendar, machine_type and zone, or use affinity: specific",
                field="affinity",
            )
        if self.affinity == "specific" and (self.machine_type is None or self.zone is None):
            raise FixableValueError(
                f"the reservation '{self.name}' must say what it holds, or no one can check "
                "that its step takes nodes from it",
                f"add machine_type and zone as `gcloud compute reservations describe {self.name}` "
                "gives them",
                field="machine_type" if self.machine_type is None else "zone",
            )
        if self.machine_type is not None:
            try:
                catalog.machine_type(self.machine_type)
            except FixableValueError as exc:
                raise FixableValueError(exc.problem, exc.fix, field="machine_type") from None
        return self


class FlexStartStep(StrictFrozen):
    """Wait for flex-start (Dynamic Workload Scheduler) capacity."""

    max_run_duration_s: int = Field(
        default=FLEX_START_MAX_RUN_S,
        ge=FLEX_START_MIN_RUN_S,
        le=FLEX_START_MAX_RUN_S,
        description="How long a node lives before GKE reclaims it (seven days at most).",
    )


class NoOptions(StrictFrozen):
    """A step with nothing to choose (`spot: {}`, `on_demand: {}`)."""


class CapacityStep(StrictFrozen):
    """One step of a capacity chain: exactly one way to obtain nodes, optionally on another
    machine type of the same GPU."""

    reservation: ReservationStep | None = Field(default=None, description="From a reservation.")
    flex_start: FlexStartStep | None = Field(default=None, description="Flex-start VMs.")
    spot: NoOptions | None = Field(default=None, description="Spot VMs.")
    on_demand: NoOptions | None = Field(default=None, description="On-demand VMs.")
    machine_type: str | None = Field(
        default=None,
        description="Another machine type for this step; by default the pool's own.",
    )

    @model_validator(mode="after")
    def _one_mode(self) -> CapacityStep:
        modes = [mode for mode in _MODES if getattr(self, mode) is not None]
        if len(modes) != 1:
            raise FixableValueError(
                f"a capacity step takes exactly one of {', '.join(_MODES)}; this one has "
                f"{', '.join(modes) or 'none'}",
                "write one step per way, e.g. [{spot: {}}, {on_demand: {}}]",
            )
        if self.machine_type is not None:
            try:
                catalog.machine_type(self.machine_type)
            except FixableValueError as exc:
                raise FixableValueError(exc.problem, exc.fix, field="machine_type") from None
        return self

    @property
    def mode(self) -> ConsumptionMode:
        mode: ConsumptionMode
        for mode in _MODES:
            if getattr(self, mode) is not None:
                return mode
        raise AssertionError("validated to hold one mode")


_MODES = CONSUMPTION_MODES
# The options a chain's steps replace on its pool.
_CHAIN_REPLACES = (
    "spot", "flex_start", "queued_provisioning", "reservation_affinity", "reservations",
    "reserved_nodes",
)  # fmt: skip


class GpuPoolOptions(StrictFrozen):
    """How a stack wants the nodes of one GPU machine type obtained (`servestack:gpu_pools`).

    The pool itself (accelerators, node counts, compact placement where a replica spans nodes)
    follows from the catalog and the models' plans; these are the choices a plan cannot make.
    """

    spot: bool = Field(
        default=False, description="Spot VMs: much cheaper, but GCP may reclaim a node any time."
    )
    flex_start: bool = Field(
        default=False,
        description="Flex-start VMs (Dynamic Workload Scheduler): wait for capacity, then run "
        "up to seven days.",
    )
    queued_provisioning: bool = Field(
        default=False,
        description="DWS queued provisioning: nodes come only through ProvisioningRequests.",
    )
    compact_placement: bool | None = Field(
        default=None,
        description="Compact placement for the pool; unset, on exactly where a replica spans "
        "nodes (false there is refused by `pulumi up` and by the policy pack).",
    )
    reservation_affinity: ReservationAffinity = Field(
        default="none",
        description="none; any (use matching reservations, else on-demand); specific (only "
        "the reservations named in `reservations`).",
    )
    reservations: list[str] = Field(
        default_factory=list, description="Reservation names, for reservation_affinity: specific."
    )
    zones: list[str] = Field(
        default_factory=list,
        description="Zones for this pool; by default every zone of the region that stocks "
        "the GPU (the first one where the pool needs compact placement).",
    )
    gpu_driver_version: GpuDriverVersion = Field(
        default="LATEST", description="The NVIDIA driver GKE installs on the nodes."
    )
    spot_shutdown_grace_s: int | None = Field(
        default=None,
        ge=30,
        le=120,
        description="Spot only: the graceful node shutdown GKE gives a preempted node (30 s by "
        "default, up to 120 s on GKE 1.35+), of which the last 15 s are for system pods.",
    )
    reserved_nodes: int | None = Field(
        default=None,
        ge=1,
        description="VMs the named reservations hold (reservation_affinity: specific): the "
        "pool, upgrade room included, may not need more.",
    )
    capacity: list[CapacityStep] = Field(
        default_factory=list,
        description="A capacity chain: ways to obtain nodes in priority order (reservation, "
        "flex_start, spot, on_demand), realised as a GKE ComputeClass with one node pool per "
        "step; it replaces spot, flex_start, queued_provisioning and the reservation keys.",
    )

    @model_validator(mode="after")
    def _chain_alone(self) -> GpuPoolOptions:
        if not self.capacity:
            return self
        default = GpuPoolOptions()
        for key in _CHAIN_REPLACES:
            if getattr(self, key) != getattr(default, key):
                raise FixableValueError(
                    f"{key} and capacity both say how to obtain the nodes",
                    f"drop {key} and write it as a step of capacity",
                    field=key,
                )
        seen: list[tuple[str, str | None, str | None]] = []
        for index, step in enumerate(self.capacity):
            reservation = step.reservation.name if step.reservation else None
            way = (step.mode, step.machine_type, reservation)
            if way in seen:
                raise FixableValueError(
                    f"step {index} repeats an earlier step ({step.mode})",
                    "list each way once",
                    field=f"capacity.{index}",
                )
            seen.append(way)
        last = self.capacity[-1]
        if last.reservation is not None and last.reservation.calendar:
            raise FixableValueError(
                "the chain ends on a calendar-mode reservation: when it ends the pool has "
                "nowhere to go",
                "add a later step (on_demand: {} or spot: {})",
                field=f"capacity.{len(self.capacity) - 1}",
            )
        return self
