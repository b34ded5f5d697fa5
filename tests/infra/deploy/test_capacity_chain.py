"""A capacity chain, from the stack file to the registered resources: stacks/Pulumi.h200.yaml's
chain (a specific reservation, flex-start, Spot, on demand) becomes one GKE ComputeClass, valid
against its schema, one node pool per step labelled and tainted for the class, and workers that
select it. Expected values are worked out from the stack file and the catalog by hand."""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from crd_support import validate_rayservice
from repo import REPO

from infra.deploy.preview import Registered, record
from infra.platform.config import load_stack
from infra.platform.plan import plan_platform
from serving.errors import ServestackError

SCHEMA = REPO / "tests/fixtures/schemas/computeclass/computeclass.cloud.google.com_v1.json"
NEGATIVE = REPO / "tests/policies/negative/stacks"
CLASS = "servestack-a3-ultragpu-8g"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
NODE_POOL = "gcp:container/nodePool:NodePool"
H200 = {"type": "nvidia-h200-141gb", "count": 8, "driverVersion": "latest"}


@cache
def registered() -> tuple[Registered, ...]:
    return tuple(record("h200"))


def of_type(kind: str) -> list[Registered]:
    return [r for r in registered() if r.type == kind]


def validate_compute_class(manifest: dict[str, Any]) -> None:
    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(manifest)


def chain_pools() -> dict[str, dict[str, Any]]:
    return {
        r.name: r.inputs
        for r in of_type(NODE_POOL)
        if "cloud.google.com/compute-class" in (r.inputs["nodeConfig"].get("labels") or {})
    }


class TestTheComputeClass:
    """One ComputeClass per chain, its priorities in the chain's order."""

    def test_it_is_registered_once_and_valid(self) -> None:
        (resource,) = of_type(COMPUTE_CLASS)
        validate_compute_class(resource.inputs)
        assert resource.inputs["metadata"]["name"] == CLASS

    def test_its_priorities_follow_the_chain(self) -> None:
        (resource,) = of_type(COMPUTE_CLASS)
        spec = resource.inputs["spec"]
        base = {"machineType": "a3-ultragpu-8g", "gpu": H200}
        reserved = {"affinity": "Specific", "specific": [{"name": "h200-serving"}]}
        # The reservation's zone, as the stack declares it, is where its step's nodes come from.
        where = {"location": {"zones": ["us-central1-b"]}}
        assert spec["priorities"] == [
            base | {"spot": False, "reservations": reserved} | where,
            base | {"flexStart": {"enabled": True}, "maxRunDurationSeconds": 604800},
            base | {"spot": True, "reservations": {"affinity": "None"}},
            base | {"spot": False, "reservations": {"affinity": "None"}},
        ]  # fmt: skip
        assert spec["nodePoolAutoCreation"] == {"enabled": False}
        assert spec["activeMigration"] == {"optimizeRulePriority": True}
        assert spec["whenUnsatisfiable"] == "DoNotScaleUp"

    def test_the_planned_object_is_the_registered_one(self) -> None:
        platform = plan_platform(load_stack("h200", REPO))
        (built,) = platform.compute_classes
        validate_compute_class(built)
        (resource,) = of_type(COMPUTE_CLASS)
        assert resource.inputs["spec"] == built["spec"]

    @pytest.mark.parametrize(
        ("where", "key", "value", "refusal"),
        [
            # A misspelt field: GKE's CRD refuses what it does not name.
            (("priorities", 1, "flexStart"), "enable", True, "'enable' was unexpected"),
            # The node pool API's field, which a priority does not know.
            (("priorities", 0), "reservationAffinity", {"consumeReservationType": "SPECIFIC"},
             "'reservationAffinity' was unexpected"),
            # The stack file's spellings, which the renderer maps to GKE's.
            (("priorities", 0, "reservations"), "affinity", "specific",
             "'specific' is not one of ['Specific', 'AnyBestEffort', 'None']"),
            (("priorities", 0, "gpu"), "driverVersion", "LATEST",
             "'LATEST' is not one of ['default', 'latest']"),
            ((), "whenUnsatisfiable", "DoNotScale", "'DoNotScale' is not one of"),
        ],
    )  # fmt: skip
    def test_the_schema_refuses_what_the_crd_does(
        self, where: tuple[str | int, ...], key: str, value: Any, refusal: str
    ) -> None:
        (resource,) = of_type(COMPUTE_CLASS)
        broken = json.loads(json.dumps(resource.inputs))
        target = broken["spec"]
        for step in where:
            target = target[step]
        target[key] = value
        validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
        messages = [error.message for error in validator.iter_errors(broken)]
        assert any(refusal in message for message in messages), messages


