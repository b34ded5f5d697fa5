"""Catalogs of facts: GPUs, GCP machine types and model architectures.

`serving` is the single source of truth about hardware and models; everything else asks here.
"""

from __future__ import annotations

from serving.catalog.accelerators import ACCELERATORS, Accelerator
from serving.catalog.machines import MACHINE_TYPES, PRICES_AS_OF, MachineType, machines_for
from serving.catalog.models import ARCHITECTURES, BYTES_PER_WEIGHT, Architecture
from serving.errors import FixableValueError, unknown_key_fix


def accelerator(key: str) -> Accelerator:
    try:
        return ACCELERATORS[key]
    except KeyError:
        raise FixableValueError(
            f"unknown accelerator '{key}'", unknown_key_fix(key, ACCELERATORS, "accelerators")
        ) from None


def machine_type(name: str) -> MachineType:
    try:
        return MACHINE_TYPES[name]
    except KeyError:
        raise FixableValueError(
            f"unknown machine type '{name}'", unknown_key_fix(name, MACHINE_TYPES, "machine types")
        ) from None


def architecture(key: str) -> Architecture:
    try:
        return ARCHITECTURES[key]
    except KeyError:
        raise FixableValueError(
            f"unknown architecture '{key}'",
            unknown_key_fix(key, ARCHITECTURES, "architectures")
            + " (or give the architecture's fields inline)",
        ) from None


__all__ = [
    "ACCELERATORS",
    "ARCHITECTURES",
    "BYTES_PER_WEIGHT",
    "MACHINE_TYPES",
    "PRICES_AS_OF",
    "Accelerator",
    "Architecture",
    "MachineType",
    "accelerator",
    "architecture",
    "machine_type",
    "machines_for",
]
