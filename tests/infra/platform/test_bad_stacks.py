"""A stack that cannot be built ends `servestack pools` with exit code 2 and one message naming
the file, the key and a fix, before anything is created; no traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import run
from stack_edits import (
    DEV,
    PROD,
    moved_to_europe_north1,
    profile_edit,
    reserved,
    stack_edit,
    with_keys,
    without_key,
)

# (id, stack, breakage, file, field, words the message must carry)
BAD_INPUT: list[tuple[str, str, Callable[[Path], None], str, str, list[str]]] = [
    (
        "unknown-machine-type",
        "dev",
        stack_edit(DEV, with_keys(gpu_pools={"a3-highgpu-9g": {"spot": True}})),
        DEV,
        "servestack:gpu_pools.a3-highgpu-9g",
        ["unknown machine type 'a3-highgpu-9g'", "a3-highgpu-8g"],
    ),
    (
        "gpu-not-in-region",
        "dev",
        stack_edit(DEV, moved_to_europe_north1),
        DEV,
        "gcp:region",
        ["europe-north1 has no zone stocking nvidia-h100-80gb", "us-central1"],
    ),
    (
        "system-min-above-max",
        "dev",
        stack_edit(DEV, with_keys(system_min_nodes=3, system_max_nodes=2)),
        DEV,
        "servestack:system_min_nodes",
        ["minimum (3 nodes) is above the maximum (2)", "raise the maximum to at least 3"],
    ),
    (
        "tensor-wider-than-any-node",
        "dev",
        profile_edit("llama-3.1-8b", lambda d: d.update(parallelism={"tensor": 16})),
        "stacks/models/llama-3.1-8b.yaml",
        "parallelism.tensor",
        ["tensor=16 needs 16 GPUs on one node; a3-highgpu-8g has 8", "tensor: 8"],
    ),
    (
        "spot-only-machine-on-demand",
        "dev",
        stack_edit(DEV, without_key("servestack:gpu_pools")),
        DEV,
        "servestack:gpu_pools.a3-highgpu-1g.spot",
        ["only as Spot, flex-start or queued provisioning", "set spot: true", "a3-highgpu-8g"],
    ),
    (
        "control-plane-open-to-all",
        "prod",
        stack_edit(PROD, with_keys(master_authorized_networks=["0.0.0.0/0"])),
        PROD,
        "servestack:master_authorized_networks",
        [
            "0.0.0.0/0 opens the control plane to a /0, wider than the /8",
            "allow_public_control_plane",
        ],
    ),
    (
        "options-for-a-machine-no-model-uses",
        "prod",
        stack_edit(PROD, lambda c: c["servestack:gpu_pools"].update({"a2-highgpu-1g": {}})),
        PROD,
        "servestack:gpu_pools.a2-highgpu-1g",
        ["no model of this stack is planned onto a2-highgpu-1g", "remove the entry"],
    ),
    (
        "queued-provisioning-with-a-minimum",
        "prod",
        stack_edit(PROD, with_keys(gpu_pools={"a3-highgpu-8g": {"queued_provisioning": True}})),
        PROD,
        "servestack:gpu_pools.a3-highgpu-8g.queued_provisioning",
        ["keep 2 node(s) up", "min_replicas: 0"],
    ),
    (
        "spot-with-flex-start",
        "dev",
        stack_edit(DEV, with_keys(gpu_pools={"a3-highgpu-1g": {"spot": True, "flex_start": True}})),
        DEV,
        "servestack:gpu_pools.a3-highgpu-1g.spot",
        ["flex-start a3-highgpu-1g pool cannot also be Spot"],
    ),
    (
        "zonal-cluster-in-a-zone-without-the-gpu",
        "dev",
        stack_edit(DEV, with_keys(cluster_zone="us-central1-f")),
        DEV,
        "servestack:gpu_pools.a3-highgpu-1g.zones",
        ["us-central1-f does not stock nvidia-h100-80gb", "us-central1-a"],
    ),
    (
        "cluster-zone-outside-the-region",
        "dev",
        stack_edit(DEV, with_keys(cluster_zone="europe-west4-a")),
        DEV,
        "servestack:cluster_zone",
        ["not a zone of gcp:region us-central1"],
    ),
    (
        "overlapping-ranges",
        "prod",
        stack_edit(PROD, with_keys(pods_cidr="10.0.0.0/14")),
        PROD,
        "servestack:subnet_cidr",
        ["10.0.0.0/20 overlaps pods_cidr (10.0.0.0/14)"],
    ),
    (
        "public-pod-range",
        "prod",
        stack_edit(PROD, with_keys(pods_cidr="8.8.0.0/16")),
        PROD,
        "servestack:pods_cidr",
        ["not a private range", "10.0.0.0/8"],
    ),
    (
        "no-region",
        "prod",
        stack_edit(PROD, without_key("gcp:region")),
        PROD,
        "gcp:region",
        ["is required to build the cluster", "pulumi config set gcp:region"],
    ),
    (
        "specific-reservation-without-a-name",
        "prod",
        reserved(lambda pool: pool.pop("reservations")),
        PROD,
        "servestack:gpu_pools.a3-highgpu-8g.reservations",
        ["reservation_affinity: specific"],
    ),
    (
        "reservation-without-upgrade-room",
        "prod",
        reserved(lambda pool: pool.update(reserved_nodes=4)),
        PROD,
        "servestack:gpu_pools.a3-highgpu-8g.reserved_nodes",
        ["needs 6 nodes", "1 for a RayService upgrade's new cluster", "reserved_nodes: 6"],
    ),
    (
        "head-larger-than-a-system-node",
        "dev",
        stack_edit(DEV, lambda c: c.update({"servestack:system_machine_type": "e2-standard-2"})),
        DEV,
        "servestack:system_machine_type",
        ["head requests 2.5 CPU", "on e2-standard-2", "e2-standard-4"],
    ),
    (
        "compact-pool-over-two-zones",
        "prod",
        reserved(lambda pool: pool.update(zones=["us-central1-a", "us-central1-c"])),
        PROD,
        "servestack:gpu_pools.a3-highgpu-8g.zones",
        ["must sit in one zone, not 2", "compact because compact_placement"],
    ),
    (
        "price-for-an-unknown-mode",
        "prod",
        stack_edit(PROD, with_keys(prices={"a3-highgpu-8g:cheapest": 10.0})),
        PROD,
        "servestack:prices.a3-highgpu-8g:cheapest",
        ["'cheapest' is not a way of obtaining nodes", "a3-highgpu-8g:<mode>", "flex_start"],
    ),
    (
        "gpu-machine-as-system-pool",
        "prod",
        stack_edit(PROD, with_keys(system_machine_type="a2-highgpu-1g")),
        PROD,
        "servestack:system_machine_type",
        ["a2-highgpu-1g is a GPU machine type", "e2-standard-4"],
    ),
]


@pytest.mark.parametrize(
    ("stack", "breakage", "file", "field", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_INPUT],
)
def test_a_stack_that_cannot_be_built_exits_2_naming_file_key_and_fix(
    repo: Path,
    stack: str,
    breakage: Callable[[Path], None],
    file: str,
    field: str,
    words: list[str],
) -> None:
    breakage(repo)
    result = run(repo, "pools", stack)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {file}: {field}: "), result.stderr
    assert "fix: " in result.stderr
    assert all(word in result.stderr for word in words), result.stderr
    assert "Traceback" not in result.stderr