class TestItsNodePools:
    """One pool per step, each joining the class by label and NoSchedule taint."""

    def test_one_pool_per_step(self) -> None:
        assert sorted(chain_pools()) == [
            "servestack-a3-ultragpu-8g-0-reservation-pool",
            "servestack-a3-ultragpu-8g-1-flex-start-pool",
            "servestack-a3-ultragpu-8g-2-spot-pool",
            "servestack-a3-ultragpu-8g-3-on-demand-pool",
        ]

    def test_each_joins_the_class(self) -> None:
        for inputs in chain_pools().values():
            node = inputs["nodeConfig"]
            assert node["labels"]["cloud.google.com/compute-class"] == CLASS
            assert {"key": "cloud.google.com/compute-class", "value": CLASS,
                    "effect": "NO_SCHEDULE"} in node["taints"]  # fmt: skip
            assert inputs["nodeLocations"] == ["us-central1-b"]
            # 8 to 16 replicas of one GPU: 1 to 2 nodes, plus 1 for an upgrade's new cluster;
            # every step starts empty, the class scales whichever has room.
            assert inputs["autoscaling"]["totalMinNodeCount"] == 0
            assert inputs["autoscaling"]["totalMaxNodeCount"] == 3

    def test_each_step_obtains_nodes_its_way(self) -> None:
        pools = chain_pools()
        reservation = pools["servestack-a3-ultragpu-8g-0-reservation-pool"]["nodeConfig"]
        assert reservation["reservationAffinity"] == {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": ["h200-serving"],
        }
        # What the reservation holds rides on the pool for the pack to check.
        assert reservation["resourceLabels"] == {
            "servestack-reservation-machine-type": "a3-ultragpu-8g",
            "servestack-reservation-zone": "us-central1-b",
        }
        flex = pools["servestack-a3-ultragpu-8g-1-flex-start-pool"]
        assert flex["nodeConfig"]["flexStart"] is True
        assert flex["nodeConfig"]["maxRunDuration"] == "604800s"
        assert flex["management"]["autoRepair"] is False
        assert pools["servestack-a3-ultragpu-8g-2-spot-pool"]["nodeConfig"]["spot"] is True
        on_demand = pools["servestack-a3-ultragpu-8g-3-on-demand-pool"]["nodeConfig"]
        assert not on_demand.get("spot") and not on_demand.get("flexStart")
        assert on_demand["reservationAffinity"]["consumeReservationType"] == "NO_RESERVATION"


