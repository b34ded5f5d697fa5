"""Faults: what a stack needs to keep serving when a GKE GPU cluster does what it does — every
pod fits the node it selects, a lost head keeps its cluster (GCS fault tolerance on the stack's
Redis), node upgrades leave heads and the models' minimum workers up (disruption budgets), a
pod's grace fits its node's real notice, and an upgrade never cuts a stream. Whether the GPU
pools have room for upgrades and ask GKE for what it provisions is `policies.node_pools`.

Every check reads the resources as registered; the facts (allocatable per machine type, GKE's
Spot notice) come from serving's catalog and scheduling contract."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import Severity

from policies.common import stack_policy
from policies.pool_selection import gpu_pools, machine_selected, notice_s, selected, system_machine
from policies.views import (
    HELM_RELEASE,
    INGRESS,
    PDB,
    REDIS,
    SECRET,
    BudgetView,
    IngressView,
    KubernetesObject,
    RedisView,
    ReleaseView,
    class_pools,
    rayservices,
    views,
)
from serving.compile.scheduling import COMPUTE_CLASS_LABEL, misfit, requested

NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DEPRECATED_THRESHOLDS = ("serviceUnhealthySecondThreshold", "deploymentUnhealthySecondThreshold")


# --- every pod fits its node --------------------------------------------------------------


def _pod_fits_node(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    system = system_machine(resources)
    pods: list[tuple[str, Mapping[str, Any], list[Mapping[str, Any]]]] = []
    for service in rayservices(resources):
        pods.append(
            (f"{service.name} head", service.head.node_selector, service.head_pod_containers())
        )
        for group in service.worker_groups:
            pods.append(
                (f"{service.name} worker {group.name}", group.node_selector, group.raw_containers)
            )
    for release in views(resources, HELM_RELEASE, ReleaseView):
        for part in (release.values, release.controller):
            if part.get("resources") is not None and part.get("nodeSelector") is not None:
                pods.append((release.name, part.labels("nodeSelector"), [part.props]))
    steps = class_pools(resources)
    for name, selector, containers in pods:
        if COMPUTE_CLASS_LABEL in selector:
            chain = steps.get(str(selector[COMPUTE_CLASS_LABEL]), [])
            machines = list(dict.fromkeys(str(pool.machine_type) for pool in chain))
        else:
            machine = machine_selected(selector, system)
            machines = [machine] if machine is not None else []
        if not machines:
            yield f"{name} selects no pool of the stack, so its fit cannot be checked"
            continue
        for machine in machines:
            problem = misfit(name, requested(containers), machine)
            if problem is not None:
                yield problem


# --- a lost head keeps its cluster --------------------------------------------------------


def _gcs_fault_tolerance(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    stores = views(resources, REDIS, RedisView)
    secrets = {
        (secret.namespace, secret.object_name)
        for secret in views(resources, SECRET, KubernetesObject)
    }
    for store in stores:
        if store.auth_enabled is not True:
            yield f"{store.name}: the GCS Redis has AUTH off"
        if store.connect_mode != "PRIVATE_SERVICE_ACCESS":
            yield f"{store.name}: the GCS Redis is not reached through private service access"
    for service in rayservices(resources):
        options = service.gcs
        if options is None:
            yield (
                f"{service.name}: no GCS fault tolerance; a lost head makes KubeRay replace every "
                "worker, and every replica reloads its weights"
            )
            continue
        if not stores or not options.redis_address:
            yield f"{service.name}: GCS fault tolerance names no Redis the stack creates"
        secret = options.password_secret
        if options.password_by_value or not options.password_reference:
            yield f"{service.name}: the GCS Redis password is not read from a Secret"
        elif (service.namespace, secret) not in secrets:
            yield f"{service.name}: the Secret {secret} with the Redis password is missing"


# --- disruption budgets -------------------------------------------------------------------


def _disruption_budgets(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    budgets = views(resources, PDB, BudgetView)

    def guarding(namespace: Any, labels: dict[str, str]) -> list[BudgetView]:
        return [
            budget
            for budget in budgets
            if budget.namespace == namespace
            and (selector := budget.match_labels)
            and selector.items() <= labels.items()
        ]

    for service in rayservices(resources):
        head = service.head
        head_labels = head.labels | {NODE_TYPE_LABEL: "head"}
        held = any(budget.holds(1) for budget in guarding(service.namespace, head_labels))
        if not held and head.annotations.get(SAFE_TO_EVICT) != "false":
            yield (
                f"{service.name}: its head has neither a PodDisruptionBudget nor safe-to-evict "
                "'false'; a system-pool upgrade or scale-down evicts it at once"
            )
        for group in service.worker_groups:
            minimum = group.min_replicas
            if minimum < 1:
                continue
            labels = group.labels | {NODE_TYPE_LABEL: "worker", GROUP_LABEL: group.name}
            if not any(budget.holds(minimum) for budget in guarding(service.namespace, labels)):
                yield (
                    f"{service.name}: {group.where} has no "
                    f"PodDisruptionBudget keeping its {minimum} minimum pod(s); a node upgrade "
                    "evicts a serving pod at once"
                )


# --- grace fits the notice ----------------------------------------------------------------


def _grace_fits_notice(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    pools = gpu_pools(resources)
    for service in rayservices(resources):
        graces = []
        for group in service.worker_groups:
            grace = group.grace_s
            graces.append(grace)
            machine = selected(group.node_selector)
            notice = notice_s(pools[machine]) if machine in pools else None
            if notice is not None and grace > notice:
                yield (
                    f"{service.name}: {group.where} asks "
                    f"{grace} s to stop, but a reclaimed {machine} node gives its pods {notice} s"
                )
        for deployment in service.deployments:
            shutdown = deployment.shutdown_s
            if graces and shutdown >= min(graces):
                yield (
                    f"{service.name} ({deployment.role}): Serve lets a stopping replica run "
                    f"{shutdown:g} s, but its pods are killed after {min(graces)} s"
                )


# --- upgrades -----------------------------------------------------------------------------


def _stream_timeouts(resources: list[Any]) -> dict[str, float]:
    """The edge's timeout for each serve Service, from the model's Ingress."""
    found: dict[str, float] = {}
    for ingress in views(resources, INGRESS, IngressView):
        timeout = str(ingress.annotations.get("haproxy.org/timeout-server", "")).removesuffix("s")
        for backend in ingress.backends:
            if timeout.isdigit():
                found[backend] = float(timeout)
    return found


def _deletion_delay(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    timeouts = _stream_timeouts(resources)
    floor = float(config.get("min_seconds", 600))
    for service in rayservices(resources):
        longest = max(timeouts.get(f"{service.object_name}-serve-svc", floor), floor)
        delay = service.deletion_delay
        if delay is None or float(delay) < longest:
            yield (
                f"{service.name}: after an upgrade the old cluster is deleted after "
                f"{delay if delay is not None else 60} s, cutting streams that may run "
                f"{longest:g} s"
            )
        for threshold in DEPRECATED_THRESHOLDS:
            if service.sets(threshold):
                yield f"{service.name}: {threshold} is deprecated and ignored by KubeRay 1.7"


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
]
