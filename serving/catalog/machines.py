"""The GCP GPU machine-type catalog: what a node of each type carries and roughly what it costs.

One node is one NVLink domain: every GPU of an A2 or A3 machine shares one NVSwitch fabric, so
a tensor-parallel group fits a node exactly when its size is at most `gpus_per_node`.

Shapes are from https://cloud.google.com/compute/docs/gpus (A2 and A3 series tables) and
https://cloud.google.com/compute/docs/accelerator-optimized-machines; GKE accelerator strings
from https://cloud.google.com/kubernetes-engine/docs/how-to/gpus. Prices are per consumption
mode, in us-central1, VM plus attached GPUs (bundled Local SSD not included):

- on demand: approximate list prices as listed on https://cloud.google.com/compute/gpus-pricing
  in 2025-Q4 (`PRICES_AS_OF`); for a type GCP does not sell on demand, the on-demand rate its
  SKUs carry, which the planner ranks by;
- Spot: the `SpotPrice` column of SkyPilot's GCP catalog (`SPOT_PRICES_SOURCE`, read
  `SPOT_PRICES_AS_OF`), which its fetcher reads from the Cloud Billing SKUs: the GPUs' row plus
  the machine type's VM row, in the zone the price is taken in (a2/a3 High/Mega: us-central1-a,
  a3 Ultra and A4: us-central1-b). GCP changes Spot prices up to once a day;
- flex-start: no per-SKU flex-start price was found in a source read here (GCP states a
  discount of up to 53% off on-demand for flex-start VMs, not a price), so none is listed;
- a reservation: its VMs bill at the machine type's rate whether used or not, taken here as the
  on-demand list price (a commitment's rate is the team's contract, not a list price).

They move, differ by region and discount, and stack config may override them
(`servestack:prices`: `<machine type>` for the on-demand and reservation rate,
`<machine type>:<mode>` for one mode).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from serving.catalog.accelerators import ACCELERATORS
from serving.catalog.consumption import ConsumptionMode
from serving.frozen import Frozen

GIB = 1024**3
# "Each Local SSD disk is 375 GiB in size" (cloud.google.com/compute/docs/disks/local-ssd)
LOCAL_SSD_BYTES = 375 * 2**30
PRICES_AS_OF = "2025-Q4"
SPOT_PRICES_AS_OF = "2026-12-03"
SPOT_PRICES_SOURCE = (
    "https://github.com/skypilot-org/skypilot-catalog/blob/"
    "8427bbff988abdd050a9f51addd314ef31cb4e85/catalogs/v8/gcp/vms.csv"
)
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
        description=f"Approximate on-demand list price, {PRICES_AS_OF}: the rate the planner "
        "ranks machine types by (for a type not sold on demand, the on-demand rate of its SKUs)."
    )
    spot_price_per_hour_usd: float | None = Field(
        default=None,
        description=f"Spot price, {SPOT_PRICES_AS_OF}; None where none was found.",
    )
    flex_start_price_per_hour_usd: float | None = Field(
        default=None, description="Flex-start price; None where none was found (all, so far)."
    )
    on_demand: bool = Field(
        default=True,
        description="False where GCP does not sell the type on demand (Spot, flex-start or "
        "reservations only).",
    )

    def price_for(
        self, mode: ConsumptionMode = "on_demand", overrides: Mapping[str, float] | None = None
    ) -> float | None:
        """USD per node-hour of a node obtained this way; None where no price is known.
        `overrides` is `servestack:prices`: `<name>:<mode>` for one mode, `<name>` for the
        on-demand and reservation rate (a committed-use rate, say)."""
        overrides = overrides or {}
        if f"{self.name}:{mode}" in overrides:
            return overrides[f"{self.name}:{mode}"]
        if mode in ("on_demand", "reservation"):
            return self.list_price(overrides)
        if mode == "spot":
            return self.spot_price_per_hour_usd
        return self.flex_start_price_per_hour_usd

    def list_price(self, overrides: Mapping[str, float] | None = None) -> float:
        """The rate machine types are ranked by: the on-demand list price, or the stack's."""
        return (overrides or {}).get(self.name, self.price_per_hour_usd)

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
    spot_price: dict[int, float],
    on_demand_sizes: tuple[int, ...] = (1, 2, 4, 8),
    gpu_network: dict[int, GpuNetwork] | None = None,
) -> list[MachineType]:
    """The 1/2/4/8-GPU sizes of one series, which scale linearly per GPU (Spot prices, per size,
    as the catalog lists them)."""
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
            spot_price_per_hour_usd=spot_price[gpus],
            on_demand=gpus in on_demand_sizes,
            gpu_network=(gpu_network or {}).get(gpus, "host"),
        )
        for gpus in (1, 2, 4, 8)
    ]


