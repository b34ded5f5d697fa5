"""`servestack pools` names the quota each GPU pool's way of obtaining nodes draws on, per chain
step, with the GPUs it may hold at its maximum, so a user can check it before `pulumi up`.
Expected names are worked out by hand from the stack files: on-demand and reservation GPUs take
the regular `NVIDIA_<GPU>_GPUS`, Spot and flex-start the `PREEMPTIBLE_` one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import copy_repo, edit_yaml, run

from serving import catalog
from serving.catalog.quota import GPU_QUOTA_MODEL, gpu_quota_metric


def pools_json(root: Path, stack: str) -> list[dict[str, Any]]:
    result = run(root, "pools", stack, "--json")
    assert result.returncode == 0, result.stderr
    pools: list[dict[str, Any]] = json.loads(result.stdout)["gpu_pools"]
    return pools


def test_each_step_of_the_h200_chain_names_its_quota(pristine: Path) -> None:
    quota = {pool["chain_step"]: pool["quota"] for pool in pools_json(pristine, "h200")}
    # 8 to 16 single-GPU replicas: 2 nodes at peak plus 1 for an upgrade, 8 GPUs each.
    assert quota == {
        0: [{"metric": "NVIDIA_H200_GPUS", "gpus": 24}, {"metric": "GPUS_ALL_REGIONS", "gpus": 24}],
        1: [{"metric": "PREEMPTIBLE_NVIDIA_H200_GPUS", "gpus": 24},
            {"metric": "GPUS_ALL_REGIONS", "gpus": 24}],
        2: [{"metric": "PREEMPTIBLE_NVIDIA_H200_GPUS", "gpus": 24},
            {"metric": "GPUS_ALL_REGIONS", "gpus": 24}],
        3: [{"metric": "NVIDIA_H200_GPUS", "gpus": 24}, {"metric": "GPUS_ALL_REGIONS", "gpus": 24}],
    }  # fmt: skip


def test_the_text_lists_the_quota_of_every_step(pristine: Path) -> None:
    result = run(pristine, "pools", "h200")
    out = " ".join(result.stdout.split())
    assert "GPU quota to check in us-central1 before `pulumi up`" in out
    assert (
        "a3-ultragpu-8g step 3, spot on a3-ultragpu-8g: PREEMPTIBLE_NVIDIA_H200_GPUS >= 24" in out
    )


def test_a_b200_chain_draws_on_b200_quota(tmp_path: Path) -> None:
    root = copy_repo(tmp_path / "repo")
    profile = root / "stacks/models/llama-3.3-70b-fp8-h200.yaml"
    edit_yaml(
        profile, lambda doc: doc.update(accelerator="b200-180gb", machine_type="a4-highgpu-8g")
    )

    def b200_chain(doc: dict[str, Any]) -> None:
        doc["config"]["servestack:gpu_pools"] = {
            "a4-highgpu-8g": {"capacity": [{"spot": {}}, {"flex_start": {}}]}
        }

    edit_yaml(root / "stacks/Pulumi.h200.yaml", b200_chain)
    metrics = [pool["quota"][0]["metric"] for pool in pools_json(root, "h200")]
    assert metrics == ["PREEMPTIBLE_NVIDIA_B200_GPUS", "PREEMPTIBLE_NVIDIA_B200_GPUS"]


@pytest.mark.parametrize("name", sorted(catalog.MACHINE_TYPES))
def test_every_gpu_has_a_regular_and_a_preemptible_quota(name: str) -> None:
    machine = catalog.MACHINE_TYPES[name]
    model = GPU_QUOTA_MODEL[machine.gke_accelerator]
    assert gpu_quota_metric(machine.gke_accelerator, "on_demand") == f"{model}_GPUS"
    assert gpu_quota_metric(machine.gke_accelerator, "spot") == f"PREEMPTIBLE_{model}_GPUS"
    assert gpu_quota_metric(machine.gke_accelerator, "on_demand", queued=True).startswith(
        "PREEMPTIBLE_"
    )
