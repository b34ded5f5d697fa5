"""Where GCP sells each GPU: the regions and zones that offer a GKE accelerator.

A node of an A2 or A3 machine type can only start in a zone that stocks its GPU, and compact
placement and reservations pin a node pool to one zone, so the platform asks here before it
registers anything. Keyed by GKE accelerator string (the value of
`cloud.google.com/gke-accelerator`), because A3 High and A3 Mega carry the same H100 but need
not be stocked in the same zones.

Checked 2026-11 against the zones Compute Engine's API lists each machine type in, as recorded
in SkyPilot's GCP catalog, one row per machine type and zone, generated zone by zone with
`machineTypes.list` by sky/catalog/data_fetchers/fetch_gcp.py of
https://github.com/skypilot-org/skypilot:
https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs/v8/gcp/vms.csv,
cross-checked with the older catalogs/v7/gcp/vms.csv of the same repository. Every zone below is
listed there for every size of its series (a2-highgpu, a2-ultragpu, a3-highgpu-1g to -8g,
a3-megagpu-8g, a3-ultragpu-8g; a4-highgpu-8g as its version 8427bbff lists it, read 2026-12-03);
the check moved me-west1-b to me-west1-a for A2 Standard and added asia-southeast1-a (A2
Standard), us-east5-a (A2 Ultra), us-central1-b (A3 High, A3 Mega) and us-east4-c,
asia-southeast1-c (A3 Mega). Google's own table,
https://cloud.google.com/compute/docs/gpus/gpu-regions-zones, was not reachable to compare, and
a zone that lists a machine type may still be out of capacity.

A subset: the main regions of each GPU; the catalog lists more (A3 High and Mega also in
asia-east1, australia-southeast1, europe-north1, europe-west3; A3 Ultra also in asia-south2,
europe-west4, us-east4, us-east5, us-south1, us-west1), and GCP adds zones over time. A region
missing here is an error at `pulumi up`; add it here, with its zones, when you deploy there.
Zones are kept per GPU, not per machine size: within the regions below the catalog lists A3
High's 1/2/4-GPU sizes in the same zones as the 8-GPU size, though that need not hold elsewhere
(europe-west8-c lists the 1/2/4-GPU sizes only).
"""

from __future__ import annotations

from serving.catalog.machines import MACHINE_TYPES

GPU_ZONES: dict[str, dict[str, tuple[str, ...]]] = {
    # A2 Standard, A100 40GB.
    "nvidia-tesla-a100": {
        "us-central1": ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"),
        "us-east1": ("us-east1-b",),
        "us-west1": ("us-west1-b",),
        "us-west3": ("us-west3-b",),
        "us-west4": ("us-west4-b",),
        "europe-west4": ("europe-west4-a", "europe-west4-b"),
        "asia-northeast1": ("asia-northeast1-a", "asia-northeast1-c"),
        "asia-northeast3": ("asia-northeast3-a", "asia-northeast3-b"),
        "asia-southeast1": ("asia-southeast1-a", "asia-southeast1-b", "asia-southeast1-c"),
        "me-west1": ("me-west1-a", "me-west1-c"),
    },
    # A2 Ultra, A100 80GB.
    "nvidia-a100-80gb": {
        "us-central1": ("us-central1-a", "us-central1-c"),
        "us-east4": ("us-east4-c",),
        "us-east5": ("us-east5-a", "us-east5-b"),
        "europe-west4": ("europe-west4-a",),
        "asia-southeast1": ("asia-southeast1-c",),
    },
    # A3 High, H100 80GB.
    "nvidia-h100-80gb": {
        "us-central1": ("us-central1-a", "us-central1-b", "us-central1-c"),
        "us-east4": ("us-east4-a", "us-east4-b", "us-east4-c"),
        "us-east5": ("us-east5-a",),
        "us-west1": ("us-west1-a", "us-west1-b"),
        "us-west4": ("us-west4-a",),
        "europe-west1": ("europe-west1-b", "europe-west1-c"),
        "europe-west4": ("europe-west4-b", "europe-west4-c"),
        "asia-northeast1": ("asia-northeast1-b",),
        "asia-southeast1": ("asia-southeast1-b", "asia-southeast1-c"),
    },
    # A3 Mega, H100 80GB with GPUDirect-TCPXO.
    "nvidia-h100-mega-80gb": {
        "us-central1": ("us-central1-a", "us-central1-b", "us-central1-c"),
        "us-east4": ("us-east4-a", "us-east4-b", "us-east4-c"),
        "us-east5": ("us-east5-a",),
        "europe-west4": ("europe-west4-b", "europe-west4-c"),
        "asia-southeast1": ("asia-southeast1-b", "asia-southeast1-c"),
    },
    # A3 Ultra, H200 141GB.
    "nvidia-h200-141gb": {
        "us-central1": ("us-central1-b",),
        "europe-west1": ("europe-west1-b",),
        "asia-south1": ("asia-south1-b",),
    },
    # A4, B200: every zone catalogs/v8/gcp/vms.csv (at 8427bbff, read 2026-12-03) lists
    # a4-highgpu-8g in.
    "nvidia-b200": {
        "us-central1": ("us-central1-b",),
        "us-east1": ("us-east1-b",),
        "us-east4": ("us-east4-b",),
        "us-south1": ("us-south1-b",),
        "us-west2": ("us-west2-c",),
        "us-west3": ("us-west3-b", "us-west3-c"),
        "europe-north1": ("europe-north1-b",),
        "europe-west4": ("europe-west4-b",),
        "asia-northeast1": ("asia-northeast1-b",),
        "asia-southeast1": ("asia-southeast1-b",),
    },
}


def zones_offering(gke_accelerator: str, region: str) -> tuple[str, ...]:
    """Zones of `region` that stock this GPU; empty where the region has none."""
    return GPU_ZONES.get(gke_accelerator, {}).get(region, ())


def regions_offering(gke_accelerator: str) -> list[str]:
    """Regions with at least one zone stocking this GPU."""
    return sorted(GPU_ZONES.get(gke_accelerator, {}))


def region_of(zone: str) -> str:
    """'us-central1-a' -> 'us-central1': a GCP zone is its region plus a one-letter suffix."""
    return zone.rpartition("-")[0]


for _machine in MACHINE_TYPES.values():  # a GPU with nowhere to run is a catalog bug
    assert _machine.gke_accelerator in GPU_ZONES, _machine.name
