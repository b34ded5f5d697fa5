"""policies/views is the one reader of analyzer resources (issue 28): a resource's view is built
once however many policies judge it, its Serve config and profile are parsed once, the planner
judges each deployment once per run for every rule that asks, and a resource missing what a
policy needs is a violation naming the resource and the field (never a pass, never a
traceback). The verdicts themselves are held by the policy tests beside this file."""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from policy_edits import (
    CLUSTER,
    RAYSERVICE,
    Edit,
    engine_edit,
    matches_target,
    pop_at,
    resources,
    set_at,
    violations,
)

from infra.deploy.preview import judge
from policies import views
from policies.pack import POLICIES
from serving.compile.compiler import PROFILE_ANNOTATION
from serving.plan import planner, rules

# The modules, not the names `policies.views` exports (its `rayservice` is the function).
rayservice_module = importlib.import_module("policies.views.rayservice")
serve_config_module = importlib.import_module("policies.views.serve_config")


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Replace `owner.name` by a wrapper that counts its calls; the count is the list's length."""
    calls: list[int] = []
    original: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def _rayservices(stack: str) -> list[views.RayServiceView]:
    found = []
    for r in resources(stack):
        if r.type == RAYSERVICE:
            found.append(views.RayServiceView(r.name, r.inputs))
    return found


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[int]]]:
    """Counts of every costly read the views make, from an empty cache."""
    views.forget()
    yaml_spy = SimpleNamespace(safe_load=yaml.safe_load, YAMLError=yaml.YAMLError)
    json_spy = SimpleNamespace(loads=json.loads)
    monkeypatch.setattr(serve_config_module, "yaml", yaml_spy)
    monkeypatch.setattr(rayservice_module, "json", json_spy)
    yield {
        "view": _counting(monkeypatch, rayservice_module.RayServiceView, "__init__"),
        "serve config": _counting(monkeypatch, yaml_spy, "safe_load"),
        "profile": _counting(monkeypatch, json_spy, "loads"),
        "memory": _counting(monkeypatch, planner, "memory"),
        "rules": _counting(monkeypatch, rules, "verdicts"),
    }
    views.forget()


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_rayservice_is_read_once_however_many_policies_judge_it(
    stack: str, parses: dict[str, list[int]]
) -> None:
    services = sum(1 for r in resources(stack) if r.type == RAYSERVICE)
    judge(resources(stack), list(POLICIES))
    assert len(POLICIES) > 20, "the whole pack judged"
    assert services >= 1
    assert len(parses["view"]) == services
    assert len(parses["serve config"]) == services
    assert len(parses["profile"]) == services


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_planner_judges_each_deployment_once_per_run(
    stack: str, parses: dict[str, list[int]]
) -> None:
    """Seven rules ask the planner about every deployment; it answers each once."""
    deployments = sum(len(service.deployments) for service in _rayservices(stack))
    views.forget()
    judge(resources(stack), list(POLICIES))
    assert deployments >= 1
    assert len(parses["rules"]) == deployments
    assert len(parses["memory"]) == deployments
    # A second run with a fresh cache judges again, exactly as often.
    views.forget()
    judge(resources(stack), list(POLICIES))
    assert len(parses["rules"]) == 2 * deployments


def test_a_copy_of_the_inputs_per_policy_is_parsed_once(parses: dict[str, list[int]]) -> None:
    """Pulumi's analyzer deserializes a resource's inputs afresh for each policy: the parses
    are memoised by content, so a copy costs no second parse (only a cheap new view)."""
    (service,) = [r for r in resources("dev") if r.type == RAYSERVICE]
    for _ in range(5):
        props = copy.deepcopy(service.inputs)
        for view, deployment in views.deployments_of(RAYSERVICE, service.name, props):
            list(views.planner_verdicts(view, deployment, "tp-crosses-node"))
    assert len(parses["view"]) == 5
    assert len(parses["serve config"]) == 1
    assert len(parses["profile"]) == 1
    assert len(parses["rules"]) == len(views.RayServiceView(service.name, props).deployments)


def test_an_edited_resource_is_read_afresh(parses: dict[str, list[int]]) -> None:
    """The cache is keyed by the inputs themselves: an edited copy is judged as edited."""
    assert violations("topology-rayservice-tp-divides-heads", resources("prod")) == []
    broken = resources("prod", RAYSERVICE, engine_edit(tensor_parallel_size=3))
    assert violations("topology-rayservice-tp-divides-heads", broken)


# --- fail closed ----------------------------------------------------------------------------


def _first(stack: str, resource_type: str) -> tuple[str, dict[str, Any]]:
    (chosen, *_) = [r for r in resources(stack) if r.type == resource_type]
    return chosen.name, copy.deepcopy(chosen.inputs)


def _profile_text(text: str) -> Edit:
    return set_at(text, "metadata", "annotations", PROFILE_ANNOTATION)


def _head_containers(inputs: dict[str, Any]) -> None:
    inputs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"].pop("containers")


