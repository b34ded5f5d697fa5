"""One object per model holds its Kubernetes objects: the size check, `servestack render` and the
Pulumi program all read the one `ModelObjects` built for it, so what is checked, rendered and
registered cannot drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from compiled_support import llama_8b, model_objects_of
from pulumi.runtime.rpc import deserialize_properties
from repo import REPO

import infra.kube.model_objects as model_objects_module
import infra.platform.plan as platform_plan
from infra.cli.app import render_command
from infra.cli.render import RAYSERVICE_FILE
from infra.deploy.preview import Registered, record
from infra.kube.disruption import GCS_ADDRESS_UNRESOLVED
from infra.kube.model_objects import ModelObjects, with_gcs_address
from infra.platform.config import load_stack
from serving.errors import ServestackError

STACK = "prod"

# Registered type of each plain-dict object a model registers, by its kind.
TYPES = {
    "RayService": "kubernetes:ray.io/v1:RayService",
    "Ingress": "kubernetes:networking.k8s.io/v1:Ingress",
    "ConfigMap": "kubernetes:core/v1:ConfigMap",
    "NetworkPolicy": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    "PodDisruptionBudget": "kubernetes:policy/v1:PodDisruptionBudget",
    "ServiceAccount": "kubernetes:core/v1:ServiceAccount",
}


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[tuple[ModelObjects, list[dict[str, Any]]]]:
    """Every ModelObjects built, with the manifests the size check was handed while building it."""
    seen: list[tuple[ModelObjects, list[dict[str, Any]]]] = []
    checked: list[list[dict[str, Any]]] = []
    real_build = platform_plan.build_model_objects
    real_check = model_objects_module.check_sizes

    def check(objects: list[dict[str, Any]], source: str) -> None:
        checked.append(objects)
        real_check(objects, source)

    def build(*args: Any) -> ModelObjects:
        objects = real_build(*args)
        seen.append((objects, checked.pop()))
        return objects

    monkeypatch.setattr(model_objects_module, "check_sizes", check)
    monkeypatch.setattr(platform_plan, "build_model_objects", build)
    return seen


def _registered_by_name(resources: list[Registered]) -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for resource in resources:
        inputs = deserialize_properties(resource.inputs)
        metadata = inputs.get("metadata")
        if resource.custom and isinstance(metadata, dict) and "name" in metadata:
            found[(resource.type, metadata["name"])] = inputs
    return found


def test_the_size_check_render_and_the_program_read_one_object_per_model(
    built: list[tuple[ModelObjects, list[dict[str, Any]]]], tmp_path: Path
) -> None:
    profiles = load_stack(STACK, REPO).profiles

    # The program: each model's objects built once, and registered as built.
    resources = record(STACK, REPO)
    assert [objects.model.spec.name for objects, _ in built] == [
        spec.name for spec in profiles.values()
    ]
    registered = _registered_by_name(resources)
    for objects, checked in built:
        # The size check judged these very dicts, not copies made for it.
        assert [id(m) for m in checked] == [id(m) for m in objects.manifests]
        for manifest in objects.manifests:
            inputs = registered[(TYPES[manifest["kind"]], manifest["metadata"]["name"])]
            if manifest["kind"] == "RayService":
                # The one value only the program knows: the GCS store's address, in place of
                # the placeholder the objects were built with.
                options = inputs["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"]
                assert options["redisAddress"] != GCS_ADDRESS_UNRESOLVED
                assert inputs == with_gcs_address(manifest, options["redisAddress"])
            else:
                # A typed resource is registered from the object's fields (apiVersion and kind
                # are the resource type's).
                fields = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
                assert {k: inputs[k] for k in fields} == fields, manifest["kind"]

    # render: the same objects again, built once per model, and written as they are.
    built.clear()
    render_command(STACK, out=tmp_path, model=None)
    assert len(built) == len(profiles)
    for objects, _ in built:
        text = (tmp_path / objects.model.spec.name / RAYSERVICE_FILE).read_text()
        assert yaml.safe_load(text) == objects.rayservice


def test_an_object_too_large_stops_the_model_naming_its_profile() -> None:
    """The size check is part of building: there is no ModelObjects the API would not store."""
    spec = llama_8b(env={"SERVESTACK_PAD": "x" * 300_000})
    with pytest.raises(ServestackError) as refused:
        model_objects_of(spec)
    assert refused.value.source == "test profile"
    assert refused.value.field.startswith("RayService ")


def test_the_token_is_read_only_where_the_stack_holds_one_and_weights_come_from_the_hub() -> None:
    assert model_objects_of(llama_8b(), hf_token=True).with_hf_token
    assert not model_objects_of(llama_8b(), hf_token=False).with_hf_token
    on_gcs = llama_8b(source="gs://acme-weights/llama/8b")
    assert not model_objects_of(on_gcs, hf_token=True).with_hf_token
