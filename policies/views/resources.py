"""Views of the other resources the pack judges: GKE clusters and node pools, the GCS Redis,
and the Kubernetes objects around a model (Ingress, ConfigMap, Secret, NetworkPolicy,
PodDisruptionBudget, Helm releases). Each is built once per resource per run (`view`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

from policies.views.base import (
    NODE_POOL,
    Reader,
    UnreadableError,
    cached,
    of,
)
from serving.compile.scheduling import (
    COMPUTE_CLASS_LABEL,
    MACHINE_TYPE_LABEL,
    POOL_LABEL,
    SPOT_CRITICAL_PODS_S,
)


class ResourceView:
    def __init__(self, name: str, props: Mapping[str, Any]) -> None:
        self.name = name
        self.props = props
        self.read = Reader(name, props)


class KubernetesObject(ResourceView):
    @property
    def object_name(self) -> str | None:
        return self.read.text("metadata.name")

    @property
    def namespace(self) -> str | None:
        return self.read.text("metadata.namespace")

    @property
    def annotations(self) -> Mapping[str, Any]:
        return self.read.mapping("metadata.annotations")

    @property
    def spec(self) -> Reader:
        return self.read.at("spec")


class NodePoolView(ResourceView):
    @property
    def node(self) -> Reader:
        return self.read.at("nodeConfig")

    @property
    def machine(self) -> str | None:
        """The machine type its nodes are labelled with (GPU pools), as worker groups select it."""
        return self.node.labels("labels").get(MACHINE_TYPE_LABEL) or None

    @property
    def compute_class(self) -> str | None:
        """The ComputeClass the pool is a step of (its nodes' label), where it is one."""
        return self.node.labels("labels").get(COMPUTE_CLASS_LABEL) or None

    @property
    def zones(self) -> list[str]:
        return [str(zone) for zone in self.read.items("nodeLocations")]

    @property
    def flex_start(self) -> bool:
        return bool(self.node.get("flexStart"))

    @property
    def queued(self) -> bool:
        return bool(self.read.get("queuedProvisioning.enabled"))

    @property
    def auto_repair(self) -> bool:
        # GKE repairs nodes unless the pool says otherwise.
        return self.read.get("management.autoRepair") is not False

    @property
    def max_run_s(self) -> int | None:
        """A flex-start node's life ("604800s" as GKE spells it); None where unset."""
        text = self.node.text("maxRunDuration")
        if text is None:
            return None
        try:
            return int(float(text.removesuffix("s")))
        except ValueError:
            raise UnreadableError(
                self.name, "nodeConfig.maxRunDuration", f"is {text!r}, not seconds"
            ) from None

    @property
    def pool_role(self) -> str | None:
        return self.node.labels("labels").get(POOL_LABEL)

    @property
    def machine_type(self) -> str | None:
        return self.node.text("machineType")

    @property
    def has_gpus(self) -> bool:
        return bool(self.node.get("guestAccelerators"))

    @property
    def taints(self) -> list[Mapping[str, Any]]:
        return [t for t in self.node.items("taints") if isinstance(t, Mapping)]

    @property
    def compact(self) -> bool:
        return self.read.text("placementPolicy.type") == "COMPACT"

    @property
    def max_nodes(self) -> int:
        autoscaling = self.read.at("autoscaling")
        for key in ("totalMaxNodeCount", "maxNodeCount"):
            if autoscaling.get(key):
                return autoscaling.integer(key)
        return 0

    @property
    def reclaimable(self) -> bool:
        return bool(self.node.get("spot") or self.node.get("preemptible"))

    @property
    def shutdown_grace_s(self) -> int | None:
        if self.node.get("kubeletConfig.shutdownGracePeriodSeconds") is None:
            return None
        return self.node.integer("kubeletConfig.shutdownGracePeriodSeconds")

    @property
    def critical_pods_grace_s(self) -> int:
        return self.node.integer(
            "kubeletConfig.shutdownGracePeriodCriticalPodsSeconds", SPOT_CRITICAL_PODS_S
        )

    @property
    def reservation_affinity(self) -> str | None:
        return self.node.text("reservationAffinity.consumeReservationType")

    @property
    def reservation_names(self) -> list[str]:
        return [str(name) for name in self.node.items("reservationAffinity.values")]

    @property
    def resource_labels(self) -> dict[str, str]:
        return self.node.labels("resourceLabels")


class ClusterView(ResourceView):
    @property
    def private_nodes(self) -> Any:
        return self.read.get("privateClusterConfig.enablePrivateNodes")

    @property
    def private_endpoint(self) -> Any:
        return self.read.get("privateClusterConfig.enablePrivateEndpoint")

    @property
    def workload_pool(self) -> str | None:
        return self.read.text("workloadIdentityConfig.workloadPool") or None

    @property
    def shielded_nodes(self) -> Any:
        return self.read.get("enableShieldedNodes")

    @property
    def encryption_state(self) -> str | None:
        return self.read.text("databaseEncryption.state")

    @property
    def encryption_key(self) -> str | None:
        return self.read.text("databaseEncryption.keyName") or None

    @property
    def binary_authorization_mode(self) -> str | None:
        return self.read.text("binaryAuthorization.evaluationMode")

    @property
    def resource_labels(self) -> dict[str, str]:
        return self.read.labels("resourceLabels")

    @property
    def maintenance_exclusions(self) -> list[tuple[str, float]]:
        """Each maintenance exclusion's name and length in seconds."""
        found = []
        for item in self.read.items("maintenancePolicy.maintenanceExclusions"):
            if not isinstance(item, Mapping):
                continue
            try:
                start = datetime.fromisoformat(str(item.get("startTime")))
                end = datetime.fromisoformat(str(item.get("endTime")))
            except ValueError:
                raise UnreadableError(
                    self.name, "maintenancePolicy.maintenanceExclusions", "holds no RFC 3339 time"
                ) from None
            found.append((str(item.get("exclusionName")), (end - start).total_seconds()))
        return found

    @property
    def authorized_networks(self) -> list[str] | None:
        """The control plane's authorized CIDR blocks; None where no config is given at all."""
        if self.read.get("masterAuthorizedNetworksConfig") is None:
            return None
        blocks = self.read.items("masterAuthorizedNetworksConfig.cidrBlocks")
        return [str(b.get("cidrBlock")) for b in blocks if isinstance(b, Mapping)]


class IngressView(KubernetesObject):
    @property
    def backends(self) -> Iterator[str]:
        """The Service each path of each rule sends to."""
        for rule in self.spec.items("rules"):
            for path in (rule.get("http") or {}).get("paths") or []:
                backend = ((path.get("backend") or {}).get("service") or {}).get("name")
                if backend:
                    yield str(backend)


class ConfigMapView(KubernetesObject):
    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace or "default", str(self.object_name))

    @property
    def data(self) -> Mapping[str, Any]:
        return self.read.mapping("data")


