"""GKE custom ComputeClasses (`cloud.google.com/v1`), one per capacity chain: the ordered ways a
GPU pool's nodes are obtained, as plain dicts. Each step is a node pool the platform plan makes
and labels and taints `cloud.google.com/compute-class=<name>` (how a manually created pool joins
a class on GKE Standard); the class's priorities describe those pools in order, so the cluster
autoscaler scales the first one that has capacity, and active migration moves workloads back to
a preferred step when it frees up. Node pool auto-creation stays off: every node is a pool the
stack declares. Fields are GKE's ComputeClass reference's
(https://cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from serving import catalog
from serving.catalog.consumption import ConsumptionMode
from serving.compile.scheduling import COMPUTE_CLASS_LABEL

API_VERSION = "cloud.google.com/v1"
KIND = "ComputeClass"
# GKE's names for reservation affinity in a priority.
_AFFINITY = {"specific": "Specific", "any": "AnyBestEffort"}
# The pool's driver choice, as a priority spells it (INSTALLATION_DISABLED has no spelling:
# the priority then leaves the driver to the pool).
_DRIVER = {"LATEST": "latest", "DEFAULT": "default"}


@dataclass(frozen=True)
class ClassStep:
    """One step of a chain: the machine type and how its nodes are obtained."""

    machine_type: str
    mode: ConsumptionMode
    reservation: str | None = None
    reservation_affinity: str = "specific"
    max_run_s: int | None = None
    driver_version: str = "LATEST"
    reservation_zone: str | None = None


def compute_class_name(machine_type: str) -> str:
    """The class of the chain of `machine_type`'s pool (one cluster per stack, one chain per
    pool, so the machine type names it)."""
    return f"servestack-{machine_type}"


def compute_class(name: str, steps: list[ClassStep]) -> dict[str, Any]:
    """The ComputeClass of one chain, its priorities in the chain's order."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "servestack"},
        },
        "spec": {
            "priorities": [_priority(step) for step in steps],
            # The stack declares every pool (with its taints, hardening and bounds).
            "nodePoolAutoCreation": {"enabled": False},
            # Back to a preferred step (a reservation, the cheaper mode) when it has room;
            # GKE honours the workers' PodDisruptionBudgets while moving them.
            "activeMigration": {"optimizeRulePriority": True},
            # No E2 stand-ins for GPU workers: a pending pod waits for a step to have room.
            "whenUnsatisfiable": "DoNotScaleUp",
        },
    }


def _priority(step: ClassStep) -> dict[str, Any]:
    machine = catalog.machine_type(step.machine_type)
    gpu: dict[str, Any] = {"type": machine.gke_accelerator, "count": machine.gpus_per_node}
    if step.driver_version in _DRIVER:
        gpu["driverVersion"] = _DRIVER[step.driver_version]
    priority: dict[str, Any] = {"machineType": machine.name, "gpu": gpu}
    if step.mode == "reservation":
        if step.reservation_affinity == "specific" and step.reservation is None:
            # GKE's CRD refuses a Specific affinity that names no reservation (a CEL rule the
            # schema's validator does not run): never render one.
            raise ValueError(f"{step.machine_type}: a specific reservation step names none")
        reservations: dict[str, Any] = {"affinity": _AFFINITY[step.reservation_affinity]}
        if step.reservation is not None:
            reservations["specific"] = [{"name": step.reservation}]
        priority |= {"spot": False, "reservations": reservations}
        if step.reservation_zone is not None:
            # A reservation holds VMs in one zone: the step's nodes come from there.
            priority["location"] = {"zones": [step.reservation_zone]}
    elif step.mode == "flex_start":
        priority |= {"flexStart": {"enabled": True}}
        if step.max_run_s is not None:
            priority["maxRunDurationSeconds"] = step.max_run_s
    else:
        priority |= {"spot": step.mode == "spot", "reservations": {"affinity": "None"}}
    return priority


def class_selector(name: str) -> dict[str, str]:
    """The node selector of a pod that runs on the class's nodes."""
    return {COMPUTE_CLASS_LABEL: name}
