"""What keeps a model's Ray cluster driven only by its own pods, the edge and the operator: Ray
token auth, pinned ports that NetworkPolicies can name, a locked-down securityContext, a worker
identity of its own, and the serving namespace's default-deny policies.

Facts this rests on (read from the components' source):
- KubeRay 1.7.0 `authOptions: {mode: token}` (Ray >= 2.52) makes the operator create a Secret
  named after each RayCluster (key `auth_token`, 32 random bytes, owned by the cluster) and set
  `RAY_AUTH_MODE=token` and `RAY_AUTH_TOKEN` (a secretKeyRef) on the Ray container, the
  autoscaler sidecar and the wait-gcs-ready init container; the operator sends the token as
  `x-ray-authorization: Bearer` to the dashboard. Ray 2.56.1 leaves the health endpoints the
  probes and Serve use (`/api/healthz`, `/api/gcs_healthz`, `/api/local_raylet_healthz`,
  `/-/healthz`) open. A new RayCluster gets a new token; the old Secret goes with the old one.
- Ray's ports, pinned so NetworkPolicies can name them: serving.catalog.ray_ports.
- The rayproject images run as user `ray` (uid 1000, gid 100) and need no capability.
"""

from __future__ import annotations

import copy
from ipaddress import IPv4Network
from typing import Any

from serving.catalog.ray_ports import (
    CLUSTER_PORTS,
    DASHBOARD,
    METRICS,
    SERVE,
    SERVE_HAPROXY_METRICS,
    WORKERS,
    RayPort,
)

MODEL_LABEL = "servestack.io/model"
TOKEN_GENERATION_ANNOTATION = "servestack.io/ray-token-generation"
HF_TOKEN_VARIABLE = "HF_TOKEN"
RAY_UID = 1000
RAY_GID = 100
GMP_NAMESPACE = "gmp-system"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# GKE's metadata server, which Workload Identity and the GCS FUSE driver ask for credentials:
# 169.254.169.252:988 under Dataplane V2, 169.254.169.254:80 elsewhere.
METADATA_SERVER = (("169.254.169.252/32", 988), ("169.254.169.254/32", 80))


def start_params() -> dict[str, str]:
    """`ray start` flags pinning the ports Ray would otherwise choose at random."""
    params = {p.start_param: str(p.port) for p in CLUSTER_PORTS if p.start_param}
    params |= {"min-worker-port": str(WORKERS.port), "max-worker-port": str(WORKERS.end_port)}
    return params


def pod_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RAY_UID,
        "runAsGroup": RAY_GID,
        "fsGroup": RAY_GID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    # The image grants `ray` passwordless sudo; no_new_privs (allowPrivilegeEscalation) stops it.
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _harden_pod(group: dict[str, Any], model: str) -> dict[str, Any]:
    group["rayStartParams"] = start_params() | group.get("rayStartParams", {})
    template = group["template"]
    metadata = template.setdefault("metadata", {})
    metadata.setdefault("labels", {})[MODEL_LABEL] = model
    pod: dict[str, Any] = template["spec"]
    pod["securityContext"] = pod_security_context()
    for container in pod["containers"]:
        container["securityContext"] = container_security_context()
    return pod


def harden(
    rayservice: dict[str, Any], *, model: str, worker_account: str, token_generation: int = 0
) -> dict[str, Any]:
    """The RayService with token auth, pinned ports, securityContexts and the model's label on
    every pod; workers on their own service account without a token; the Hugging Face token
    only on the workers, which load the weights (the head runs no replica)."""
    hardened = copy.deepcopy(rayservice)
    cluster = hardened["spec"]["rayClusterConfig"]
    cluster["authOptions"] = {"mode": "token"}
    head = _harden_pod(cluster["headGroupSpec"], model)
    # A changed head template makes KubeRay bring up a new cluster, with a new token.
    annotations = cluster["headGroupSpec"]["template"]["metadata"].setdefault("annotations", {})
    annotations[TOKEN_GENERATION_ANNOTATION] = str(token_generation)
    for container in head["containers"]:
        container["env"] = [e for e in container.get("env", []) if e["name"] != HF_TOKEN_VARIABLE]
    for group in cluster.get("workerGroupSpecs", []):
        worker = _harden_pod(group, model)
        worker["serviceAccountName"] = worker_account
        worker["automountServiceAccountToken"] = False
    return hardened


# --- NetworkPolicies ----------------------------------------------------------------------------


def _ports(ports: tuple[RayPort, ...] | list[RayPort]) -> list[dict[str, Any]]:
    rendered = []
    for port in ports:
        entry: dict[str, Any] = {"protocol": "TCP", "port": port.port}
        if port.end_port is not None:
            entry["endPort"] = port.end_port
        rendered.append(entry)
    return rendered


def _namespace(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}


def default_deny(namespace: str) -> dict[str, Any]:
    """Nothing reaches or leaves a pod of the namespace unless another policy allows it."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny", "namespace": namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


def model_network_policy(
    model: str,
    namespace: str,
    *,
    edge_namespace: str,
    operator_namespace: str | None,
    cluster_ranges: list[IPv4Network],
) -> dict[str, Any]:
    """What one model's Ray pods may reach and be reached by: each other on Ray's ports; the
    edge on Serve's port; the KubeRay operator on the dashboard and Serve's health check;
    managed Prometheus on the metrics port. Out: each other, DNS, the metadata server, and
    HTTPS outside the cluster (Hugging Face, Cloud Storage, the Kubernetes API for the
    autoscaler)."""
    own = {"podSelector": {"matchLabels": {MODEL_LABEL: model}}}
    ingress: list[dict[str, Any]] = [
        {"from": [own], "ports": _ports(CLUSTER_PORTS)},
        {"from": [_namespace(edge_namespace)], "ports": _ports([SERVE])},
        {"from": [_namespace(GMP_NAMESPACE)], "ports": _ports([METRICS, SERVE_HAPROXY_METRICS])},
    ]
    # GKE's Ray add-on runs the operator where GKE chooses; the dashboard then stays open to
    # the cluster at the network level and closed by the token.
    operator = _namespace(operator_namespace) if operator_namespace else {"namespaceSelector": {}}
    ingress.append({"from": [operator], "ports": _ports([DASHBOARD, SERVE])})
    outside = {"ipBlock": {"cidr": "0.0.0.0/0", "except": [str(c) for c in cluster_ranges]}}
    egress: list[dict[str, Any]] = [
        {"to": [own], "ports": _ports(CLUSTER_PORTS)},
        {"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        *(
            {"to": [{"ipBlock": {"cidr": cidr}}], "ports": [{"protocol": "TCP", "port": port}]}
            for cidr, port in METADATA_SERVER
        ),
        {"to": [outside], "ports": [{"protocol": "TCP", "port": 443}]},
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{model}-ray", "namespace": namespace},
        "spec": {
            "podSelector": {"matchLabels": {MODEL_LABEL: model}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": egress,
        },
    }
