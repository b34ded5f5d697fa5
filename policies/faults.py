"""Faults: what a stack needs to keep serving when a GKE GPU cluster does what it does — every
pod fits the node it selects, a lost head keeps its cluster (GCS fault tolerance on the stack's
Redis), node upgrades leave heads and the models' minimum workers up (disruption budgets), a
pod's grace fits its node's real notice, and upgrades have room and never cut a stream.

Every check reads the resources as registered; the facts (allocatable per machine type, GKE's
Spot notice, the node-pool surge) come from serving's catalog and scheduling contract."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import Severity

from policies.common import stack_policy
from policies.views import (
    CLUSTER,
    HELM_RELEASE,
    INGRESS,
    NODE_POOL,
    PDB,
    REDIS,
    SECRET,
    BudgetView,
    ClusterView,
    IngressView,
    KubernetesObject,
    NodePoolView,
    RedisView,
    ReleaseView,
    class_pools,
    gpu_pools_by_machine,
    rayservices,
    spec_for,
    views,
)
from serving.catalog.consumption import (
    FLEX_START_MAX_RUN_S,
    compact_refusal,
    flex_start_refusal,
    run_limit_refusal,
)
from serving.compile.scheduling import (
    COMPUTE_CLASS_LABEL,
    MACHINE_TYPE_LABEL,
    NODE_SURGE,
    POOL_LABEL,
    RESERVED_NODES_LABEL,
    SPOT_POD_NOTICE_S,
    SYSTEM_POOL,
    misfit,
    requested,
)
from serving.plan.rules.step_holds_layout import step_cannot_hold

NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DEPRECATED_THRESHOLDS = ("serviceUnhealthySecondThreshold", "deploymentUnhealthySecondThreshold")


def _gpu_pools(resources: list[Any]) -> dict[str, NodePoolView]:
    """The pools a worker group may select, by what it selects: a machine type, or a
    ComputeClass (keyed `class <name>`), whose steps count as one pool that scales to the
    smallest of their maximums and gives the shortest of their notices."""
    pools: dict[str, NodePoolView] = dict(gpu_pools_by_machine(resources))
    for name, steps in class_pools(resources).items():
        pools[_class_key(name)] = min(steps, key=lambda pool: (pool.max_nodes, _notice_rank(pool)))
    return pools


def _class_key(name: str) -> str:
    return f"class {name}"


def _notice_rank(pool: NodePoolView) -> int:
    notice = _notice_s(pool)
    # A drained pool honours any grace: it ranks after every reclaimable one.
    return 2**31 if notice is None else notice


def _selected(selector: Mapping[str, Any]) -> str | None:
    """What a GPU worker group selects: its ComputeClass or its machine type."""
    if COMPUTE_CLASS_LABEL in selector:
        return _class_key(str(selector[COMPUTE_CLASS_LABEL]))
    return _machine_selected(selector, None)


def _system_machine(resources: list[Any]) -> str | None:
    for pool in views(resources, NODE_POOL, NodePoolView):
        if pool.pool_role == SYSTEM_POOL:
            return str(pool.machine_type)
    return None


def _machine_selected(selector: Mapping[str, Any], system: str | None) -> str | None:
    if MACHINE_TYPE_LABEL in selector:
        return str(selector[MACHINE_TYPE_LABEL])
    if selector.get(POOL_LABEL) == SYSTEM_POOL:
        return system
    return None


# --- every pod fits its node --------------------------------------------------------------


def _pod_fits_node(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    system = _system_machine(resources)
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
            machine = _machine_selected(selector, system)
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


def _notice_s(pool: NodePoolView) -> int | None:
    """The seconds a pod on this pool gets when the node is reclaimed; None where nodes are only
    drained (any grace is honoured)."""
    if not pool.reclaimable:
        return None
    total = pool.shutdown_grace_s
    if total is None:
        return SPOT_POD_NOTICE_S
    return total - pool.critical_pods_grace_s


def _grace_fits_notice(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    pools = _gpu_pools(resources)
    for service in rayservices(resources):
        graces = []
        for group in service.worker_groups:
            grace = group.grace_s
            graces.append(grace)
            machine = _selected(group.node_selector)
            notice = _notice_s(pools[machine]) if machine in pools else None
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


def _upgrade_room(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    pools = _gpu_pools(resources)
    peak: dict[str, int] = {}
    room: dict[str, int] = {}
    for service in rayservices(resources):
        new_cluster = service.upgrade_type
        for group in service.worker_groups:
            machine = _selected(group.node_selector) or "no machine type"
            peak[machine] = peak.get(machine, 0) + group.max_replicas
            if new_cluster in (None, "NewCluster"):
                room[machine] = max(room.get(machine, 0), group.min_replicas)
    for machine, pods in peak.items():
        if machine not in pools:
            yield f"worker groups select {machine}, and the stack creates no pool for it"
            continue
        pool = pools[machine]
        ceiling = pool.max_nodes
        needed = pods + room.get(machine, 0)
        if ceiling < needed:
            yield (
                f"the {machine} pool scales to {ceiling} node(s); at peak its worker groups hold "
                f"{pods} and an upgrade's new cluster needs {room.get(machine, 0)} more"
            )
        # A chain's reservation step overflows to its next step: it needs no upgrade room.
        if pool.reservation_affinity == "SPECIFIC_RESERVATION" and not pool.compute_class:
            reserved = pool.resource_labels.get(RESERVED_NODES_LABEL)
            if reserved is None or int(reserved) < ceiling + NODE_SURGE:
                yield (
                    f"the {machine} pool takes only its reservations, which hold "
                    f"{reserved or 'an unknown number of'} VMs, but may need {ceiling} nodes "
                    f"(upgrade room included) and {NODE_SURGE} surge node for a node upgrade"
                )


# --- consumption options GKE will provision -----------------------------------------------


def _consumption(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    exclusions = [
        exclusion
        for cluster in views(resources, CLUSTER, ClusterView)
        for exclusion in cluster.maintenance_exclusions
    ]
    for pool in views(resources, NODE_POOL, NodePoolView):
        machine = str(pool.machine_type)
        if pool.compact:
            refusal = compact_refusal(
                machine, zones=len(pool.zones), flex_start=pool.flex_start, queued=pool.queued
            )
            if refusal is not None:
                yield f"{pool.name}: {refusal}"
        if pool.flex_start:
            refusal = flex_start_refusal(
                machine,
                auto_repair=pool.auto_repair,
                reservation=(pool.reservation_affinity or "NO_RESERVATION") != "NO_RESERVATION",
                spot=pool.reclaimable,
            )
            if refusal is not None:
                yield f"{pool.name}: {refusal}"
            limit = pool.max_run_s or FLEX_START_MAX_RUN_S
            for name, window in exclusions:
                refusal = run_limit_refusal(machine, limit, name, window)
                if refusal is not None:
                    yield f"{pool.name}: {refusal}"
    steps = class_pools(resources)
    for service in rayservices(resources):
        for group in service.worker_groups:
            chain = group.compute_class
            if chain is None:
                continue
            for deployment in service.deployments:
                accelerator = spec_for(service, deployment).accelerator
                for pool in steps.get(chain, []):
                    refusal = step_cannot_hold(
                        str(pool.machine_type), accelerator,
                        tensor=deployment.layout.tensor, pod_gpus=group.gpus_per_pod,
                    )  # fmt: skip
                    if refusal is not None:
                        yield f"{service.name} ({deployment.role}): {pool.name}: {refusal}"


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
    stack_policy(
        "stack-nodepool-consumption",
        "Every GPU pool asks GKE for what it provisions: compact placement in one zone, never "
        "with queued provisioning and with flex-start only where GKE offers it; flex-start with "
        "auto-repair off, no reservation and no Spot, its run limit no shorter than a "
        "maintenance exclusion; every capacity step able to hold its workers.",
        "Let `servestack preview` build the pools from servestack:gpu_pools.<type>.capacity "
        "(the same rules refuse the stack there, naming the step and a fix).",
        _consumption,
    ),
]