class NetworkPolicyView(KubernetesObject):
    @property
    def pod_selector(self) -> Mapping[str, Any] | None:
        selector = self.spec.get("podSelector")
        return None if selector is None else self.spec.mapping("podSelector")

    @property
    def match_labels(self) -> Mapping[str, Any]:
        return self.spec.mapping("podSelector.matchLabels")

    @property
    def ingress(self) -> list[Mapping[str, Any]]:
        return [r for r in self.spec.items("ingress") if isinstance(r, Mapping)]

    @property
    def policy_types(self) -> set[str]:
        return {str(t) for t in self.spec.items("policyTypes")}


class BudgetView(KubernetesObject):
    @property
    def match_labels(self) -> dict[str, str]:
        return self.spec.labels("selector.matchLabels")

    def holds(self, pods: int) -> bool:
        """Whether the budget keeps `pods` pods through a voluntary disruption."""
        if self.spec.get("minAvailable") is not None:
            return self.spec.integer("minAvailable") >= pods
        return self.spec.get("maxUnavailable") is not None and (
            self.spec.integer("maxUnavailable") == 0
        )


class RedisView(ResourceView):
    @property
    def auth_enabled(self) -> Any:
        return self.read.get("authEnabled")

    @property
    def connect_mode(self) -> str | None:
        return self.read.text("connectMode")


class ReleaseView(ResourceView):
    @property
    def chart(self) -> str | None:
        return self.read.text("chart")

    @cached_property
    def values(self) -> Reader:
        return self.read.at("values")

    @property
    def controller(self) -> Reader:
        return self.values.at("controller")


View = TypeVar("View", bound=ResourceView)


def view(kind: type[View], name: str, props: Mapping[str, Any]) -> View:
    return cached(kind, name, props)


def views(resources: list[Any], resource_type: str, kind: type[View]) -> list[View]:
    """The views of every resource of one type, in the analyzer's order."""
    return [view(kind, r.name, r.props) for r in of(resources, resource_type)]


def gpu_pools_by_machine(resources: list[Any]) -> dict[str, NodePoolView]:
    """The GPU pools worker groups select by machine type (not a capacity chain's steps)."""
    pools = views(resources, NODE_POOL, NodePoolView)
    return {pool.machine: pool for pool in pools if pool.machine and not pool.compute_class}


def class_pools(resources: list[Any]) -> dict[str, list[NodePoolView]]:
    """The step pools of each ComputeClass, by its name."""
    found: dict[str, list[NodePoolView]] = {}
    for pool in views(resources, NODE_POOL, NodePoolView):
        if pool.compute_class:
            found.setdefault(pool.compute_class, []).append(pool)
    return found
