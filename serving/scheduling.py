"""The scheduling contract between the node pools and the pods that run models: the labels GPU
nodes carry, the taint that keeps other pods off them, and the selector a worker pod uses.
infra builds pools and pods from these; policies check both against the same names."""

from __future__ import annotations

from serving import catalog

# Node labels. Workloads select a GPU pool by machine type (one pool per type, so this label
# names the pool) and by GKE's own accelerator label, which GKE sets on every GPU node.
MACHINE_TYPE_LABEL = "servestack.io/machine-type"
POOL_LABEL = "servestack.io/pool"
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
SYSTEM_POOL = "system"
GPU_POOL = "gpu"

# Keeps every pod that does not ask for GPUs (and tolerate this) off the GPU nodes. Spelled as
# the GKE API wants it; Kubernetes shows the effect as NoSchedule.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_TAINT_EFFECT = "NO_SCHEDULE"
GPU_RESOURCE = "nvidia.com/gpu"


def gpu_node_selector(machine_type: str) -> dict[str, str]:
    """The node selector that lands a pod on the GPU pool of `machine_type`."""
    machine = catalog.machine_type(machine_type)
    return {MACHINE_TYPE_LABEL: machine.name, GKE_ACCELERATOR_LABEL: machine.gke_accelerator}
