"""What a pod can take on a GKE Standard node: the CPU machine types the system pool may use, and
the one allocatable formula every pool is checked with (GPU workers, Ray heads, the edge, the
operator).

GKE keeps part of every node for the kubelet and the OS and evicts below a memory threshold
(https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes): CPU, 6% of the first
core, 1% of the next, 0.5% of the next two and 0.25% of every core above four; memory, 25% of the
first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112 and 2% above 128 GiB, plus
a 100 MiB eviction threshold. GKE's own DaemonSets (networking, logging, metrics, CSI drivers;
on GPU nodes also the device plugin and DCGM exporter) request a further share, which is kept
here as a margin per kind of node.

CPU machine shapes are from https://cloud.google.com/compute/docs/general-purpose-machines.
"""

from __future__ import annotations

from pydantic import Field

from serving.catalog.machines import GIB, MACHINE_TYPES
from serving.frozen import Frozen

MIB = 2**20
EVICTION_THRESHOLD_BYTES = 100 * MIB
# (cores in the tier, share reserved); the last tier is open-ended.
_CPU_TIERS = ((1.0, 0.06), (1.0, 0.01), (2.0, 0.005), (float("inf"), 0.0025))
_MEMORY_TIERS = (
    (4 * GIB, 0.25),
    (4 * GIB, 0.20),
    (8 * GIB, 0.10),
    (112 * GIB, 0.06),
    (float("inf"), 0.02),
)
# Margins for GKE's DaemonSets. A GPU node also runs the NVIDIA device plugin, the DCGM exporter
# and the GCS FUSE sidecar's node agent; a CPU node the networking (Dataplane V2), logging,
# metrics and CSI agents, whose requests sum to about a quarter core and half a GiB.
GPU_NODE_DAEMONSET_CPUS = 1.0
GPU_NODE_DAEMONSET_MEMORY_BYTES = 4 * GIB
CPU_NODE_DAEMONSET_CPUS = 0.3
CPU_NODE_DAEMONSET_MEMORY_BYTES = 512 * MIB


class CpuMachineType(Frozen):
    """A GCE general-purpose machine type, for the pool that runs what is not a model."""

    name: str
    vcpus: int
    memory_bytes: int


class Capacity(Frozen):
    """CPU and memory a pod may request."""

    cpus: float = Field(description="Cores.")
    memory_bytes: int


def _cpu_family(
    prefix: str, memory_gib_per_vcpu: int, sizes: tuple[int, ...]
) -> dict[str, CpuMachineType]:
    return {
        f"{prefix}-{vcpus}": CpuMachineType(
            name=f"{prefix}-{vcpus}", vcpus=vcpus, memory_bytes=vcpus * memory_gib_per_vcpu * GIB
        )
        for vcpus in sizes
    }


CPU_MACHINE_TYPES: dict[str, CpuMachineType] = {
    **_cpu_family("e2-standard", 4, (2, 4, 8, 16, 32)),
    **_cpu_family("e2-highmem", 8, (2, 4, 8, 16)),
    **_cpu_family("n2-standard", 4, (2, 4, 8, 16, 32, 48, 64)),
    **_cpu_family("n2-highmem", 8, (2, 4, 8, 16, 32)),
    **_cpu_family("n2d-standard", 4, (2, 4, 8, 16, 32)),
    **_cpu_family("c3-standard", 4, (4, 8, 22, 44)),
}


def _tiered(amount: float, tiers: tuple[tuple[float, float], ...]) -> float:
    reserved, left = 0.0, amount
    for size, share in tiers:
        reserved += min(left, size) * share
        left = max(0.0, left - size)
    return reserved


def kubelet_allocatable(vcpus: int, memory_bytes: int) -> Capacity:
    """The node's allocatable as GKE reports it: the machine less the kubelet's reservation and
    the eviction threshold (an e2-standard-4 holds 3.92 CPUs and about 13.3 GiB)."""
    cpus = vcpus - _tiered(float(vcpus), _CPU_TIERS)
    memory = memory_bytes - int(_tiered(float(memory_bytes), _MEMORY_TIERS))
    return Capacity(cpus=round(cpus, 4), memory_bytes=memory - EVICTION_THRESHOLD_BYTES)


def pod_capacity(machine_type: str) -> Capacity:
    """What one pod may request on a node of this type: the allocatable less GKE's DaemonSets
    (a GPU node's or a CPU node's). Raises KeyError for a type in neither catalog."""
    gpu_machine = MACHINE_TYPES.get(machine_type)
    if gpu_machine is not None:
        node = kubelet_allocatable(gpu_machine.vcpus, gpu_machine.memory_bytes)
        cpus, memory = GPU_NODE_DAEMONSET_CPUS, GPU_NODE_DAEMONSET_MEMORY_BYTES
    else:
        cpu_machine = CPU_MACHINE_TYPES[machine_type]
        node = kubelet_allocatable(cpu_machine.vcpus, cpu_machine.memory_bytes)
        cpus, memory = CPU_NODE_DAEMONSET_CPUS, CPU_NODE_DAEMONSET_MEMORY_BYTES
    return Capacity(cpus=round(node.cpus - cpus, 4), memory_bytes=node.memory_bytes - memory)
