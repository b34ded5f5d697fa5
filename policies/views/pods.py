"""The pods a RayService makes: its head and each worker group, as KubeRay stamps them from the
group's template, and their containers. A group without a pod template or containers cannot be
judged (fail closed); fields Kubernetes defaults read as their default."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

from policies.views.base import Reader, UnreadableError, as_number
from serving import catalog
from serving.catalog import MachineType
from serving.compile.scheduling import COMPUTE_CLASS_LABEL, GPU_RESOURCE, MACHINE_TYPE_LABEL

# Kubernetes' default terminationGracePeriodSeconds.
KUBERNETES_DEFAULT_GRACE_S = 30


class Container:
    def __init__(self, read: Reader) -> None:
        self.read = read
        self.raw: Mapping[str, Any] = read.props

    @property
    def name(self) -> str | None:
        return self.read.text("name")

    @property
    def image(self) -> str | None:
        return self.read.text("image") or None

    @cached_property
    def env(self) -> dict[str, str | None]:
        """Each variable's plain value; None for one read from elsewhere (valueFrom)."""
        env: dict[str, str | None] = {}
        for item in self.read.items("env"):
            value = item.get("value") if isinstance(item, Mapping) else None
            env[str(item.get("name") if isinstance(item, Mapping) else item)] = (
                None if value is None else str(value)
            )
        return env

    @property
    def security_context(self) -> Mapping[str, Any]:
        return self.read.mapping("securityContext")

    @property
    def gpus(self) -> int:
        # The resource name holds dots, so it is looked up in the limits, not as a path.
        limits = self.read.at("resources.limits")
        value = limits.props.get(GPU_RESOURCE)
        return 0 if value is None else int(as_number(value, limits.resource, GPU_RESOURCE))


class PodGroup:
    """The head group or one worker group of a Ray cluster."""

    def __init__(self, read: Reader, where: str) -> None:
        self.read = read
        self.where = where  # "head" or "worker group <name>", as messages name it

    @cached_property
    def pod(self) -> Reader:
        return self.read.at("template.spec", required=True)

    @cached_property
    def containers(self) -> list[Container]:
        pod = self.pod
        items = pod.items("containers", required=True)
        return [
            Container(Reader(pod.resource, item, f"{pod.where}.containers[{index}]"))
            for index, item in enumerate(items)
            if isinstance(item, Mapping)
        ]

    @property
    def raw_containers(self) -> list[Mapping[str, Any]]:
        return [c.raw for c in self.containers]

    @property
    def labels(self) -> dict[str, str]:
        return self.read.labels("template.metadata.labels")

    @property
    def annotations(self) -> dict[str, str]:
        return self.read.labels("template.metadata.annotations")

    @property
    def node_selector(self) -> dict[str, str]:
        return self.pod.labels("nodeSelector")

    @property
    def grace_s(self) -> int:
        return self.pod.integer("terminationGracePeriodSeconds", KUBERNETES_DEFAULT_GRACE_S)

    @property
    def service_account(self) -> str | None:
        return self.pod.text("serviceAccountName")

    @property
    def automount_token(self) -> Any:
        return self.pod.get("automountServiceAccountToken")

    @property
    def security_context(self) -> Mapping[str, Any]:
        return self.pod.mapping("securityContext")

    @cached_property
    def env(self) -> dict[str, str | None]:
        env: dict[str, str | None] = {}
        for container in self.containers:
            env.update(container.env)
        return env


class WorkerGroup(PodGroup):
    @property
    def name(self) -> str:
        return str(self.read.text("groupName", ""))

    @property
    def min_replicas(self) -> int:
        return self.read.integer("minReplicas", 0)

    @property
    def max_replicas(self) -> int:
        return self.read.integer("maxReplicas", 0)

    @property
    def gpus_per_pod(self) -> int:
        containers = self.containers
        if not containers:
            raise UnreadableError(self.read.resource, f"{self.pod.where}.containers", "is empty")
        return containers[0].gpus

    @property
    def machine_name(self) -> str | None:
        return self.node_selector.get(MACHINE_TYPE_LABEL)

    @property
    def compute_class(self) -> str | None:
        """The ComputeClass the group selects, where it runs on a capacity chain."""
        return self.node_selector.get(COMPUTE_CLASS_LABEL)

    @property
    def machine(self) -> MachineType | None:
        name = self.machine_name
        return catalog.MACHINE_TYPES.get(name) if name else None


def every_container(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every container spec anywhere in a resource's inputs (any kind of object, a Helm
    release's values too), for the checks that hold of every container whatever holds it."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in ("containers", "initContainers") and isinstance(item, list):
                yield from (c for c in item if isinstance(c, Mapping))
            else:
                yield from every_container(item)
    elif isinstance(value, list):
        for item in value:
            yield from every_container(item)