def _worker_gpus(value: str) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        for group in inputs["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
            group["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = (
                value
            )

    return apply


# (what is taken away or broken, the view read that needs it, the field the message names)
RAYSERVICE_CASES: dict[str, tuple[Edit, Callable[[views.RayServiceView], Any], str]] = {
    "no spec": (pop_at("spec"), lambda v: v.cluster, "spec is missing"),
    "no cluster": (
        pop_at("spec", "rayClusterConfig"),
        lambda v: v.head,
        "spec.rayClusterConfig is missing",
    ),
    "no head": (
        pop_at("spec", "rayClusterConfig", "headGroupSpec"),
        lambda v: v.head_env(),
        "spec.rayClusterConfig.headGroupSpec is missing",
    ),
    "no head containers": (
        _head_containers,
        lambda v: v.image(),
        "spec.rayClusterConfig.headGroupSpec.template.spec.containers is missing",
    ),
    "no serve config": (
        pop_at("spec", "serveConfigV2"),
        lambda v: v.deployments,
        "spec.serveConfigV2 is missing",
    ),
    "serve config not YAML": (
        set_at("applications: [unclosed", "spec", "serveConfigV2"),
        lambda v: v.deployments,
        "spec.serveConfigV2 is not YAML",
    ),
    "no LLM config": (
        set_at("applications: []", "spec", "serveConfigV2"),
        lambda v: v.deployments,
        "serveConfigV2 holds no LLM config",
    ),
    "tensor size not a number": (
        engine_edit(tensor_parallel_size="eight"),
        lambda v: v.deployments,
        "engine_kwargs.tensor_parallel_size is 'eight', not a number",
    ),
    "no profile": (
        pop_at("metadata", "annotations"),
        lambda v: v.profile(),
        f"metadata.annotations['{PROFILE_ANNOTATION}'] is missing",
    ),
    "profile not JSON": (
        _profile_text("{not json"),
        lambda v: v.profile(),
        f"metadata.annotations['{PROFILE_ANNOTATION}'] is not JSON",
    ),
    "GPU limit not a number": (
        _worker_gpus("lots"),
        lambda v: v.gpus_per_pod(),
        "nvidia.com/gpu is 'lots', not a number",
    ),
    "no GPUs": (
        _worker_gpus("0"),
        lambda v: v.gpus_per_pod(),
        "spec.rayClusterConfig.workerGroupSpecs ask for no GPUs",
    ),
}


@pytest.mark.parametrize("case", sorted(RAYSERVICE_CASES))
def test_a_rayservice_missing_a_field_names_it(case: str) -> None:
    edit, read, message = RAYSERVICE_CASES[case]
    name, inputs = _first("prod", RAYSERVICE)
    edit(inputs)
    with pytest.raises(views.UnreadableError) as raised:
        read(views.RayServiceView(name, inputs))
    assert raised.value.resource == name
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("policy", "case"),
    [
        ("topology-rayservice-tp-within-node", "GPU limit not a number"),
        ("topology-rayservice-fits", "profile not JSON"),
        ("serving-rayservice-fast-paths", "no head"),
        ("stack-rayservice-grace-fits-notice", "serve config not YAML"),
        ("stack-pod-fits-node", "no head containers"),
        ("platform-rayservice-token-auth", "no cluster"),
    ],
)
def test_the_pack_reports_an_unreadable_rayservice_by_name_and_field(
    policy: str, case: str
) -> None:
    """Resource and stack policies alike: a mandatory violation naming both, no traceback."""
    edit, _, message = RAYSERVICE_CASES[case]
    broken = resources("prod", RAYSERVICE, edit)
    found = violations(policy, broken)
    (name,) = [r.name for r in broken if r.type == RAYSERVICE and "llama" in r.name]
    unreadable = [v.message for v in found if v.message.startswith(f"{name} cannot be judged: ")]
    assert any(message in text for text in unreadable), [v.message for v in found]
    assert {v.enforcement for v in found} == {"mandatory"}


OTHER_CASES: dict[str, tuple[str, str, Edit, Callable[[str, dict[str, Any]], Any], str]] = {
    "node pool ceiling": (
        "prod", "gpu-pool", set_at("many", "autoscaling", "totalMaxNodeCount"),
        lambda name, props: views.NodePoolView(name, props).max_nodes,
        "autoscaling.totalMaxNodeCount is 'many', not a number",
    ),
    "node pool config": (
        "prod", "gpu-pool", set_at("a3-highgpu-8g", "nodeConfig", "labels"),
        lambda name, props: views.NodePoolView(name, props).machine,
        "nodeConfig.labels is not an object",
    ),
    "cluster networks": (
        "dev", CLUSTER, set_at("0.0.0.0/0", "masterAuthorizedNetworksConfig", "cidrBlocks"),
        lambda name, props: views.ClusterView(name, props).authorized_networks,
        "masterAuthorizedNetworksConfig.cidrBlocks is not a list",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(OTHER_CASES))
def test_other_views_name_the_field_they_cannot_read(case: str) -> None:
    stack, target, edit, read, message = OTHER_CASES[case]
    (edited, *_) = [r for r in resources(stack, target, edit) if matches_target(r, target)]
    with pytest.raises(views.UnreadableError) as raised:
        read(edited.name, edited.inputs)
    assert raised.value.resource == edited.name
    assert message in str(raised.value)


def test_a_budget_with_a_percentage_is_named_not_a_traceback() -> None:
    budget = views.BudgetView(
        "model-pdb", {"metadata": {"namespace": "serving"}, "spec": {"minAvailable": "50%"}}
    )
    with pytest.raises(views.UnreadableError, match=r"spec.minAvailable is '50%', not a number"):
        budget.holds(1)
