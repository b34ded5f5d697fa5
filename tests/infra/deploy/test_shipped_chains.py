"""The dev and prod stacks obtain their GPU nodes through capacity chains (dev: Spot, then
flex-start, since a3-highgpu-1g is not sold on demand; prod: its reservation, then flex-start,
then on demand). On the resources the real program registers: one ComputeClass per chain, valid
against its schema, with one priority per step in the stack file's order; one node pool per
step joining the class; every GPU worker group selecting the class and tolerating its taint; and
every other object still valid against KubeRay's and Kubernetes' schemas."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from crd_support import validate_rayservice
from infra_support import PLANNED_CHAINS, unwrap_secrets
from repo import REPO

from infra.deploy.preview import Registered, record
from infra.kube.compute_class import compute_class_name
from serving.compile.scheduling import COMPUTE_CLASS_LABEL

SCHEMA = REPO / "tests/fixtures/schemas/computeclass/computeclass.cloud.google.com_v1.json"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
NODE_POOL = "gcp:container/nodePool:NodePool"
RAYSERVICE = "kubernetes:ray.io/v1:RayService"
KUBERNETES_VERSION = "1.33.0"
STACKS = ["dev", "prod"]


@cache
def registered(stack: str) -> tuple[Registered, ...]:
    return tuple(record(stack))


def of_type(stack: str, kind: str) -> list[Registered]:
    return [r for r in registered(stack) if r.type == kind]


def plain(value: Any) -> Any:
    """The inputs as a manifest carries them: secrets unwrapped, numbers and tuples plain."""
    return json.loads(json.dumps(unwrap_secrets(value)))


def mode_of(priority: dict[str, Any]) -> str:
    if priority.get("flexStart", {}).get("enabled"):
        return "flex_start"
    if priority["reservations"]["affinity"] != "None":
        return "reservation"
    return "spot" if priority["spot"] else "on_demand"


@pytest.mark.parametrize("stack", STACKS)
def test_one_valid_compute_class_per_chain_its_priorities_in_the_stacks_order(stack: str) -> None:
    classes = {r.inputs["metadata"]["name"]: plain(r.inputs) for r in of_type(stack, COMPUTE_CLASS)}
    assert set(classes) == {compute_class_name(machine) for machine in PLANNED_CHAINS[stack]}
    schema = json.loads(SCHEMA.read_text())
    for machine, chain in PLANNED_CHAINS[stack].items():
        manifest = classes[compute_class_name(machine)]
        jsonschema.Draft7Validator(schema).validate(manifest)
        priorities = manifest["spec"]["priorities"]
        assert [mode_of(p) for p in priorities] == list(chain)
        assert {p["machineType"] for p in priorities} == {machine}


@pytest.mark.parametrize("stack", STACKS)
def test_one_node_pool_per_step_joins_its_class(stack: str) -> None:
    for machine, chain in PLANNED_CHAINS[stack].items():
        name = compute_class_name(machine)
        steps = [
            r.inputs
            for r in of_type(stack, NODE_POOL)
            if r.inputs["nodeConfig"].get("labels", {}).get(COMPUTE_CLASS_LABEL) == name
        ]
        assert len(steps) == len(chain)
        for inputs in steps:
            taint = {"key": COMPUTE_CLASS_LABEL, "value": name, "effect": "NO_SCHEDULE"}
            assert taint in inputs["nodeConfig"]["taints"]
            assert inputs["nodeConfig"]["machineType"] == machine


def test_prods_reservation_step_lies_in_its_reservations_zone() -> None:
    (manifest,) = of_type("prod", COMPUTE_CLASS)
    first = manifest.inputs["spec"]["priorities"][0]
    assert first["reservations"] == {
        "affinity": "Specific", "specific": [{"name": "servestack-prod-a3-highgpu-8g"}]
    }  # fmt: skip
    assert first["location"] == {"zones": ["us-central1-a"]}


@pytest.mark.parametrize("stack", STACKS)
def test_every_gpu_worker_selects_its_chains_class(stack: str) -> None:
    names = {compute_class_name(machine) for machine in PLANNED_CHAINS[stack]}
    services = of_type(stack, RAYSERVICE)
    assert services
    for service in services:
        manifest = validate_rayservice(plain(service.inputs))
        for group in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
            pod = group["template"]["spec"]
            (selected,) = pod["nodeSelector"].values()
            assert pod["nodeSelector"] == {COMPUTE_CLASS_LABEL: selected} and selected in names
            toleration = {"key": COMPUTE_CLASS_LABEL, "operator": "Equal", "value": selected,
                          "effect": "NoSchedule"}  # fmt: skip
            assert toleration in pod["tolerations"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_other_kubernetes_object_stays_valid(stack: str) -> None:
    core = [
        r
        for r in registered(stack)
        if r.type.startswith(("kubernetes:core/v1:", "kubernetes:networking", "kubernetes:policy"))
    ]
    assert core
    for resource in core:
        kubernetes_validate.validate(plain(resource.inputs), KUBERNETES_VERSION, strict=True)