class TestItsWorkers:
    def test_workers_select_the_class(self) -> None:
        (service,) = of_type("kubernetes:ray.io/v1:RayService")
        validate_rayservice(json.loads(json.dumps(service.inputs)))
        for group in service.inputs["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
            pod = group["template"]["spec"]
            assert pod["nodeSelector"] == {"cloud.google.com/compute-class": CLASS}
            assert {"key": "cloud.google.com/compute-class", "operator": "Equal",
                    "value": CLASS, "effect": "NoSchedule"} in pod["tolerations"]  # fmt: skip
            # The chain has a Spot step: the workers stop within Spot's 15 s notice.
            assert pod["terminationGracePeriodSeconds"] == 15


@pytest.fixture(scope="module")
def negative_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("negative-chains")
    shutil.copy(REPO / "Pulumi.yaml", root / "Pulumi.yaml")
    shutil.copytree(NEGATIVE, root / "stacks")
    return root


@pytest.mark.parametrize(
    ("stack", "field", "problem"),
    [
        (
            "compact-flex-start-on-a3-high",
            "servestack:gpu_pools.a3-highgpu-8g.capacity.0",
            "GKE offers compact placement with flex-start only on a3-ultragpu-*, a4-highgpu-*, "
            "h4d-*, not on a3-highgpu-8g",
        ),
        (
            "capacity-step-too-small",
            "servestack:gpu_pools.a3-highgpu-8g.capacity.1.machine_type",
            "the capacity step on a3-highgpu-4g: tensor=8 needs 8 GPUs on one node; "
            "a3-highgpu-4g has 4",
        ),
        (
            "flex-start-outlives-exclusion",
            "servestack:gpu_pools.a3-ultragpu-8g.capacity.0",
            "the maintenance exclusion 'launch-freeze' keeps nodes as they are for 14 days, but "
            "flex-start a3-ultragpu-8g nodes live at most 7 days",
        ),
        (
            "reservation-of-another-machine-type",
            "servestack:gpu_pools.a3-ultragpu-8g.capacity.0.reservation",
            "the reservation 'h100-training' holds a3-megagpu-8g VMs, but its step's pool is "
            "a3-ultragpu-8g",
        ),
        (
            "reservation-in-another-zone",
            "servestack:gpu_pools.a3-highgpu-8g.capacity.0.reservation",
            "the reservation 'h100-serving' lies in us-central1-c, but its step's pool is in "
            "us-central1-a",
        ),
    ],
)
def test_the_plan_refuses_a_chain_gke_will_not_provision(
    negative_root: Path, stack: str, field: str, problem: str
) -> None:
    """The same stacks the pack refuses (tests/policies/test_preview.py), in the same words."""
    with pytest.raises(ServestackError) as refused:
        plan_platform(load_stack(stack, negative_root))
    assert refused.value.field == field
    assert problem in refused.value.problem


@pytest.mark.parametrize(
    ("chain", "field", "words"),
    [
        ([{"spot": {}, "on_demand": {}}], "capacity.0", "exactly one of"),
        ([{"reservation": {"affinity": "specific"}}, {"on_demand": {}}], "name", "needs its name"),
        ([{"flex_start": {"max_run_duration_s": 700000}}], "max_run_duration_s", "604800"),
        ([{"on_demand": {}}, {"on_demand": {}}], "capacity.1", "repeats an earlier step"),
        (
            [
                {
                    "reservation": {
                        "name": "r",
                        "calendar": True,
                        "machine_type": "a3-ultragpu-8g",
                        "zone": "us-central1-b",
                    }
                }
            ],
            "capacity.0",
            "calendar-mode",
        ),
        ([{"reservation": {"name": "r"}}, {"on_demand": {}}], "machine_type", "what it holds"),
        (
            [{"reservation": {"name": "r", "machine_type": "a3-ultragpu-8g"}}, {"on_demand": {}}],
            "zone",
            "gcloud compute reservations describe r",
        ),
    ],
)
def test_a_bad_chain_is_refused_naming_its_key(
    tmp_path: Path, chain: list[dict[str, Any]], field: str, words: str
) -> None:
    import yaml

    shutil.copy(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(REPO / "stacks", tmp_path / "stacks")
    path = tmp_path / "stacks/Pulumi.h200.yaml"
    document = yaml.safe_load(path.read_text())
    document["config"]["servestack:gpu_pools"]["a3-ultragpu-8g"]["capacity"] = chain
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(ServestackError) as refused:
        load_stack("h200", tmp_path)
    assert refused.value.field.startswith("servestack:gpu_pools.a3-ultragpu-8g.capacity")
    assert field in refused.value.field
    assert words in refused.value.render()


def test_a_specific_reservation_step_without_its_name_is_never_rendered() -> None:
    from infra.kube.compute_class import ClassStep, compute_class

    step = ClassStep(machine_type="a3-ultragpu-8g", mode="reservation")
    with pytest.raises(ValueError, match="names none"):
        compute_class("c", [step])
    named = compute_class("c", [ClassStep("a3-ultragpu-8g", "reservation", reservation="r")])
    assert named["spec"]["priorities"][0]["reservations"] == {
        "affinity": "Specific",
        "specific": [{"name": "r"}],
    }
