"""Edits of a copied repository's stack files and profiles for the platform tests: a stack's
config changed, a profile changed, and prod's GPU pool as a single reservation-bound pool instead
of its capacity chain."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cli_support import edit_yaml

DEV = "stacks/Pulumi.dev.yaml"
PROD = "stacks/Pulumi.prod.yaml"


def stack_edit(path: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda root: edit_yaml(root / path, lambda document: change(document["config"]))


def profile_edit(name: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda root: edit_yaml(root / f"stacks/models/{name}.yaml", change)


def with_keys(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda config: config.update({f"servestack:{k}": v for k, v in values.items()})


def without_key(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda config: config.pop(key)


# Prod's pool as a single reservation-bound pool rather than its chain: the checks of a pool
# that takes only its reservations (named, sized with upgrade room, compact in one zone).
RESERVED_POOL = {
    "compact_placement": True,
    "reservation_affinity": "specific",
    "reservations": ["servestack-prod-a3-highgpu-8g"],
    "reserved_nodes": 6,
    "zones": ["us-central1-a"],
}


def reserved(then: Callable[[dict[str, Any]], None] | None = None) -> Callable[[Path], None]:
    def change(config: dict[str, Any]) -> None:
        config["servestack:gpu_pools"] = {"a3-highgpu-8g": dict(RESERVED_POOL)}
        if then is not None:
            then(config["servestack:gpu_pools"]["a3-highgpu-8g"])

    return stack_edit(PROD, change)


def moved_to_europe_north1(config: dict[str, Any]) -> None:
    config["gcp:region"] = "europe-north1"
    config.pop("servestack:cluster_zone")
