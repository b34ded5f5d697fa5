"""The GCP GPU machine-type catalog: what a node of each type carries and roughly what it costs.

One node is one NVLink domain: every GPU of an A2 or A3 machine shares one NVSwitch fabric, so
a tensor-parallel group fits a node exactly when its size is at most `gpus_per_node`.

Shapes are from https://cloud.google.com/compute/docs/gpus (A2 and A3 series tables) and
https://cloud.google.com/compute/docs/accelerator-optimized-machines; GKE accelerator strings
from https://cloud.google.com/kubernetes-engine/docs/how-to/gpus. Prices are approximate
on-demand list prices in us-central1, VM plus attached GPUs, as listed on
https://cloud.google.com/compute/gpus-pricing in 2025-Q4: they move, differ by region and
discount, and stack config may override them (`servestack:prices`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from serving.catalog.accelerators import ACCELERATORS
from serving.frozen import Frozen

GIB = 1024**3
# "Each Local SSD disk is 375 GiB in size" (cloud.google.com/compute/docs/disks/local-ssd)
LOCAL_SSD_BYTES = 375 * 2**30
PRICES_AS_OF = "2025-Q4"
# Expert parallelism across nodes sends every MoE layer's all-to-all between machines, which
# needs the GPU NICs: RDMA on A3 Ultra (DeepEP's kernels need it), GPUDirect-TCPXO on A3 Mega and
# GPUDirect-TCPX on A3 High's 8-GPU size (NCCL all-to-all through Google's NCCL plugin, vLLM's
# allgather-reducescatter backend). Other sizes reach other nodes through the host NIC only.
GpuNetwork = Literal["host", "gpudirect-tcpx", "gpudirect-tcpxo", "rdma"]
# GKE attaches the GPU NICs only to node pools that ask for them (additional node networks on
# the GPU VPCs, plus the NCCL plugin's DaemonSet for TCPX/TCPXO). servestack's node pools do not
# yet, so cross-node traffic of a deployed replica still rides the host NIC.
NODE_POOLS_ATTACH_GPU_NETWORK = False


class MachineType(Frozen):
    """One GCE accelerator-optimized machine type."""

    name: str = Field(description="GCE machine type, e.g. 'a3-highgpu-8g'.")
    accelerator: str = Field(description="Key into the accelerator catalog.")
    gke_accelerator: str = Field(
        description="GKE accelerator string, the value of cloud.google.com/gke-accelerator."
    )
    gpus_per_node: int = Field(description="GPUs attached; one node is one NVLink domain.")
    vcpus: int
    memory_bytes: int
    local_ssd_count: int = Field(description="Bundled 375 GiB local SSDs (0 when none bundled).")
    network_bandwidth_bytes_per_s: float = Field(
        description="GPU-to-GPU bandwidth between nodes: the GPU NICs (GPUDirect) where the "
        "machine has them, not the host NIC."
    )
    gpu_network: GpuNetwork = Field(
        default="host",
        description="The NICs GPUs reach other nodes through: GPUDirect or RDMA where the "
        "machine has GPU NICs, else the host network.",
    )
    price_per_hour_usd: float = Field(
        description=f"Approximate on-demand list price, {PRICES_AS_OF}."
    )
    on_demand: bool = Field(
        default=True, description="False where GCP sells the type only as Spot or Flex-start."
    )

    @property
    def local_ssd_bytes(self) -> int:
        return self.local_ssd_count * LOCAL_SSD_BYTES

    @property
    def expert_parallel_across_nodes(self) -> bool:
        """A DP+EP group may span nodes of this type: its GPUs have their own NICs."""
        return self.gpu_network != "host"


def _gbps(gigabits: float) -> float:
    return gigabits * 1e9 / 8


def _family(
    prefix: str,
    accelerator: str,
    gke_accelerator: str,
    *,
    vcpus_per_gpu: int,
    memory_gib_per_gpu: int,
    local_ssd_per_gpu: int,
    network_gbps: dict[int, float],
    price_per_gpu_hour: float,
    on_demand_sizes: tuple[int, ...] = (1, 2, 4, 8),
    gpu_network: dict[int, GpuNetwork] | None = None,
) -> list[MachineType]:
    """The 1/2/4/8-GPU sizes of one series, which scale linearly per GPU."""
    return [
        MachineType(
            name=f"{prefix}-{gpus}g",
            accelerator=accelerator,
            gke_accelerator=gke_accelerator,
            gpus_per_node=gpus,
            vcpus=vcpus_per_gpu * gpus,
            memory_bytes=memory_gib_per_gpu * gpus * GIB,
            local_ssd_count=local_ssd_per_gpu * gpus,
            network_bandwidth_bytes_per_s=_gbps(network_gbps[gpus]),
            price_per_hour_usd=round(price_per_gpu_hour * gpus, 2),
            on_demand=gpus in on_demand_sizes,
            gpu_network=(gpu_network or {}).get(gpus, "host"),
        )
        for gpus in (1, 2, 4, 8)
    ]


MACHINE_TYPES: dict[str, MachineType] = {
    machine.name: machine
    for machine in (
        # A2 Standard: 12 vCPU and 85 GB per A100 40GB, no bundled local SSD,
        # 24/32/50/100 Gbps networking; about $3.67 per GPU-hour.
        *_family(
            "a2-highgpu",
            "a100-40gb",
            "nvidia-tesla-a100",
            vcpus_per_gpu=12,
            memory_gib_per_gpu=85,
            local_ssd_per_gpu=0,
            network_gbps={1: 24, 2: 32, 4: 50, 8: 100},
            price_per_gpu_hour=3.67,
        ),
        # A2 Ultra: 12 vCPU, 170 GB and one 375 GB local SSD per A100 80GB,
        # 24/32/50/100 Gbps; about $5.07 per GPU-hour.
        *_family(
            "a2-ultragpu",
            "a100-80gb",
            "nvidia-a100-80gb",
            vcpus_per_gpu=12,
            memory_gib_per_gpu=170,
            local_ssd_per_gpu=1,
            network_gbps={1: 24, 2: 32, 4: 50, 8: 100},
            price_per_gpu_hour=5.07,
        ),
        # A3 High: 26 vCPU, 234 GB and two local SSDs per H100 80GB; the 8-GPU size has
        # GPUDirect-TCPX on 4 x 200 Gbps GPU NICs (1,000 Gbps with the host NIC). About $11.06
        # per GPU-hour. The 1/2/4-GPU sizes are sold as Spot or Flex-start VMs only.
        *_family(
            "a3-highgpu",
            "h100-80gb",
            "nvidia-h100-80gb",
            vcpus_per_gpu=26,
            memory_gib_per_gpu=234,
            local_ssd_per_gpu=2,
            network_gbps={1: 25, 2: 50, 4: 100, 8: 800},
            price_per_gpu_hour=11.06,
            on_demand_sizes=(8,),
            gpu_network={8: "gpudirect-tcpx"},
        ),
        # A3 Mega: 8 x H100 80GB, 208 vCPU, 1,872 GB, 16 local SSDs, GPUDirect-TCPXO at
        # 1,600 Gbps on the GPU NICs (8 x 200). About $11.68 per GPU-hour.
        MachineType(
            name="a3-megagpu-8g",
            accelerator="h100-80gb",
            gke_accelerator="nvidia-h100-mega-80gb",
            gpus_per_node=8,
            vcpus=208,
            memory_bytes=1872 * GIB,
            local_ssd_count=16,
            network_bandwidth_bytes_per_s=_gbps(1600),
            gpu_network="gpudirect-tcpxo",
            price_per_hour_usd=93.4,
        ),
        # A3 Ultra: 8 x H200 141GB, 224 vCPU, 2,952 GB, 32 local SSDs, RDMA at 3,200 Gbps
        # (8 x 400). About $10.60 per GPU-hour.
        MachineType(
            name="a3-ultragpu-8g",
            accelerator="h200-141gb",
            gke_accelerator="nvidia-h200-141gb",
            gpus_per_node=8,
            vcpus=224,
            memory_bytes=2952 * GIB,
            local_ssd_count=32,
            network_bandwidth_bytes_per_s=_gbps(3200),
            gpu_network="rdma",
            price_per_hour_usd=84.8,
        ),
    )
}

for _machine in MACHINE_TYPES.values():  # a catalog that names an unknown GPU is a bug
    assert _machine.accelerator in ACCELERATORS, _machine.name


def machines_for(accelerator_key: str) -> list[MachineType]:
    """Machine types carrying this accelerator, smallest node first."""
    return sorted(
        (m for m in MACHINE_TYPES.values() if m.accelerator == accelerator_key),
        key=lambda m: (m.gpus_per_node, m.price_per_hour_usd),
    )
