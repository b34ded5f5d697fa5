"""The view of a RayService: its Ray cluster (head and worker groups), the compiled Serve config
and its LLM deployments, and the profile it was compiled from (its `servestack.io/profile`
annotation).

A RayService is judged by the layout it deploys: the model's facts come from the profile, and
everything that decides placement (parallel sizes, context length, memory share, placement
strategy, the pool's machine) from the Serve config and worker groups themselves, so an edited
manifest is judged as edited."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

from policies.views import serve_config
from policies.views.base import RAYSERVICE, Reader, UnreadableError, cached, remembers
from policies.views.pods import PodGroup, WorkerGroup
from policies.views.serve_config import Deployment
from serving.catalog import MachineType
from serving.compile.compiler import PROFILE_ANNOTATION
from serving.compile.scheduling import head_pod_containers

PROFILE_FIELD = f"metadata.annotations['{PROFILE_ANNOTATION}']"


@dataclass(frozen=True)
class GcsOptions:
    """KubeRay's gcsFaultToleranceOptions, as far as the pack judges them."""

    redis_address: str | None
    password_by_value: bool
    password_reference: bool  # a valueFrom.secretKeyRef is given
    password_secret: str | None


@remembers
@lru_cache(maxsize=256)
def _profile(text: str) -> Mapping[str, Any]:
    try:
        fields = json.loads(text)
    except ValueError:
        raise UnreadableError("", PROFILE_FIELD, "is not JSON") from None
    if not isinstance(fields, Mapping):
        raise UnreadableError("", PROFILE_FIELD, "is not a JSON object")
    return fields


class RayServiceView:
    def __init__(self, name: str, props: Mapping[str, Any]) -> None:
        self.name = name
        self.props = props
        self.read = Reader(name, props)

    # --- the object ----------------------------------------------------------------------

    @property
    def object_name(self) -> str | None:
        return self.read.text("metadata.name")

    @property
    def namespace(self) -> str | None:
        return self.read.text("metadata.namespace")

    @property
    def annotations(self) -> Mapping[str, Any]:
        return self.read.mapping("metadata.annotations")

    @cached_property
    def spec(self) -> Reader:
        return self.read.at("spec", required=True)

    @property
    def deletion_delay(self) -> float | int | None:
        """rayClusterDeletionDelaySeconds as written (a number), or None where unset."""
        delay = self.spec.get("rayClusterDeletionDelaySeconds")
        if delay is not None:
            self.spec.number("rayClusterDeletionDelaySeconds")  # fails closed on a non-number
        return delay  # type: ignore[no-any-return]

    def sets(self, key: str) -> bool:
        """Whether the RayService spec sets `key` at all (a deprecated field, say)."""
        return key in self.spec.props

    @property
    def upgrade_type(self) -> str | None:
        return self.spec.text("upgradeStrategy.type")

    # --- the Ray cluster -----------------------------------------------------------------

    @cached_property
    def cluster(self) -> Reader:
        return self.read.at("spec.rayClusterConfig", required=True)

    @cached_property
    def head(self) -> PodGroup:
        return PodGroup(self.cluster.at("headGroupSpec", required=True), "head")

    @cached_property
    def worker_groups(self) -> list[WorkerGroup]:
        groups = self.cluster.items("workerGroupSpecs")
        found = []
        for index, group in enumerate(groups):
            read = Reader(self.name, group, f"{self.cluster.where}.workerGroupSpecs[{index}]")
            if not isinstance(group, Mapping):
                raise UnreadableError(self.name, read.where, "is not an object")
            found.append(WorkerGroup(read, f"worker group {group.get('groupName')}"))
        return found

    @property
    def groups(self) -> Iterator[PodGroup]:
        """The head, then each worker group."""
        yield self.head
        yield from self.worker_groups

    def head_env(self) -> dict[str, str | None]:
        return self.head.env

    def image(self) -> str | None:
        containers = self.head.containers
        return containers[0].image if containers else None

    def head_pod_containers(self) -> list[Mapping[str, Any]]:
        """The head pod's containers as KubeRay makes it (the autoscaler sidecar included)."""
        self.head.containers  # noqa: B018 - fails closed on a head without containers
        return head_pod_containers(self.cluster.props)

    @property
    def auth_mode(self) -> str | None:
        options = self.cluster.mapping("authOptions")
        mode = options.get("mode", "token" if options else None)
        return None if mode is None else str(mode)

    @property
    def gcs(self) -> GcsOptions | None:
        options = self.cluster.mapping("gcsFaultToleranceOptions")
        if not options:
            return None
        read = self.cluster.at("gcsFaultToleranceOptions")
        password = read.mapping("redisPassword")
        return GcsOptions(
            redis_address=read.text("redisAddress") or None,
            password_by_value="value" in password,
            password_reference=bool(read.mapping("redisPassword.valueFrom.secretKeyRef")),
            password_secret=read.text("redisPassword.valueFrom.secretKeyRef.name"),
        )

    def gpus_per_pod(self) -> int:
        """The most GPUs one worker pod (one Ray node) holds: a STRICT_PACK group's ceiling."""
        gpus = [g.gpus_per_pod for g in self.worker_groups]
        if not gpus or max(gpus) == 0:
            raise UnreadableError(
                self.name, f"{self.cluster.where}.workerGroupSpecs", "ask for no GPUs"
            )
        return max(gpus)

    def machine(self) -> MachineType | None:
        machines = [g.machine for g in self.worker_groups if g.machine is not None]
        return machines[0] if machines else None

    # --- the Serve config and the profile ------------------------------------------------

    @cached_property
    def serve_text(self) -> str:
        text = self.read.get(serve_config.SERVE_CONFIG)
        if not text:
            raise UnreadableError(self.name, serve_config.SERVE_CONFIG)
        return str(text)

    @property
    def serve_document(self) -> Mapping[str, Any]:
        return serve_config.document(self.name, self.serve_text)

    @cached_property
    def deployments(self) -> tuple[Deployment, ...]:
        return serve_config.deployments(self.name, self.serve_text)

    @property
    def profile_text(self) -> str | None:
        value = self.annotations.get(PROFILE_ANNOTATION)
        return None if value is None else str(value)

    def profile(self) -> Mapping[str, Any]:
        """The profile the RayService was compiled from, as its annotation carries it."""
        text = self.profile_text
        if text is None:
            raise UnreadableError(self.name, PROFILE_FIELD)
        try:
            return _profile(text)
        except UnreadableError as exc:
            raise UnreadableError(self.name, exc.field, exc.problem) from None


def rayservice(resource_type: str, name: str, props: Mapping[str, Any]) -> RayServiceView | None:
    """The RayService's view (one per resource per run), or None for any other resource."""
    return cached(RayServiceView, name, props) if resource_type == RAYSERVICE else None


def rayservices(resources: list[Any]) -> Iterator[RayServiceView]:
    for resource in resources:
        view = rayservice(resource.resource_type, resource.name, resource.props)
        if view is not None:
            yield view


def deployments_of(
    resource_type: str, name: str, props: Mapping[str, Any]
) -> Iterator[tuple[RayServiceView, Deployment]]:
    """Each LLM deployment of a RayService, with its view; nothing for other resources."""
    view = rayservice(resource_type, name, props)
    if view is not None:
        for deployment in view.deployments:
            yield view, deployment
