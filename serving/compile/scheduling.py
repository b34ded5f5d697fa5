"""The scheduling contract between the node pools and the pods that run models: the labels GPU
nodes carry, the taint that keeps other pods off them, the selector a worker pod uses, and
whether a pod's requests fit the node it selects (the catalog's allocatable). infra builds
pools and pods from these; policies check both against the same names and the same rule."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from serving import catalog

# Node labels. Workloads select a GPU pool by machine type (one pool per type, so this label
# names the pool) and by GKE's own accelerator label, which GKE sets on every GPU node.
MACHINE_TYPE_LABEL = "servestack.io/machine-type"
POOL_LABEL = "servestack.io/pool"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# GKE's label of a ComputeClass's nodes; a node pool made by hand joins a class with this label
# and a NoSchedule taint of the same key and value, and a pod selects the class by it.
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"
COMPUTE_CLASS_TAINT_EFFECT = "NO_SCHEDULE"
SYSTEM_POOL = "system"
GPU_POOL = "gpu"

# Keeps every pod that does not ask for GPUs (and tolerate this) off the GPU nodes. Spelled as
# the GKE API wants it; Kubernetes shows the effect as NoSchedule.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_TAINT_EFFECT = "NO_SCHEDULE"
GPU_RESOURCE = "nvidia.com/gpu"
# A GCE label on a GPU pool bound to specific reservations: the VMs they hold.
RESERVED_NODES_LABEL = "servestack-reserved-nodes"
# What a chain step's specific reservation holds, as the stack declares it, riding on the pool
# for the policy pack (which never sees the reservation itself).
RESERVATION_MACHINE_LABEL = "servestack-reservation-machine-type"
RESERVATION_ZONE_LABEL = "servestack-reservation-zone"
# GPU pools upgrade by surging one node, never taking a serving node away first.
NODE_SURGE = 1
# GKE gives a preempted Spot VM 30 s of graceful node shutdown by default: the first 15 s for
# ordinary pods, the last 15 s for critical system pods (a Spot pool may ask for up to 120 s).
SPOT_POD_NOTICE_S = 15
SPOT_CRITICAL_PODS_S = 15


def gpu_node_selector(machine_type: str) -> dict[str, str]:
    """The node selector that lands a pod on the GPU pool of `machine_type`."""
    machine = catalog.machine_type(machine_type)
    return {MACHINE_TYPE_LABEL: machine.name, GKE_ACCELERATOR_LABEL: machine.gke_accelerator}


# --- does a pod fit its node ------------------------------------------------------------------

_SUFFIXES = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "m": 10**-3,
}  # fmt: skip


def quantity(value: object) -> float:
    """A Kubernetes resource quantity ("500m", "16Gi", "4", 2.5) as a number of units."""
    text = str(value).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _SUFFIXES[suffix]
    return float(text)


def requested(containers: Iterable[Mapping[str, Any]]) -> catalog.Capacity:
    """What a pod's containers request together (limits where a container sets no request, as
    Kubernetes defaults them)."""
    cpus, memory = 0.0, 0.0
    for container in containers:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        cpus += quantity(asked.get("cpu", 0))
        memory += quantity(asked.get("memory", 0))
    return catalog.Capacity(cpus=round(cpus, 4), memory_bytes=int(memory))


def head_pod_containers(cluster: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A RayCluster spec's head pod as KubeRay makes it: the head container and, with in-tree
    autoscaling, KubeRay's autoscaler sidecar (sized by `autoscalerOptions.resources`, else
    KubeRay's default of 500m CPU and 512Mi)."""
    head = ((cluster.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    containers = list(head.get("containers") or [])
    if cluster.get("enableInTreeAutoscaling"):
        default = {"requests": {"cpu": "500m", "memory": "512Mi"}}
        resources = (cluster.get("autoscalerOptions") or {}).get("resources") or default
        containers.append({"name": "autoscaler", "resources": resources})
    return containers


def misfit(pod: str, asked: catalog.Capacity, machine_type: str) -> str | None:
    """Why `pod` can never be scheduled on a node of `machine_type`, or None when it fits."""
    try:
        room = catalog.pod_capacity(machine_type)
    except KeyError:
        return f"{pod} lands on {machine_type}, a machine type the catalog does not know"
    over = []
    if asked.cpus > room.cpus:
        over.append(f"{asked.cpus:g} CPU (a node holds {room.cpus:g} for pods)")
    if asked.memory_bytes > room.memory_bytes:
        over.append(
            f"{asked.memory_bytes / 2**30:.1f} GiB (a node holds "
            f"{room.memory_bytes / 2**30:.1f} GiB for pods)"
        )
    if not over:
        return None
    return (
        f"{pod} requests {' and '.join(over)} on {machine_type}: it would stay Pending "
        "for ever (GKE's kubelet reservation and DaemonSets take the rest of the node)"
    )
