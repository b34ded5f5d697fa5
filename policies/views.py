"""Reading the resources policies judge, as the analyzer hands them over (camelCase inputs):
a RayService's compiled Serve application and worker groups, node pools, clusters.

A RayService is judged by the layout it deploys: the model's facts come from the profile it was
compiled from (its `servestack.io/profile` annotation), and everything that decides placement
(parallel sizes, context length, memory share, placement strategy, the pool's machine) is taken
from the Serve config and worker groups themselves, so an edited manifest is judged as edited.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from serving import catalog
from serving.catalog import MachineType
from serving.compile.compiler import PROFILE_ANNOTATION
from serving.compile.patterns import llm_configs_of
from serving.compile.scheduling import GPU_RESOURCE, MACHINE_TYPE_LABEL
from serving.plan import planner, rules
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

RAYSERVICE = "kubernetes:ray.io/v1:RayService"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"

# Engine keys that carry the layout, by the profile field they override.
_LAYOUT_KEYS = {
    "max_model_len": "max_model_len",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "gpu_memory_utilization": "gpu_memory_utilization",
}


class UnreadableError(Exception):
    """The resource lacks what a policy needs to judge it (a missing property)."""


@dataclass(frozen=True)
class WorkerGroup:
    name: str
    gpus_per_pod: int
    machine: MachineType | None
    max_replicas: int
    env: dict[str, str | None]


@dataclass(frozen=True)
class Deployment:
    """One LLMConfig of a RayService (the server, or one side of a P/D pair)."""

    role: str
    config: Mapping[str, Any]
    layout: Parallelism
    strategy: str

    @property
    def engine(self) -> Mapping[str, Any]:
        engine: Mapping[str, Any] = self.config.get("engine_kwargs") or {}
        return engine

    @property
    def router_class(self) -> str | None:
        deployment = self.config.get("deployment_config") or {}
        router = deployment.get("request_router_config") or {}
        value = router.get("request_router_class")
        return str(value) if value else None


@dataclass(frozen=True)
class RayServiceView:
    name: str
    props: Mapping[str, Any]

    @property
    def cluster(self) -> Mapping[str, Any]:
        try:
            cluster: Mapping[str, Any] = self.props["spec"]["rayClusterConfig"]
        except (KeyError, TypeError):
            raise UnreadableError("spec.rayClusterConfig is missing") from None
        return cluster

    def serve_config(self) -> Mapping[str, Any]:
        text = (self.props.get("spec") or {}).get("serveConfigV2")
        if not text:
            raise UnreadableError("spec.serveConfigV2 is missing")
        document: Mapping[str, Any] = yaml.safe_load(text)
        return document

    def deployments(self) -> list[Deployment]:
        found = []
        for app in self.serve_config().get("applications") or []:
            for role, config in llm_configs_of(app.get("args") or {}):
                engine = config.get("engine_kwargs") or {}
                layout = Parallelism(
                    tensor=int(engine.get("tensor_parallel_size", 1)),
                    pipeline=int(engine.get("pipeline_parallel_size", 1)),
                    data=int(engine.get("data_parallel_size", 1)),
                    expert=bool(engine.get("enable_expert_parallel", False)),
                )
                placement = config.get("placement_group_config") or {}
                # Ray's own default when none is given (PACK since ray#56980).
                strategy = str(placement.get("strategy", "PACK"))
                found.append(Deployment(role, config, layout, strategy))
        if not found:
            raise UnreadableError("serveConfigV2 holds no LLM config")
        return found

    def head_env(self) -> dict[str, str | None]:
        head = self.cluster.get("headGroupSpec") or {}
        return _env(head)

    def image(self) -> str | None:
        head = self.cluster.get("headGroupSpec") or {}
        containers = ((head.get("template") or {}).get("spec") or {}).get("containers") or []
        return str(containers[0]["image"]) if containers and containers[0].get("image") else None

    def worker_groups(self) -> list[WorkerGroup]:
        groups = []
        for group in self.cluster.get("workerGroupSpecs") or []:
            pod = (group.get("template") or {}).get("spec") or {}
            containers = pod.get("containers") or [{}]
            limits = (containers[0].get("resources") or {}).get("limits") or {}
            machine_name = (pod.get("nodeSelector") or {}).get(MACHINE_TYPE_LABEL)
            groups.append(
                WorkerGroup(
                    name=str(group.get("groupName", "")),
                    gpus_per_pod=int(float(limits.get(GPU_RESOURCE, 0))),
                    machine=catalog.MACHINE_TYPES.get(str(machine_name)) if machine_name else None,
                    max_replicas=int(group.get("maxReplicas", 0)),
                    env=_env(group),
                )
            )
        return groups

    def gpus_per_pod(self) -> int:
        """The most GPUs one worker pod (one Ray node) holds: a STRICT_PACK group's ceiling."""
        gpus = [g.gpus_per_pod for g in self.worker_groups()]
        if not gpus or max(gpus) == 0:
            raise UnreadableError("no worker group asks for GPUs")
        return max(gpus)

    def machine(self) -> MachineType | None:
        machines = [g.machine for g in self.worker_groups() if g.machine is not None]
        return machines[0] if machines else None

    def spec_for(self, deployment: Deployment) -> ModelSpec:
        """The profile, overlaid with what this deployment actually runs."""
        annotations = (self.props.get("metadata") or {}).get("annotations") or {}
        if PROFILE_ANNOTATION not in annotations:
            raise UnreadableError(f"metadata.annotations['{PROFILE_ANNOTATION}'] is missing")
        fields = json.loads(annotations[PROFILE_ANNOTATION])
        # Expert parallelism asked of a dense model is dropped by the compiler (vLLM would
        # refuse it); the request is still judged, so it is not dropped silently.
        asked = bool((fields.get("parallelism") or {}).get("expert"))
        layout = deployment.layout.model_copy(update={"expert": deployment.layout.expert or asked})
        fields["parallelism"] = layout.model_dump()
        fields["disaggregation"] = None
        for key, field in _LAYOUT_KEYS.items():
            if key in deployment.engine:
                fields[field] = deployment.engine[key]
        machine = self.machine()
        accelerator = _accelerator(deployment.config.get("accelerator_type"))
        if accelerator is not None:
            fields["accelerator"] = accelerator
        if machine is not None and machine.accelerator == fields["accelerator"]:
            fields["machine_type"] = machine.name
        try:
            return ModelSpec.model_validate(fields)
        except ValidationError as exc:
            raise UnreadableError(
                f"its model profile does not validate: {exc.errors()[0]['msg']}"
            ) from None


