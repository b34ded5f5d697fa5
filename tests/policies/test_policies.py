"""Every policy of the pack on the resources the real program registers (under the mock engine,
as `servestack preview` records them): a passing case (the shipped stack as it is), a failing
case (one property broken), a missing property, and a config override (enforcement level or
threshold). Test ids name the policy."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import pytest
import yaml

from infra.preview import Registered, Violation, judge, record
from policies.pack import POLICIES
from serving.compiler import PROFILE_ANNOTATION

RAYSERVICE = "kubernetes:ray.io/v1:RayService"
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
RELEASE = "kubernetes:helm.sh/v3:Release"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
MODEL_NETWORK_POLICY = "model-network-policy"
EDGE_RELEASE = "edge-release"

Edit = Callable[[dict[str, Any]], None]


@cache
def registered(stack: str) -> tuple[Registered, ...]:
    return tuple(record(stack))


def resources(stack: str, target: str | None = None, edit: Edit | None = None) -> list[Registered]:
    """The stack's resources, with `edit` applied to the inputs of the first `target`."""
    found = []
    edited = False
    for resource in registered(stack):
        if edit is not None and not edited and _matches(resource, target):
            inputs = copy.deepcopy(resource.inputs)
            edit(inputs)
            resource = replace(resource, inputs=inputs)
            edited = True
        found.append(resource)
    assert edit is None or edited, f"{stack} has no {target}"
    return found


def _matches(resource: Registered, target: str | None) -> bool:
    if target == RAYSERVICE:
        # The dense FP8 70B in prod, the 8B in dev: one RayService, chosen by name, since the
        # engine registers resources in no fixed order.
        return resource.type == RAYSERVICE and ("llama" in resource.name)
    if target == EDGE_RELEASE:
        return resource.type == RELEASE and resource.inputs.get("chart") == "kubernetes-ingress"
    if target == MODEL_NETWORK_POLICY:
        return resource.type == NETWORK_POLICY and resource.name.endswith("-network-policy")
    if target == "gpu-pool":
        return resource.type == NODE_POOL and "guestAccelerators" in resource.inputs["nodeConfig"]
    return resource.type == target


def violations(
    policy: str, stack_resources: list[Registered], override: Any = None
) -> list[Violation]:
    (chosen,) = [p for p in POLICIES if p.name == policy]
    return judge(stack_resources, [chosen], {policy: override} if override is not None else None)


# --- editing helpers ----------------------------------------------------------------------------


def _serve(edit: Callable[[dict[str, Any]], None]) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        document = yaml.safe_load(inputs["spec"]["serveConfigV2"])
        args = document["applications"][0]["args"]
        config = (args.get("llm_configs") or [args.get("llm_config")])[0]
        edit(config)
        inputs["spec"]["serveConfigV2"] = yaml.safe_dump(document)

    return apply


def _engine(**changes: Any) -> Edit:
    return _serve(lambda config: config["engine_kwargs"].update(changes))


def _cluster(inputs: dict[str, Any]) -> dict[str, Any]:
    cluster: dict[str, Any] = inputs["spec"]["rayClusterConfig"]
    return cluster


