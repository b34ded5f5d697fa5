"""How the policy tests break what the real program registers: the resources of a stack as preview
records them, and edits to one property of them (serve config, engine arguments, pods, profile
annotation)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from typing import Any

import yaml

from infra.deploy.preview import Registered, Violation, judge, record
from policies.pack import POLICIES
from serving.compile.compiler import PROFILE_ANNOTATION

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
        if edit is not None and not edited and matches_target(resource, target):
            inputs = copy.deepcopy(resource.inputs)
            edit(inputs)
            resource = replace(resource, inputs=inputs)
            edited = True
        found.append(resource)
    assert edit is None or edited, f"{stack} has no {target}"
    return found


def matches_target(resource: Registered, target: str | None) -> bool:
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


def serve_edit(edit: Callable[[dict[str, Any]], None]) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        document = yaml.safe_load(inputs["spec"]["serveConfigV2"])
        args = document["applications"][0]["args"]
        config = (args.get("llm_configs") or [args.get("llm_config")])[0]
        edit(config)
        inputs["spec"]["serveConfigV2"] = yaml.safe_dump(document)

    return apply


def engine_edit(**changes: Any) -> Edit:
    return serve_edit(lambda config: config["engine_kwargs"].update(changes))


def cluster_of(inputs: dict[str, Any]) -> dict[str, Any]:
    cluster: dict[str, Any] = inputs["spec"]["rayClusterConfig"]
    return cluster


def workers_of(inputs: dict[str, Any]) -> list[dict[str, Any]]:
    return list(cluster_of(inputs)["workerGroupSpecs"])


def container_of(group: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = group["template"]["spec"]["containers"][0]
    return container


def pod_gpus(count: int) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        for group in workers_of(inputs):
            container_of(group)["resources"]["limits"]["nvidia.com/gpu"] = str(count)

    return apply


def profile_edit(**changes: Any) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        annotations = inputs["metadata"]["annotations"]
        profile = json.loads(annotations[PROFILE_ANNOTATION])
        for key, value in changes.items():
            if isinstance(value, dict) and isinstance(profile.get(key, {}), dict):
                profile[key] = {**profile.get(key, {}), **value}
            else:
                profile[key] = value
        annotations[PROFILE_ANNOTATION] = json.dumps(profile)

    return apply


def both(*edits: Edit) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        for edit in edits:
            edit(inputs)

    return apply


def drop_env(name: str, where: str) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        groups = [cluster_of(inputs)["headGroupSpec"]] if where == "head" else workers_of(inputs)
        for group in groups:
            container = container_of(group)
            container["env"] = [e for e in container["env"] if e["name"] != name]

    return apply


def pop_at(*path: str) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        node = inputs
        for key in path[:-1]:
            node = node[key]
        node.pop(path[-1])

    return apply


def set_at(value: Any, *path: str) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        node = inputs
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return apply


def head_image(image: str) -> Edit:
    return lambda inputs: container_of(cluster_of(inputs)["headGroupSpec"]).update(image=image)


def drop_head_image(inputs: dict[str, Any]) -> None:
    container_of(cluster_of(inputs)["headGroupSpec"]).pop("image")


def plaintext_token(inputs: dict[str, Any]) -> None:
    container_of(cluster_of(inputs)["headGroupSpec"])["env"].append(
        {"name": "HF_TOKEN", "value": "hf_plaintext"}
    )


# Built at run time so that no credential-shaped string sits in the repository.
FAKE_OPENAI_KEY = "sk-" + "live-" + "a1B2c3D4" * 3


def env_var_in_serve_config(inputs: dict[str, Any]) -> None:
    serve_edit(
        lambda config: (
            config.setdefault("runtime_env", {})
            .setdefault("env_vars", {})
            .update(MY_SETTING=FAKE_OPENAI_KEY)
        )
    )(inputs)


def container_context(**changes: Any) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        container_of(workers_of(inputs)[0])["securityContext"].update(changes)

    return apply


def head_cpu(cpu: str) -> Edit:
    def apply(inputs: dict[str, Any]) -> None:
        container_of(cluster_of(inputs)["headGroupSpec"])["resources"]["requests"]["cpu"] = cpu

    return apply


def worker_pod(**changes: Any) -> Edit:
    return lambda inputs: workers_of(inputs)[0]["template"]["spec"].update(changes)


def worker_pods(**changes: Any) -> Edit:
    return lambda inputs: [
        group["template"]["spec"].update(changes) for group in workers_of(inputs)
    ]


def worker_template(**changes: Any) -> Edit:
    return lambda inputs: [group["template"].update(changes) for group in workers_of(inputs)]


def drop_worker_grace(inputs: dict[str, Any]) -> None:
    for group in workers_of(inputs):
        group["template"]["spec"].pop("terminationGracePeriodSeconds")


def strategy_edit(strategy: str) -> Edit:
    return serve_edit(lambda config: config["placement_group_config"].update(strategy=strategy))