MACHINE_TYPES: dict[str, MachineType] = {
    machine.name: machine
    for machine in (
        # A2 Standard: 12 vCPU and 85 GB per A100 40GB, no bundled local SSD,
        # 24/32/50/100 Gbps networking; about $3.67 per GPU-hour. Spot (us-central1-a): A100 40GB
        # $1.4341 per GPU plus the VM row, $0.36975 per 12 vCPU / 85 GB.
        *_family(
            "a2-highgpu",
            "a100-40gb",
            "nvidia-tesla-a100",
            vcpus_per_gpu=12,
            memory_gib_per_gpu=85,
            local_ssd_per_gpu=0,
            network_gbps={1: 24, 2: 32, 4: 50, 8: 100},
            price_per_gpu_hour=3.67,
            spot_price={1: 1.80, 2: 3.61, 4: 7.22, 8: 14.43},
        ),
        # A2 Ultra: 12 vCPU, 170 GB and one 375 GB local SSD per A100 80GB,
        # 24/32/50/100 Gbps; about $5.07 per GPU-hour. Spot (us-central1-a): A100 80GB $1.964
        # per GPU plus $0.54978 of VM per GPU.
        *_family(
            "a2-ultragpu",
            "a100-80gb",
            "nvidia-a100-80gb",
            vcpus_per_gpu=12,
            memory_gib_per_gpu=170,
            local_ssd_per_gpu=1,
            network_gbps={1: 24, 2: 32, 4: 50, 8: 100},
            price_per_gpu_hour=5.07,
            spot_price={1: 2.51, 2: 5.03, 4: 10.06, 8: 20.11},
        ),
        # A3 High: 26 vCPU, 234 GB and two local SSDs per H100 80GB; the 8-GPU size has
        # GPUDirect-TCPX on 4 x 200 Gbps GPU NICs (1,000 Gbps with the host NIC). About $11.06
        # per GPU-hour. The 1/2/4-GPU sizes are sold as Spot or Flex-start VMs only. Spot
        # (us-central1-a): H100 $2.8501 per GPU plus $0.34406 of VM per GPU.
        *_family(
            "a3-highgpu",
            "h100-80gb",
            "nvidia-h100-80gb",
            vcpus_per_gpu=26,
            memory_gib_per_gpu=234,
            local_ssd_per_gpu=2,
            network_gbps={1: 25, 2: 50, 4: 100, 8: 800},
            price_per_gpu_hour=11.06,
            spot_price={1: 3.19, 2: 6.39, 4: 12.78, 8: 25.55},
            on_demand_sizes=(8,),
            gpu_network={8: "gpudirect-tcpx"},
        ),
        # A3 Mega: 8 x H100 80GB, 208 vCPU, 1,872 GB, 16 local SSDs, GPUDirect-TCPXO at
        # 1,600 Gbps on the GPU NICs (8 x 200). About $11.68 per GPU-hour. Spot (us-central1-a):
        # $24.0768 for the 8 GPUs plus $2.75246 of VM.
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
            spot_price_per_hour_usd=26.83,
        ),
        # A3 Ultra: 8 x H200 141GB, 224 vCPU, 2,952 GB, 32 local SSDs, RDMA at 3,200 Gbps
        # (8 x 400). About $10.60 per GPU-hour. Spot (us-central1-b): $37.2472 for the 8 GPUs
        # plus $3.56978 of VM.
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
            spot_price_per_hour_usd=40.82,
        ),
        # A4: 8 x B200, one NVLink 5 domain of 8 GPUs; 224 vCPU and 3,968 GiB (SkyPilot's catalog,
        # from Compute Engine's machineTypes.list). GPU NICs: 8 with RDMA over RoCE, as on A3 Ultra
        # (a GKE RoCE runbook found by code search lists a3-ultragpu-8g and a4-highgpu-8g in one
        # tier: RDMA/RoCE, 8 GPU NICs, NCCL's NET/IB), taken at A3 Ultra's 8 x 400 Gbps: GCP's own
        # per-NIC rate for A4 was not in a source read here. Local
        # SSD: 32 x 375 GiB (12,000 GiB) as GCP's A4 table lists it; the stored copy of
        # https://cloud.google.com/compute/docs/accelerator-optimized-machines read 2026-12-03
        # stops before that table, so this one figure is not re-verified. GCP does not sell A4
        # on demand (its consumption-option table, as dstack's maintainers cite it in
        # https://github.com/dstackai/dstack/pull/3100, read 2026-12-03): Spot, flex-start or a
        # reservation. Its vCPUs and memory are billed inside the B200 SKU (skypilot#8125), so the
        # catalog's B200 row is the whole node: $90.216 at the on-demand rate and $32.6064 Spot
        # in us-central1-b (other regions list $64.44 at the on-demand rate).
        MachineType(
            name="a4-highgpu-8g",
            accelerator="b200-180gb",
            gke_accelerator="nvidia-b200",
            gpus_per_node=8,
            vcpus=224,
            memory_bytes=3968 * GIB,
            local_ssd_count=32,
            network_bandwidth_bytes_per_s=_gbps(3200),
            gpu_network="rdma",
            price_per_hour_usd=90.22,
            spot_price_per_hour_usd=32.61,
            on_demand=False,
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
