"""What keeps a model serving through the faults a GKE GPU cluster meets: a lost head, a node
drained for an upgrade, a Spot node reclaimed, a RayService upgrade.

- GCS fault tolerance: every RayService keeps its GCS state in the stack's Memorystore for
  Redis (KubeRay's `gcsFaultToleranceOptions`), so a new head finds the cluster's actors and
  KubeRay keeps the workers and their loaded weights instead of replacing them all.
- Disruption budgets: a head is never evicted while it is the only one, and the GPU workers
  of the models' `min_replicas` are never evicted at once by a node upgrade.
- Notice: a pod's termination grace is what its node really gives (GKE's Spot preemption
  gives non-system pods 15 s), and Ray Serve's graceful shutdown fits inside it.
- Upgrades: the old Ray cluster outlives the longest stream it may be serving.

Manifests only: `infra/kube/manifests.py` puts these pieces into the RayService, the Pulumi
components register the objects beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from infra.kube.ray_security import MODEL_LABEL
from serving.catalog.environment import RAY_REDIS_CA_CERT, RAY_SERVE_HAPROXY_HARD_STOP_AFTER_S

# Where a model's weights are cached between pod restarts: in the pod, or on the node.
WeightsCache = Literal["pod", "node"]

# Memorystore for Redis with in-transit encryption listens on 6378 with TLS; Ray's GCS client
# turns TLS on for a `rediss://` address and checks the server against RAY_REDIS_CA_CERT.
GCS_REDIS_TLS_PORT = 6378
GCS_PASSWORD_SECRET = "gcs-redis-auth"
GCS_PASSWORD_KEY = "password"
GCS_CA_CONFIGMAP = "gcs-redis-ca"
GCS_CA_KEY = "ca.crt"
GCS_CA_MOUNT = "/etc/servestack/gcs-redis"
# What `servestack render` writes where the program puts the Memorystore instance's address,
# known only once Pulumi has created it.
GCS_ADDRESS_UNRESOLVED = f"rediss://memorystore-host-from-pulumi:{GCS_REDIS_TLS_PORT}"

# The pod label that ties a model's Ray pods to its disruption budgets (every Ray pod carries
# it); KubeRay labels each pod with its node type (head or worker) and worker group itself.
RAYSERVICE_LABEL = MODEL_LABEL
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAY_GROUP_LABEL = "ray.io/group"
# The cluster autoscaler never removes a node holding a pod with this annotation set to "false".
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"

# Ray needs a few seconds after Serve's replicas have stopped to take the node's processes down.
RAY_STOP_S = 3
# Time for a replica's in-flight answers to end after Serve stops routing to it, on nodes that
# are drained, not reclaimed (upgrades, scale-down): the longest stream plus Ray's own exit.
DRAIN_MARGIN_S = 30


@dataclass(frozen=True)
class Resilience:
    """The stack's answers to faults, as the RayService manifests need them."""

    gcs_address: Any = GCS_ADDRESS_UNRESOLVED  # str, or pulumi.Output[str] in the program
    gcs_tls: bool = True
    stream_timeout_s: int = 600
    # Termination grace per GPU machine type; a type not listed is drained, never reclaimed.
    notice_s: Mapping[str, int] = field(default_factory=dict)
    weights_cache: WeightsCache = "pod"

    def pod_grace_s(self, machine_type: str) -> int:
        """The worker pod's terminationGracePeriodSeconds on this machine type's pool."""
        return self.notice_s.get(machine_type, self.stream_timeout_s + DRAIN_MARGIN_S)

    def serve_shutdown_s(self, machine_types: list[str]) -> int:
        """Ray Serve's graceful_shutdown_timeout_s for a model on these pools: the time its
        replicas' streams get to end, inside the shortest notice any of its pods gets."""
        grace = min((self.pod_grace_s(m) for m in machine_types), default=self.stream_timeout_s)
        return max(1, grace - RAY_STOP_S)

    @property
    def haproxy_hard_stop_s(self) -> int:
        """How long an HAProxy process replaced by a reload may finish its connections. Ray
        Serve 2.56 reloads HAProxy on every replica added or removed and hard-stops the old
        process after RAY_SERVE_HAPROXY_HARD_STOP_AFTER_S (120 s by default), cutting any
        longer stream (ray-project/ray#66056): here, the longest stream and a margin."""
        return self.stream_timeout_s + DRAIN_MARGIN_S

    @property
    def cluster_deletion_delay_s(self) -> int:
        """KubeRay deletes the old cluster this long after the new one takes traffic (its own
        default is 60 s): long enough for the longest stream the old one still serves."""
        return self.stream_timeout_s + DRAIN_MARGIN_S


