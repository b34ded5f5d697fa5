"""Catalogs of facts: GPUs, GCP machine types, where GCP sells each GPU, model architectures.

`serving` is the single source of truth about hardware and models; everything else asks here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from serving.catalog.accelerators import ACCELERATORS, FP8_ACCELERATORS, Accelerator
from serving.catalog.machines import (
    GIB,
    MACHINE_TYPES,
    NODE_POOLS_ATTACH_GPU_NETWORK,
    PRICES_AS_OF,
    SPOT_PRICES_AS_OF,
    SPOT_PRICES_SOURCE,
    MachineType,
    machines_for,
)
from serving.catalog.models import (
    ARCHITECTURES,
    BYTES_PER_WEIGHT,
    BYTES_PER_WEIGHT_AS_LOADED,
    Architecture,
)
from serving.catalog.nodes import (
    CPU_MACHINE_TYPES,
    Capacity,
    CpuMachineType,
    kubelet_allocatable,
    pod_capacity,
)
from serving.catalog.zones import GPU_ZONES, region_of, regions_offering, zones_offering
from serving.errors import FixableValueError, unknown_key_fix

T = TypeVar("T")


def _lookup(table: Mapping[str, T], key: str, what: str, alternative: str = "") -> T:
    try:
        return table[key]
    except KeyError:
        fix = unknown_key_fix(key, table, f"{what}s") + alternative
        raise FixableValueError(f"unknown {what} '{key}'", fix) from None


def accelerator(key: str) -> Accelerator:
    return _lookup(ACCELERATORS, key, "accelerator")


def machine_type(name: str) -> MachineType:
    return _lookup(MACHINE_TYPES, name, "machine type")


def architecture(key: str) -> Architecture:
    return _lookup(
        ARCHITECTURES, key, "architecture", " (or give the architecture's fields inline)"
    )


__all__ = [
    "ACCELERATORS",
    "ARCHITECTURES",
    "BYTES_PER_WEIGHT",
    "BYTES_PER_WEIGHT_AS_LOADED",
    "CPU_MACHINE_TYPES",
    "FP8_ACCELERATORS",
    "GIB",
    "GPU_ZONES",
    "MACHINE_TYPES",
    "NODE_POOLS_ATTACH_GPU_NETWORK",
    "PRICES_AS_OF",
    "SPOT_PRICES_AS_OF",
    "SPOT_PRICES_SOURCE",
    "Accelerator",
    "Architecture",
    "Capacity",
    "CpuMachineType",
    "MachineType",
    "accelerator",
    "architecture",
    "kubelet_allocatable",
    "machine_type",
    "machines_for",
    "pod_capacity",
    "region_of",
    "regions_offering",
    "zones_offering",
]
