"""How GCP hands out GPU nodes, and what GKE allows of each way: the consumption options a
capacity chain orders (reservations, flex-start, Spot, on demand) and the rules that bind them
to placement and node management.

Sources, read 2026-12: GKE's ComputeClass reference
(https://cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass) and its flex-start
page (https://cloud.google.com/kubernetes-engine/docs/concepts/flex-start-vms: a flex-start VM
runs at most seven days, `maxRunDurationSeconds` defaulting to that); the preconditions of
Google's cluster toolkit, modules/compute/gke-node-pool/main.tf of
https://github.com/GoogleCloudPlatform/cluster-toolkit at 01a7a3ed5019e338698853212f16b5d9e2d02d78
(COMPACT needs a single zone, no blue-green upgrade and no queued provisioning; flex-start needs
auto_repair false, consume_reservation_type NO_RESERVATION and spot false); that a
reservation holds VMs of one machine type in one zone and GKE consumes it only for matching
nodes is from GKE's consuming-reservations page
(https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations, "Consuming
reserved zonal resources", read 2026-12-03). That COMPACT with
flex-start is offered only on A3 Ultra, A4 and H4D is from the project's design notes (GKE's
compact placement page); the toolkit version read here does not encode it yet.
"""

from __future__ import annotations

from typing import Literal

# The steps of a capacity chain, in the words of the stack file.
ConsumptionMode = Literal["reservation", "flex_start", "spot", "on_demand"]
CONSUMPTION_MODES: tuple[ConsumptionMode, ...] = ("reservation", "flex_start", "spot", "on_demand")

# A flex-start VM lives at most seven days; GKE then reclaims it.
FLEX_START_MAX_RUN_S = 7 * 24 * 3600
# GCE's shortest max run duration.
FLEX_START_MIN_RUN_S = 600
# A calendar-mode reservation (future reservation in calendar mode) lasts up to 90 days.
CALENDAR_RESERVATION_MAX_DAYS = 90
# Machine series whose node pools may be COMPACT and flex-start at once.
COMPACT_FLEX_START_SERIES = ("a3-ultragpu", "a4-highgpu", "h4d")


def compact_flex_start_allowed(machine_type: str) -> bool:
    return machine_type.startswith(COMPACT_FLEX_START_SERIES)


def compact_refusal(
    machine_type: str,
    *,
    zones: int,
    flex_start: bool,
    queued: bool,
) -> str | None:
    """Why GKE will not give a COMPACT pool of `machine_type` these settings, or None."""
    if zones != 1:
        return (
            f"a compact {machine_type} pool must sit in one zone, not {zones}: GKE places "
            "COMPACT pools in a single zone"
        )
    if queued:
        return f"a compact {machine_type} pool cannot use queued provisioning"
    if flex_start and not compact_flex_start_allowed(machine_type):
        series = ", ".join(s + "-*" for s in COMPACT_FLEX_START_SERIES)
        return (
            f"GKE offers compact placement with flex-start only on {series}, not on {machine_type}"
        )
    return None


def flex_start_refusal(
    machine_type: str, *, auto_repair: bool, reservation: bool, spot: bool
) -> str | None:
    """Why GKE will not start a flex-start pool of `machine_type` so, or None."""
    if auto_repair:
        return (
            f"a flex-start {machine_type} pool needs auto-repair off (a repair would recreate "
            "the node outside its grant)"
        )
    if reservation:
        return f"a flex-start {machine_type} pool takes no reservation"
    if spot:
        return f"a flex-start {machine_type} pool cannot also be Spot"
    return None


def run_limit_refusal(
    machine_type: str, max_run_s: int, exclusion: str, exclusion_s: float
) -> str | None:
    """Why a flex-start step's run limit breaks the stack's maintenance plan, or None: during a
    maintenance exclusion the stack wants its nodes left alone, but GKE still reclaims a
    flex-start node at its run limit, so an exclusion longer than the limit holds a planned
    outage."""
    if exclusion_s <= max_run_s:
        return None
    return (
        f"the maintenance exclusion '{exclusion}' keeps nodes as they are for "
        f"{exclusion_s / 86400:g} days, but flex-start {machine_type} nodes live at most "
        f"{max_run_s / 86400:g} days: GKE reclaims them inside the window"
    )


def reservation_refusal(
    name: str, reserved_machine: str, reserved_zone: str, machine_type: str, zones: list[str]
) -> str | None:
    """Why a step bound to the specific reservation `name` (which holds `reserved_machine` VMs
    in `reserved_zone`) can never take a node from it as a pool of `machine_type` in `zones`, or
    None. A reservation holds VMs of one machine type in one zone; GKE consumes it only for a
    node of that type in that zone, and a pool bound to it specifically creates no other node."""
    if reserved_machine != machine_type:
        return (
            f"the reservation '{name}' holds {reserved_machine} VMs, but its step's pool is "
            f"{machine_type}: GKE would never take a node from it"
        )
    if zones != [reserved_zone]:
        return (
            f"the reservation '{name}' lies in {reserved_zone}, but its step's pool is in "
            f"{', '.join(zones)}: GKE consumes it only for nodes in {reserved_zone}"
        )
    return None