# --- the head -----------------------------------------------------------------------------


def gcs_fault_tolerance() -> dict[str, Any]:
    """KubeRay's `gcsFaultToleranceOptions` minus the address: the password from the Secret the
    stack makes of Memorystore's AUTH string, never a value in the manifest."""
    return {
        "redisPassword": {
            "valueFrom": {"secretKeyRef": {"name": GCS_PASSWORD_SECRET, "key": GCS_PASSWORD_KEY}}
        }
    }


def gcs_tls_pieces(
    resilience: Resilience,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts, env) that let the head's GCS check Memorystore's server certificate."""
    if not resilience.gcs_tls:
        return [], [], []
    return (
        [{"name": "gcs-redis-ca", "configMap": {"name": GCS_CA_CONFIGMAP}}],
        [{"name": "gcs-redis-ca", "mountPath": GCS_CA_MOUNT, "readOnly": True}],
        [{"name": RAY_REDIS_CA_CERT, "value": f"{GCS_CA_MOUNT}/{GCS_CA_KEY}"}],
    )


def haproxy_env(resilience: Resilience) -> list[dict[str, Any]]:
    """For every Ray container: HAProxy runs wherever Serve runs a proxy (head and workers)."""
    return [
        {"name": RAY_SERVE_HAPROXY_HARD_STOP_AFTER_S, "value": str(resilience.haproxy_hard_stop_s)}
    ]


def head_annotations() -> dict[str, str]:
    # The autoscaler would otherwise move the head to empty a system node; with GCS fault
    # tolerance that costs a reconnect, without it every replica.
    return {SAFE_TO_EVICT: "false"}


# --- disruption budgets ----------------------------------------------------------------------


def disruption_budgets(
    name: str, namespace: str, worker_minimums: Mapping[str, int]
) -> list[dict[str, Any]]:
    """PodDisruptionBudgets for one model: its head, and each worker group holding at least one
    pod at the model's minimum replicas (a group that may scale to zero needs none).

    A budget holds back voluntary evictions only (node upgrades, drains, the autoscaler); a
    Spot preemption does not ask. During a RayService upgrade two heads exist, so one of them
    may go."""
    budgets = [
        _budget(f"{name}-head", namespace, {RAYSERVICE_LABEL: name, RAY_NODE_TYPE_LABEL: "head"}, 1)
    ]
    for group, minimum in worker_minimums.items():
        if minimum > 0:
            selector = {RAYSERVICE_LABEL: name, RAY_GROUP_LABEL: group}
            budgets.append(_budget(f"{name}-{group}", namespace, selector, minimum))
    return budgets


def _budget(
    name: str, namespace: str, labels: dict[str, str], min_available: int
) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": labels}},
    }


# --- the worker's drain ----------------------------------------------------------------------

# Before the kubelet stops a worker pod (a drain, a scale-down, a Spot preemption), tell Ray
# the node is going: Serve then starts the node's replicas elsewhere and stops these ones
# gracefully (it migrates replicas off draining nodes), instead of losing them with the pod.
# Ray's `drain-node` defaults to the node it runs on.
DRAIN_REASON = "DRAIN_NODE_REASON_PREEMPTION"
_WAIT_FOR_REPLICAS = """\
import time
import ray
from ray.util.state import list_actors
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
node = ray.get_runtime_context().get_node_id()
deadline = time.monotonic() + {wait_s}
while time.monotonic() < deadline:
    alive = list_actors(filters=[("node_id", "=", node), ("state", "=", "ALIVE")], limit=10000)
    if not any(actor.class_name.startswith("ServeReplica") for actor in alive):
        break
    time.sleep(1)
"""


def drain_command(grace_s: int) -> list[str]:
    """The worker container's preStop: drain this Ray node, then wait (within the pod's grace,
    less Ray's own exit) until no Serve replica is left on it."""
    wait_s = max(1, grace_s - RAY_STOP_S)
    return [
        "/bin/sh",
        "-c",
        f"ray drain-node --reason {DRAIN_REASON} --reason-message 'pod terminating' "
        f"--deadline-remaining-seconds {grace_s} || true; "
        f"python -c '{wait_script(wait_s)}' || true",
    ]


def wait_script(wait_s: int) -> str:
    return _WAIT_FOR_REPLICAS.format(wait_s=wait_s)
