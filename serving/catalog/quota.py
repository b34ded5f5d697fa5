"""The Compute Engine quota each way of obtaining GPU nodes draws on, per region, so a user can
check it (`gcloud compute regions describe REGION --format="table(quotas.metric,quotas.limit,
quotas.usage)"`) before `pulumi up` waits on a node that quota forbids.

GPU quota metrics are named per GPU model: `NVIDIA_<MODEL>_GPUS` for on-demand VMs and what a
reservation holds (its VMs take regular quota when it is created), `PREEMPTIBLE_NVIDIA_<MODEL>_
GPUS` for Spot, and `COMMITTED_NVIDIA_<MODEL>_GPUS` for a commitment's GPUs; flex-start (and
queued provisioning, both Dynamic Workload Scheduler) draws on the preemptible quota; and every
GPU also counts against the global `GPUS_ALL_REGIONS`. GCP's quota pages
(https://cloud.google.com/compute/resource-usage#gpu_quota and the flex-start pages) could not
be read from here: the names are as published runbooks found by code search on 2026-12-03 spell
them for these machine types (NVIDIA_H100_GPUS / PREEMPTIBLE_NVIDIA_H100_GPUS,
NVIDIA_H100_MEGA_GPUS, NVIDIA_H200_GPUS, NVIDIA_B200_GPUS / PREEMPTIBLE_NVIDIA_B200_GPUS,
NVIDIA_A100_80GB_GPUS, NVIDIA_A100_GPUS; "Flex-start consumes the preemptible H200 pool";
"NVIDIA_H200_GPUS ... only for reservations"). Check the names on your project's Quotas page.
"""

from __future__ import annotations

from serving.catalog.consumption import ConsumptionMode
from serving.catalog.machines import MACHINE_TYPES

# The model part of each GPU's quota metric, by GKE accelerator string.
GPU_QUOTA_MODEL: dict[str, str] = {
    "nvidia-tesla-a100": "NVIDIA_A100",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB",
    "nvidia-h100-80gb": "NVIDIA_H100",
    "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA",
    "nvidia-h200-141gb": "NVIDIA_H200",
    "nvidia-b200": "NVIDIA_B200",
}
GLOBAL_GPU_QUOTA = "GPUS_ALL_REGIONS"
# The quota a mode draws on: "" for the regular one.
_PREFIX: dict[ConsumptionMode, str] = {
    "on_demand": "",
    "reservation": "",
    "spot": "PREEMPTIBLE_",
    "flex_start": "PREEMPTIBLE_",
}


def gpu_quota_metric(gke_accelerator: str, mode: ConsumptionMode, queued: bool = False) -> str:
    """The regional quota metric GPUs of `gke_accelerator` obtained as `mode` count against."""
    prefix = "PREEMPTIBLE_" if queued else _PREFIX[mode]
    return f"{prefix}{GPU_QUOTA_MODEL[gke_accelerator]}_GPUS"


def committed_gpu_quota_metric(gke_accelerator: str) -> str:
    """The quota a commitment's GPUs of `gke_accelerator` count against."""
    return f"COMMITTED_{GPU_QUOTA_MODEL[gke_accelerator]}_GPUS"


for _machine in MACHINE_TYPES.values():  # a GPU without a quota metric is a catalog bug
    assert _machine.gke_accelerator in GPU_QUOTA_MODEL, _machine.name