def _workers(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    return list(_cluster(inputs)["workerGroupSpecs"])


def _container(group: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = group["template"]["spec"]["containers"][0]
    return container


def _pod_gpus(count: int) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        for group in _workers(inputs):
            _container(group)["resources"]["limits"]["nvidia.com/gpu"] = str(count)

    return apply


def _profile(**changes: Any) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        annotations = inputs["metadata"]["annotations"]
        profile = json.loads(annotations[PROFILE_ANNOTATION])
        for key, value in changes.items():
            if isinstance(value, dict):
                profile[key] = {**profile.get(key, {}), **value}
            else:
                profile[key] = value
        annotations[PROFILE_ANNOTATION] = json.dumps(profile)

    return apply


def _both(*edits: Edit) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        for edit in edits:
            edit(inputs)

    return apply


def _drop_env(name: str, where: str) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        groups = [_cluster(inputs)["headGroupSpec"]] if where == "head" else _workers(inputs)
        for group in groups:
            container = _container(group)
            container["env"] = [e for e in container["env"] if e["name"] != name]

    return apply


def _pop(*path: str) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        node = inputs
        for key in path[:-1]:
            node = node[key]
        node.pop(path[-1])

    return apply


def _set(value: Any, *path: str) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        node = inputs
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return apply


def _head_image(image: str) -> Edit:
    return lambda inputs: _container(_cluster(inputs)["headGroupSpec"]).update(image=image)


def _drop_head_image(inputs: dict[str, Any]) -> None:
    _container(_cluster(inputs)["headGroupSpec"]).pop("image")


def _plaintext_token(inputs: dict[str, Any]) -> None:
    _container(_cluster(inputs)["headGroupSpec"])["env"].append(
        {"name": "HF_TOKEN", "value": "hf_plaintext"}
    )


# Built at run time so that no credential-shaped string sits in the repository.
FAKE_OPENAI_KEY = "sk-" + "live-" + "a1B2c3D4" * 3


def _env_var_in_serve_config(inputs: dict[str, Any]) -> None:
    _serve(
        lambda config: (
            config.setdefault("runtime_env", {})
            .setdefault("env_vars", {})
            .update(MY_SETTING=FAKE_OPENAI_KEY)
        )
    )(inputs)


def _container_context(**changes: Any) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        _container(_workers(inputs)[0])["securityContext"].update(changes)

    return apply


def _head_cpu(cpu: str) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        _container(_cluster(inputs)["headGroupSpec"])["resources"]["requests"]["cpu"] = cpu

    return apply


def _worker_pod(**changes: Any) -> Edit:
    return lambda inputs: _workers(inputs)[0]["template"]["spec"].update(changes)


def _worker_pods(**changes: Any) -> Edit:
    return lambda inputs: [group["template"]["spec"].update(changes) for group in _workers(inputs)]


def _worker_template(**changes: Any) -> Edit:
    return lambda inputs: [group["template"].update(changes) for group in _workers(inputs)]


def _drop_worker_grace(inputs: dict[str, Any]) -> None:
    for group in _workers(inputs):
        group["template"]["spec"].pop("terminationGracePeriodSeconds")


def _strategy(strategy: str) -> Edit:
    return _serve(lambda config: config["placement_group_config"].update(strategy=strategy))


@dataclass(frozen=True)
class Case:
    """How to break one policy, how to take away what it reads, and an override to try."""

    stack: str
    target: str | None
    breaks: Edit
    missing: Edit
    override: Any
    override_breaks: Edit | None = None  # the override, applied to the passing resources
    # When the override is a threshold: the passing resources then violate.
    threshold: bool = False
    # Where the property's absence leaves nothing to judge (no container: no secret to leak).
    missing_passes: bool = False


CASES: dict[str, Case] = {
    "topology-rayservice-tp-within-node": Case(
        "prod", RAYSERVICE, _pod_gpus(1), _pop("spec", "rayClusterConfig"), "advisory"
    ),
    "topology-rayservice-tp-divides-heads": Case(
        "prod", RAYSERVICE, _engine(tensor_parallel_size=3), _pop("metadata", "annotations"),
        "advisory",
    ),
    "topology-rayservice-strict-pack": Case(
        "prod", RAYSERVICE, _strategy("PACK"), _pop("spec", "serveConfigV2"), "disabled"
    ),
    "topology-rayservice-fits": Case(
        "prod", RAYSERVICE, _engine(gpu_memory_utilization=0.2),
        _pop("metadata", "annotations"), {"min_sequences": 10_000}, threshold=True,
    ),
    "topology-rayservice-needless-span": Case(
        "dev", RAYSERVICE, _engine(tensor_parallel_size=2), _pop("spec", "rayClusterConfig"),
        "advisory",
    ),
    "topology-rayservice-over-sharded": Case(
        "prod", RAYSERVICE, _engine(tensor_parallel_size=8), _pop("metadata", "annotations"),
        "mandatory",
    ),
    "topology-rayservice-expert-parallel": Case(
        "prod", RAYSERVICE, _profile(parallelism={"expert": True}),
        _pop("metadata", "annotations"), "advisory",
    ),
    "topology-nodepool-compact-for-multinode": Case(
        "dev", RAYSERVICE, _engine(tensor_parallel_size=2),
        _both(_engine(tensor_parallel_size=2), _pop("spec", "rayClusterConfig")), "advisory",
    ),
    "serving-rayservice-image-floor": Case(
        "prod", RAYSERVICE, _head_image("rayproject/ray-llm:2.56.0-py311-cu128"),
        _drop_head_image, {"min_version": "2.57.0"}, threshold=True,
    ),
    "serving-rayservice-fast-paths": Case(
        "prod", RAYSERVICE, _drop_env("RAY_SERVE_ENABLE_HA_PROXY", "workers"),
        _pop("spec", "rayClusterConfig"), {"variables": ["RAY_SERVE_NOT_A_FAST_PATH"]},
        threshold=True,
    ),
    "serving-rayservice-forward-body": Case(
        "prod", RAYSERVICE, _drop_env("RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY", "head"),
        _pop("spec", "serveConfigV2"), "advisory",
    ),
    "serving-rayservice-prefix-caching": Case(
        "prod", RAYSERVICE, _engine(enable_prefix_caching=False), _pop("spec", "serveConfigV2"),
        "disabled",
    ),
    "serving-rayservice-fp8-compute": Case(
        "prod", RAYSERVICE,
        _both(_serve(lambda c: c.update(accelerator_type="A100-80G")),
              _profile(kv_cache_dtype="auto", machine_type="a2-ultragpu-8g")),
        _pop("metadata", "annotations"), "mandatory",
    ),
    "platform-cluster-private-nodes": Case(
        "dev", CLUSTER, _set(False, "privateClusterConfig", "enablePrivateNodes"),
        _pop("privateClusterConfig"), "advisory",
    ),
    "platform-cluster-workload-identity": Case(
        "dev", CLUSTER, _set({}, "workloadIdentityConfig"), _pop("workloadIdentityConfig"),
        "advisory",
    ),
    "platform-cluster-shielded-nodes": Case(
        "dev", CLUSTER, _set(False, "enableShieldedNodes"), _pop("enableShieldedNodes"),
        "disabled",
    ),
    "platform-cluster-authorized-networks": Case(
        "dev", CLUSTER,
        _set([{"cidrBlock": "0.0.0.0/0"}], "masterAuthorizedNetworksConfig", "cidrBlocks"),
        _pop("masterAuthorizedNetworksConfig"), {"min_prefix_length": 0},
        override_breaks=_set(
            [{"cidrBlock": "0.0.0.0/0"}], "masterAuthorizedNetworksConfig", "cidrBlocks"
        ),
    ),
    "platform-cluster-secrets-encryption": Case(
        "dev", CLUSTER, _set({"state": "DECRYPTED"}, "databaseEncryption"),
        _pop("databaseEncryption"), "advisory",
    ),
    "platform-cluster-binary-authorization": Case(
        "prod", CLUSTER, _set({"evaluationMode": "DISABLED"}, "binaryAuthorization"),
        _pop("binaryAuthorization"), "disabled",
    ),
    "platform-nodepool-gpu-taint": Case(
        "dev", "gpu-pool", _set([], "nodeConfig", "taints"), _pop("nodeConfig", "taints"),
        "advisory",
    ),
    "platform-pod-no-plaintext-secret": Case(
        "prod", RAYSERVICE, _plaintext_token, _pop("spec", "rayClusterConfig"), "advisory",
        missing_passes=True,
    ),
    "platform-ingress-tls-and-auth": Case(
        "prod", INGRESS, _pop("metadata", "annotations", "haproxy.org/backend-config-snippet"),
        _pop("metadata", "annotations"), "advisory",
    ),
    "platform-object-size-limits": Case(
        "prod", RAYSERVICE, _profile(env={"PADDING": "x" * 300_000}), _pop("metadata"),
        "advisory", missing_passes=True,
    ),
    "serving-rayservice-no-credential-value": Case(
        "prod", RAYSERVICE, _env_var_in_serve_config, _pop("spec", "serveConfigV2"), "advisory",
    ),
    "platform-edge-api-key-gate": Case(
        "dev", EDGE_RELEASE,
        _set(["--configmap-patterns=edge/edge-api-keys"], "values", "controller", "extraArgs"),
        _pop("values", "controller", "extraArgs"), "advisory",
    ),
    "platform-edge-stats-private": Case(
        "dev", EDGE_RELEASE, _set(True, "values", "controller", "service", "enablePorts", "stat"),
        _pop("values", "controller", "service", "enablePorts"), "disabled",
    ),
    "platform-edge-source-ranges": Case(
        "dev", EDGE_RELEASE, _pop("values", "controller", "service", "annotations"),
        _pop("values", "controller", "service"), "advisory",
    ),
    "platform-rayservice-token-auth": Case(
        "prod", RAYSERVICE, _set({"mode": "disabled"}, "spec", "rayClusterConfig", "authOptions"),
        _pop("spec", "rayClusterConfig"), "advisory",
    ),
    "platform-rayservice-pod-security": Case(
        "prod", RAYSERVICE, _container_context(allowPrivilegeEscalation=True),
        _pop("spec", "rayClusterConfig"), "disabled",
    ),
    "platform-rayservice-worker-identity": Case(
        "prod", RAYSERVICE, _worker_pod(automountServiceAccountToken=True),
        _pop("spec", "rayClusterConfig"), "advisory",
    ),
    "stack-rayservice-network-policies": Case(
        "dev", MODEL_NETWORK_POLICY,
        _set({"matchLabels": {"nothing": "selected"}}, "spec", "podSelector"),
        _pop("spec", "podSelector"), "advisory",
    ),
    "stack-rayservice-pool-exists": Case(
        "prod", "gpu-pool", _set(1, "autoscaling", "totalMaxNodeCount"),
        _pop("nodeConfig", "labels"), "advisory",
    ),
    "stack-pod-fits-node": Case(
        "dev", RAYSERVICE, _head_cpu("8"),
        _pop("spec", "rayClusterConfig", "headGroupSpec", "template", "spec", "nodeSelector"),
        "advisory",
    ),
    "stack-rayservice-gcs-fault-tolerance": Case(
        "dev", RAYSERVICE, _pop("spec", "rayClusterConfig", "gcsFaultToleranceOptions"),
        _pop("spec", "rayClusterConfig", "gcsFaultToleranceOptions", "redisPassword"),
        "advisory",
    ),
    "stack-rayservice-disruption-budgets": Case(
        "prod", RAYSERVICE, _worker_template(metadata={"labels": {"app": "another"}}),
        _worker_template(metadata={}), "advisory",
    ),
    "stack-rayservice-grace-fits-notice": Case(
        "dev", RAYSERVICE, _worker_pods(terminationGracePeriodSeconds=120), _drop_worker_grace,
        "advisory",
    ),
    "stack-rayservice-cluster-deletion-delay": Case(
        "prod", RAYSERVICE, _set(60, "spec", "rayClusterDeletionDelaySeconds"),
        _pop("spec", "rayClusterDeletionDelaySeconds"), {"min_seconds": 100_000},
        threshold=True,
    ),
    "stack-nodepool-upgrade-room": Case(
        "prod", "gpu-pool", _set(4, "autoscaling", "totalMaxNodeCount"),
        _pop("nodeConfig", "labels"), "advisory",
    ),
}  # fmt: skip


def test_every_policy_of_the_pack_has_its_cases() -> None:
    assert set(CASES) == {policy.name for policy in POLICIES}


@pytest.mark.parametrize("policy", sorted(CASES))
def test_passes_on_the_shipped_stack(policy: str) -> None:
    case = CASES[policy]
    assert violations(policy, resources(case.stack)) == []


@pytest.mark.parametrize("policy", sorted(CASES))
def test_fails_when_broken(policy: str) -> None:
    case = CASES[policy]
    found = violations(policy, resources(case.stack, case.target, case.breaks))
    assert found, f"{policy} let the broken resource through"
    # A verdict on the broken property, not a resource the policy could no longer read.
    unjudged = [v.message for v in found if "cannot be judged" in v.message]
    assert unjudged == [], unjudged
    (chosen,) = [p for p in POLICIES if p.name == policy]
    assert {v.enforcement for v in found} == {chosen.enforcement_level.value}  # type: ignore[union-attr]
    assert all(v.remediation == chosen.remediation_steps for v in found)


@pytest.mark.parametrize("policy", sorted(CASES))
def test_a_missing_property_is_not_waved_through(policy: str) -> None:
    """Without what it reads, a policy reports rather than passes (or, for a property whose
    absence is itself the fault, reports that)."""
    case = CASES[policy]
    found = violations(policy, resources(case.stack, case.target, case.missing))
    if case.missing_passes:
        assert found == []
    else:
        assert found, f"{policy} passed a resource it could not read"


@pytest.mark.parametrize("policy", sorted(CASES))
def test_config_override(policy: str) -> None:
    case = CASES[policy]
    if case.threshold:
        # A stricter threshold turns the passing stack into a violation.
        assert violations(policy, resources(case.stack), case.override)
        return
    if case.override_breaks is not None:
        # A looser threshold lets the broken resource through.
        broken = resources(case.stack, case.target, case.override_breaks)
        assert violations(policy, broken)
        assert violations(policy, broken, case.override) == []
        return
    broken = resources(case.stack, case.target, case.breaks)
    found = violations(policy, broken, case.override)
    if case.override == "disabled":
        assert found == []
    else:
        assert found and {v.enforcement for v in found} == {case.override}


def test_a_release_candidate_of_the_floor_is_below_it() -> None:
    """2.56.1rc1 predates the 2.56.1 fix; reading only the digits would wave it through."""
    image = "rayproject/ray-llm:2.56.1rc1-py311-cu128"
    broken = resources("prod", RAYSERVICE, _head_image(image))
    assert violations("serving-rayservice-image-floor", broken)