def _env(group: Mapping[str, Any]) -> dict[str, str | None]:
    containers = ((group.get("template") or {}).get("spec") or {}).get("containers") or []
    env: dict[str, str | None] = {}
    for container in containers:
        for item in container.get("env") or []:
            value = item.get("value")
            env[str(item.get("name"))] = None if value is None else str(value)
    return env


def _accelerator(ray_name: Any) -> str | None:
    """The catalog key of a GPU named as Ray names it (H100, A100-80G)."""
    for key, gpu in catalog.ACCELERATORS.items():
        if gpu.ray_accelerator_type == ray_name:
            return key
    return None


def rayservice(resource_type: str, name: str, props: Mapping[str, Any]) -> RayServiceView | None:
    return RayServiceView(name, props) if resource_type == RAYSERVICE else None


def deployments_of(
    resource_type: str, name: str, props: Mapping[str, Any]
) -> Iterator[tuple[RayServiceView, Deployment]]:
    """Each LLM deployment of a RayService, with its view; nothing for other resources."""
    view = rayservice(resource_type, name, props)
    if view is not None:
        for deployment in view.deployments():
            yield view, deployment


def planner_verdicts(view: RayServiceView, deployment: Deployment, *codes: str) -> Iterator[str]:
    """The planner's verdicts with these codes on the layout a deployment runs, on the GPUs its
    worker pods hold and with the placement strategy it asks, as messages: the pack judges a
    deployed layout by the same rules `servestack plan` gives its verdicts by."""
    spec = view.spec_for(deployment)
    memory = planner.memory(spec, deployment.layout)
    role = deployment.role if deployment.role in ("prefill", "decode") else "server"
    found = rules.verdicts(
        spec, role, deployment.layout, memory,  # type: ignore[arg-type]
        gpus_per_node=view.gpus_per_pod(), strategy=deployment.strategy or None,
    )  # fmt: skip
    for verdict in found:
        if verdict.code in codes:
            yield f"{view.name} ({deployment.role}): {verdict.message}"


def node_pool_machine(props: Mapping[str, Any]) -> str | None:
    labels = ((props.get("nodeConfig") or {}).get("labels")) or {}
    value = labels.get(MACHINE_TYPE_LABEL)
    return str(value) if value else None
