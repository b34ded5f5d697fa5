"""Faults: what a stack needs to keep serving when a GKE GPU cluster does what it does — every
pod fits the node it selects, a lost head keeps its cluster (GCS fault tolerance on the stack's
Redis), node upgrades leave heads and the models' minimum workers up (disruption budgets), a
pod's grace fits its node's real notice, and upgrades have room and never cut a stream.

Every check reads the resources as registered; the facts (allocatable per machine type, GKE's
Spot notice, the node-pool surge) come from serving's catalog and scheduling contract."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from pulumi_policy import Severity

from policies.common import stack_policy
from policies.views import INGRESS, NODE_POOL, RAYSERVICE
from policies.views import node_pool_machine as pool_machine
from serving.compile.patterns import llm_configs_of
from serving.compile.scheduling import (
    MACHINE_TYPE_LABEL,
    NODE_SURGE,
    POOL_LABEL,
    RESERVED_NODES_LABEL,
    SPOT_CRITICAL_PODS_S,
    SPOT_POD_NOTICE_S,
    SYSTEM_POOL,
    head_pod_containers,
    misfit,
    requested,
)

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
SECRET = "kubernetes:core/v1:Secret"
REDIS = "gcp:redis/instance:Instance"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# Kubernetes' default terminationGracePeriodSeconds, and Ray Serve's graceful_shutdown_timeout_s.
KUBERNETES_DEFAULT_GRACE_S = 30
SERVE_DEFAULT_SHUTDOWN_S = 20
DEPRECATED_THRESHOLDS = ("serviceUnhealthySecondThreshold", "deploymentUnhealthySecondThreshold")


def _of(resources: list[Any], resource_type: str) -> list[Any]:
    return [r for r in resources if r.resource_type == resource_type]


def _cluster(service: Any) -> Mapping[str, Any]:
    return ((service.props.get("spec") or {}).get("rayClusterConfig")) or {}


def _pod(group: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((group.get("template") or {}).get("spec")) or {}


def _template_labels(group: Mapping[str, Any]) -> dict[str, str]:
    return dict(((group.get("template") or {}).get("metadata") or {}).get("labels") or {})


def _gpu_pools(resources: list[Any]) -> dict[str, Mapping[str, Any]]:
    return {
        machine: r.props for r in _of(resources, NODE_POOL) if (machine := pool_machine(r.props))
    }


def _system_machine(resources: list[Any]) -> str | None:
    for pool in _of(resources, NODE_POOL):
        node = pool.props.get("nodeConfig") or {}
        if (node.get("labels") or {}).get(POOL_LABEL) == SYSTEM_POOL:
            return str(node.get("machineType"))
    return None


def _machine_selected(pod: Mapping[str, Any], system: str | None) -> str | None:
    selector = pod.get("nodeSelector") or {}
    if MACHINE_TYPE_LABEL in selector:
        return str(selector[MACHINE_TYPE_LABEL])
    if selector.get(POOL_LABEL) == SYSTEM_POOL:
        return system
    return None


# --- every pod fits its node --------------------------------------------------------------


def _pod_fits_node(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    system = _system_machine(resources)
    pods: list[tuple[str, Mapping[str, Any], list[Mapping[str, Any]]]] = []
    for service in _of(resources, RAYSERVICE):
        cluster = _cluster(service)
        head = cluster.get("headGroupSpec") or {}
        pods.append((f"{service.name} head", _pod(head), head_pod_containers(cluster)))
        for group in cluster.get("workerGroupSpecs") or []:
            pod = _pod(group)
            pods.append(
                (
                    f"{service.name} worker {group.get('groupName')}",
                    pod,
                    pod.get("containers") or [],
                )
            )
    for release in _of(resources, HELM_RELEASE):
        values = release.props.get("values") or {}
        for part in (values, values.get("controller") or {}):
            if "resources" in part and "nodeSelector" in part:
                pods.append((release.name, part, [part]))
    for name, pod, containers in pods:
        machine = _machine_selected(pod, system)
        if machine is None:
            yield f"{name} selects no pool of the stack, so its fit cannot be checked"
            continue
        problem = misfit(name, requested(containers), machine)
        if problem is not None:
            yield problem


# --- a lost head keeps its cluster --------------------------------------------------------


def _gcs_fault_tolerance(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    stores = _of(resources, REDIS)
    secrets = {
        (
            (s.props.get("metadata") or {}).get("namespace"),
            (s.props.get("metadata") or {}).get("name"),
        )
        for s in _of(resources, SECRET)
    }
    for store in stores:
        props = store.props
        if props.get("authEnabled") is not True:
            yield f"{store.name}: the GCS Redis has AUTH off"
        if props.get("connectMode") != "PRIVATE_SERVICE_ACCESS":
            yield f"{store.name}: the GCS Redis is not reached through private service access"
    for service in _of(resources, RAYSERVICE):
        options = _cluster(service).get("gcsFaultToleranceOptions")
        if not options:
            yield (
                f"{service.name}: no GCS fault tolerance; a lost head makes KubeRay replace every "
                "worker, and every replica reloads its weights"
            )
            continue
        if not stores or not options.get("redisAddress"):
            yield f"{service.name}: GCS fault tolerance names no Redis the stack creates"
        password = options.get("redisPassword") or {}
        ref = (password.get("valueFrom") or {}).get("secretKeyRef") or {}
        namespace = (service.props.get("metadata") or {}).get("namespace")
        if "value" in password or not ref:
            yield f"{service.name}: the GCS Redis password is not read from a Secret"
        elif (namespace, ref.get("name")) not in secrets:
            yield f"{service.name}: the Secret {ref.get('name')} with the Redis password is missing"


# --- disruption budgets -------------------------------------------------------------------


def _disruption_budgets(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    budgets = [
        (
            (b.props.get("metadata") or {}).get("namespace"),
            ((b.props.get("spec") or {}).get("selector") or {}).get("matchLabels") or {},
            b.props.get("spec") or {},
        )
        for b in _of(resources, PDB)
    ]

    def guarding(namespace: Any, labels: dict[str, str]) -> list[Mapping[str, Any]]:
        return [
            spec
            for where, selector, spec in budgets
            if where == namespace and selector and selector.items() <= labels.items()
        ]

    for service in _of(resources, RAYSERVICE):
        namespace = (service.props.get("metadata") or {}).get("namespace")
        cluster = _cluster(service)
        head = cluster.get("headGroupSpec") or {}
        head_labels = _template_labels(head) | {NODE_TYPE_LABEL: "head"}
        annotations = ((head.get("template") or {}).get("metadata") or {}).get("annotations") or {}
        held = any(_holds(spec, 1) for spec in guarding(namespace, head_labels))
        if not held and annotations.get(SAFE_TO_EVICT) != "false":
            yield (
                f"{service.name}: its head has neither a PodDisruptionBudget nor safe-to-evict "
                "'false'; a system-pool upgrade or scale-down evicts it at once"
            )
        for group in cluster.get("workerGroupSpecs") or []:
            minimum = int(group.get("minReplicas") or 0)
            if minimum < 1:
                continue
            labels = _template_labels(group) | {
                NODE_TYPE_LABEL: "worker",
                GROUP_LABEL: str(group.get("groupName")),
            }
            if not any(_holds(spec, minimum) for spec in guarding(namespace, labels)):
                yield (
                    f"{service.name}: worker group {group.get('groupName')} has no "
                    f"PodDisruptionBudget keeping its {minimum} minimum pod(s); a node upgrade "
                    "evicts a serving pod at once"
                )


def _holds(spec: Mapping[str, Any], pods: int) -> bool:
    if "minAvailable" in spec:
        return int(spec["minAvailable"]) >= pods
    return "maxUnavailable" in spec and int(spec["maxUnavailable"]) == 0


# --- grace fits the notice ----------------------------------------------------------------


def _notice_s(pool: Mapping[str, Any]) -> int | None:
    """The seconds a pod on this pool gets when the node is reclaimed; None where nodes are only
    drained (any grace is honoured)."""
    node = pool.get("nodeConfig") or {}
    if not (node.get("spot") or node.get("preemptible")):
        return None
    kubelet = node.get("kubeletConfig") or {}
    total = kubelet.get("shutdownGracePeriodSeconds")
    if total is None:
        return SPOT_POD_NOTICE_S
    critical = kubelet.get("shutdownGracePeriodCriticalPodsSeconds", SPOT_CRITICAL_PODS_S)
    return int(total) - int(critical)


def _grace_fits_notice(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    pools = _gpu_pools(resources)
    for service in _of(resources, RAYSERVICE):
        graces = []
        for group in _cluster(service).get("workerGroupSpecs") or []:
            pod = _pod(group)
            grace = int(pod.get("terminationGracePeriodSeconds", KUBERNETES_DEFAULT_GRACE_S))
            graces.append(grace)
            machine = _machine_selected(pod, None)
            notice = _notice_s(pools[machine]) if machine in pools else None
            if notice is not None and grace > notice:
                yield (
                    f"{service.name}: worker group {group.get('groupName')} asks "
                    f"{grace} s to stop, but a reclaimed {machine} node gives its pods {notice} s"
                )
        text = (service.props.get("spec") or {}).get("serveConfigV2") or ""
        for app in (yaml.safe_load(text) or {}).get("applications") or []:
            for role, llm in llm_configs_of(app.get("args") or {}):
                deployment = llm.get("deployment_config") or {}
                shutdown = float(
                    deployment.get("graceful_shutdown_timeout_s", SERVE_DEFAULT_SHUTDOWN_S)
                )
                if graces and shutdown >= min(graces):
                    yield (
                        f"{service.name} ({role}): Serve lets a stopping replica run "
                        f"{shutdown:g} s, but its pods are killed after {min(graces)} s"
                    )


# --- upgrades -----------------------------------------------------------------------------


def _stream_timeouts(resources: list[Any]) -> dict[str, float]:
    """The edge's timeout for each serve Service, from the model's Ingress."""
    found: dict[str, float] = {}
    for ingress in _of(resources, INGRESS):
        annotations = (ingress.props.get("metadata") or {}).get("annotations") or {}
        timeout = str(annotations.get("haproxy.org/timeout-server", "")).removesuffix("s")
        for rule in (ingress.props.get("spec") or {}).get("rules") or []:
            for path in (rule.get("http") or {}).get("paths") or []:
                backend = ((path.get("backend") or {}).get("service") or {}).get("name")
                if backend and timeout.isdigit():
                    found[str(backend)] = float(timeout)
    return found


def _deletion_delay(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    timeouts = _stream_timeouts(resources)
    floor = float(config.get("min_seconds", 600))
    for service in _of(resources, RAYSERVICE):
        spec = service.props.get("spec") or {}
        name = (service.props.get("metadata") or {}).get("name")
        longest = max(timeouts.get(f"{name}-serve-svc", floor), floor)
        delay = spec.get("rayClusterDeletionDelaySeconds")
        if delay is None or float(delay) < longest:
            yield (
                f"{service.name}: after an upgrade the old cluster is deleted after "
                f"{delay if delay is not None else 60} s, cutting streams that may run "
                f"{longest:g} s"
            )
        for threshold in DEPRECATED_THRESHOLDS:
            if threshold in spec:
                yield f"{service.name}: {threshold} is deprecated and ignored by KubeRay 1.7"


def _upgrade_room(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    pools = _gpu_pools(resources)
    peak: dict[str, int] = {}
    room: dict[str, int] = {}
    for service in _of(resources, RAYSERVICE):
        new_cluster = ((service.props.get("spec") or {}).get("upgradeStrategy") or {}).get("type")
        for group in _cluster(service).get("workerGroupSpecs") or []:
            machine = _machine_selected(_pod(group), None) or "no machine type"
            peak[machine] = peak.get(machine, 0) + int(group.get("maxReplicas") or 0)
            if new_cluster in (None, "NewCluster"):
                room[machine] = max(room.get(machine, 0), int(group.get("minReplicas") or 0))
    for machine, pods in peak.items():
        if machine not in pools:
            yield f"worker groups select {machine}, and the stack creates no pool for it"
            continue
        pool = pools[machine]
        autoscaling = pool.get("autoscaling") or {}
        ceiling = int(autoscaling.get("totalMaxNodeCount") or autoscaling.get("maxNodeCount") or 0)
        needed = pods + room.get(machine, 0)
        if ceiling < needed:
            yield (
                f"the {machine} pool scales to {ceiling} node(s); at peak its worker groups hold "
                f"{pods} and an upgrade's new cluster needs {room.get(machine, 0)} more"
            )
        node = pool.get("nodeConfig") or {}
        affinity = (node.get("reservationAffinity") or {}).get("consumeReservationType")
        if affinity == "SPECIFIC_RESERVATION":
            reserved = (node.get("resourceLabels") or {}).get(RESERVED_NODES_LABEL)
            if reserved is None or int(reserved) < ceiling + NODE_SURGE:
                yield (
                    f"the {machine} pool takes only its reservations, which hold "
                    f"{reserved or 'an unknown number of'} VMs, but may need {ceiling} nodes "
                    f"(upgrade room included) and {NODE_SURGE} surge node for a node upgrade"
                )


FAULT_POLICIES = [
    stack_policy(
        "stack-pod-fits-node",
        "Every pod (Ray heads with their autoscaler, GPU workers, the edge, the operator) "
        "requests no more than a node of the pool it selects can give.",
        "Size the pod from the catalog's allocatable (`servestack pools` shows each pod against "
        "its node), or choose a larger servestack:system_machine_type.",
        _pod_fits_node,
        severity=Severity.CRITICAL,
    ),
    stack_policy(
        "stack-rayservice-gcs-fault-tolerance",
        "Every RayService keeps its GCS state in the Redis the stack creates (AUTH on, private "
        "service access), its password read from a Secret.",
        "Deploy RayServices through servestack's LlmService, which wires "
        "gcsFaultToleranceOptions to the stack's GcsStore.",
        _gcs_fault_tolerance,
    ),
    stack_policy(
        "stack-rayservice-disruption-budgets",
        "Heads have a PodDisruptionBudget (or safe-to-evict 'false'); every GPU worker group "
        "with a minimum has a budget keeping that many pods.",
        "Register the budgets servestack's LlmService makes (infra/kube/disruption.py).",
        _disruption_budgets,
    ),
    stack_policy(
        "stack-rayservice-grace-fits-notice",
        "Worker pods ask no longer to stop than their node gives (Spot: 15 s unless the pool "
        "asks for more), and Serve's graceful shutdown ends inside that grace.",
        "Set terminationGracePeriodSeconds from the pool's notice and graceful_shutdown_timeout_s "
        "below it, or give the Spot pool servestack:gpu_pools.<type>.spot_shutdown_grace_s.",
        _grace_fits_notice,
    ),
    stack_policy(
        "stack-rayservice-cluster-deletion-delay",
        "After an upgrade the old Ray cluster outlives the longest stream (the edge's timeout); "
        "no deprecated unhealthy threshold is set.",
        "Set rayClusterDeletionDelaySeconds to at least servestack:stream_timeout_s and drop "
        "serviceUnhealthySecondThreshold and deploymentUnhealthySecondThreshold.",
        _deletion_delay,
        config={
            "min_seconds": {
                "type": "number",
                "minimum": 0,
                "default": 600,
                "description": "The shortest delay allowed, whatever the edge's timeout.",
            }
        },
    ),
    stack_policy(
        "stack-nodepool-upgrade-room",
        "GPU pools hold the worker groups at peak plus a RayService upgrade's new cluster, and "
        "a pool bound to specific reservations has them for that and a surge node.",
        "Let the stack size its pools from the plans, and reserve reserved_nodes VMs (or use "
        "reservation_affinity: any).",
        _upgrade_room,
    ),
]
