"""Objects the Kubernetes API would not store are refused before anything is registered or
rendered, naming the profile and the object."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from infra.config import Stack, load_stack
from infra.platform import plan_platform
from infra.render import render_model
from serving.errors import ServestackError
from serving.limits import ANNOTATIONS_BYTES_MAX, size_problems

REPO = Path(__file__).resolve().parents[2]


def _oversized_dev_stack() -> tuple[Stack, str]:
    stack = load_stack("dev", REPO)
    (model, spec) = next(iter(stack.profiles.items()))
    # Built in Python, past the file size limit a profile on disk meets first.
    huge = spec.model_copy(update={"env": {"PADDING": "x" * (ANNOTATIONS_BYTES_MAX + 1)}})
    return replace(stack, profiles={model: huge}), model


def test_an_oversized_rayservice_stops_the_platform_plan_naming_the_profile() -> None:
    stack, model = _oversized_dev_stack()
    with pytest.raises(ServestackError) as caught:
        plan_platform(stack, judge_layouts=False)
    message = caught.value.render()
    assert f"stacks/models/{model}.yaml: RayService llama-3-1-8b: " in message
    assert "bytes of annotations; Kubernetes allows 262,144" in message


def test_an_oversized_model_renders_nothing(tmp_path: Path) -> None:
    stack, model = _oversized_dev_stack()
    with pytest.raises(ServestackError):
        render_model(stack.profiles[model], model, stack, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_configmap_over_a_mebibyte_is_refused() -> None:
    big = {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "x" * 2**20}}
    assert any("holds" in problem for problem in size_problems(big))


def test_an_object_over_the_etcd_request_limit_is_refused() -> None:
    big = {"kind": "RayService", "metadata": {"name": "x"}, "spec": {"s": "x" * (1536 * 1024)}}
    assert any("the Kubernetes API stores" in problem for problem in size_problems(big))
