"""Every pod a stack runs, against the node it lands on: Ray heads, the edge and the operator on
the system pool, GPU workers on their machine type's pool. The rule (a pod's requests within
the catalog's allocatable for the machine type) is `serving.compile.scheduling.misfit`; the policy
pack applies the same rule to the resources the program registers.

The pods are read from the manifests and chart values the program deploys, so what is checked
is what is deployed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infra.kube.edge import edge_values
from infra.kube.manifests import kuberay_values, rayservice, resource_name
from infra.platform.config import Stack
from infra.platform.stack_config import NAMESPACE
from serving import catalog
from serving.compile.compiler import CompiledModel
from serving.compile.scheduling import MACHINE_TYPE_LABEL, head_pod_containers, misfit, requested
from serving.errors import ServestackError
from serving.frozen import Frozen
from serving.spec.loading import display_path


class PodFit(Frozen):
    """One kind of pod, what it requests and what a node of its pool holds for pods."""

    pod: str
    pool: str
    machine_type: str
    count: int
    cpus: float
    memory_bytes: int
    node_cpus: float
    node_memory_bytes: int

    @property
    def fits(self) -> bool:
        return self.cpus <= self.node_cpus and self.memory_bytes <= self.node_memory_bytes


def stack_pods(
    stack: Stack,
    models: Mapping[str, CompiledModel],
    system_machine: str,
    step_machines: Mapping[str, list[str]] | None = None,
) -> list[PodFit]:
    """Each pod of the stack with its pool's room per node; a worker of a machine type with a
    capacity chain once per machine type of its steps (`step_machines`), as it may land on any."""
    config = stack.config
    found: list[PodFit] = []

    def add(pod: str, pool: str, machine: str, count: int, containers: Any) -> None:
        asked = requested(containers)
        room = _room(machine)
        found.append(
            PodFit(
                pod=pod, pool=pool, machine_type=machine, count=count, cpus=asked.cpus,
                memory_bytes=asked.memory_bytes, node_cpus=room.cpus,
                node_memory_bytes=room.memory_bytes,
            )
        )  # fmt: skip

    for model in models.values():
        manifest = rayservice(model, config.ray_image)
        name = resource_name(model.spec)
        add(
            f"{name} head", "system", system_machine, 1,
            head_pod_containers(manifest["spec"]["rayClusterConfig"]),
        )  # fmt: skip
        for group in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
            pod = group["template"]["spec"]
            planned = pod["nodeSelector"][MACHINE_TYPE_LABEL]
            for machine in dict.fromkeys((step_machines or {}).get(planned) or [planned]):
                add(
                    f"{name} worker {group['groupName']}", "gpu", machine, group["maxReplicas"],
                    pod["containers"],
                )  # fmt: skip
    edge = edge_values(
        replicas=config.edge_replicas, internal=config.edge_internal, source_ranges=[],
        stream_timeout_s=config.stream_timeout_s,
    )["controller"]  # fmt: skip
    add("edge (HAProxy ingress)", "system", system_machine, config.edge_replicas, [edge])
    if config.kuberay_install == "helm":
        add("KubeRay operator", "system", system_machine, 1, [kuberay_values()])
    return found


def _room(machine: str) -> catalog.Capacity:
    try:
        return catalog.pod_capacity(machine)
    except KeyError:
        return catalog.Capacity(cpus=0, memory_bytes=0)


def check_fits(stack: Stack, pods: list[PodFit], system_max_nodes: int) -> None:
    """Refuse a stack with a pod no node of its pool can hold, or a system pool too small at its
    maximum for its pods plus the second head a RayService upgrade starts."""
    source = display_path(stack.path)
    misfits = [
        (pod, problem)
        for pod in pods
        if (problem := misfit(pod.pod, _asked(pod), pod.machine_type)) is not None
    ]
    if misfits:
        on_system = any(pod.pool == "system" for pod, _ in misfits)
        key = "system_machine_type" if on_system else "models"
        raise ServestackError(
            source, f"{NAMESPACE}:{key}", "; ".join(problem for _, problem in misfits),
            _fix(pods) if on_system else "lower the worker pods' requests",
        )  # fmt: skip
    system = [pod for pod in pods if pod.pool == "system"]
    if not system:
        return
    heads = [pod for pod in system if pod.pod.endswith(" head")]
    upgrade_head = max(heads, key=lambda pod: pod.cpus, default=None)
    cpus = sum(pod.cpus * pod.count for pod in system) + (upgrade_head.cpus if upgrade_head else 0)
    memory = sum(pod.memory_bytes * pod.count for pod in system) + (
        upgrade_head.memory_bytes if upgrade_head else 0
    )
    room = system[0]
    if (
        cpus > room.node_cpus * system_max_nodes
        or memory > room.node_memory_bytes * system_max_nodes
    ):
        needed = max(-(-cpus // room.node_cpus), -(-memory // room.node_memory_bytes))
        raise ServestackError(
            source, f"{NAMESPACE}:system_max_nodes",
            f"the system pool's {system_max_nodes} × {room.machine_type} hold "
            f"{room.node_cpus * system_max_nodes:g} CPU / "
            f"{room.node_memory_bytes * system_max_nodes / 2**30:.1f} GiB for pods; its pods "
            f"(heads, edge, operator, and a second head during a RayService upgrade) ask "
            f"{cpus:g} CPU / {memory / 2**30:.1f} GiB",
            f"set {NAMESPACE}:system_max_nodes: {int(needed)} or more, or a larger "
            f"{NAMESPACE}:system_machine_type",
        )  # fmt: skip


def _asked(pod: PodFit) -> catalog.Capacity:
    return catalog.Capacity(cpus=pod.cpus, memory_bytes=pod.memory_bytes)


def _fix(pods: list[PodFit]) -> str:
    biggest = max(
        (pod for pod in pods if pod.pool == "system"), key=lambda pod: pod.cpus, default=None
    )
    if biggest is None:
        return "lower the pod's requests"
    roomy = [
        machine.name
        for machine in catalog.CPU_MACHINE_TYPES.values()
        if (room := catalog.pod_capacity(machine.name)).cpus >= biggest.cpus
        and room.memory_bytes >= biggest.memory_bytes
    ]
    smallest = min(roomy, key=lambda name: catalog.CPU_MACHINE_TYPES[name].vcpus, default=None)
    return (
        f"use a system machine type holding {biggest.cpus:g} CPU and "
        f"{biggest.memory_bytes / 2**30:.1f} GiB for one pod"
        + (f", e.g. {NAMESPACE}:system_machine_type: {smallest}" if smallest else "")
    )
