"""Platform: the cluster is private and its identities least-privileged, GPU nodes are kept for
GPU work, no credential sits in a container's plaintext environment, and the edge checks TLS
and API keys. Plus the stack-wide check that every worker group has a pool to run on."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from ipaddress import IPv4Network
from typing import Any

from pulumi_policy import Severity

from policies.common import resource_policy, stack_policy
from policies.edge import SNIPPET, snippet_gate_faults
from policies.pool_selection import unlabelled_gpu_pools
from policies.views import (
    CLUSTER,
    INGRESS,
    NODE_POOL,
    ClusterView,
    IngressView,
    NodePoolView,
    UnreadableError,
    class_pools,
    every_container,
    gpu_pools_by_machine,
    rayservices,
    view,
)
from serving.compile.scheduling import GPU_TAINT_EFFECT, GPU_TAINT_KEY
from serving.spec.exposure import (
    PUBLIC_CONTROL_PLANE_ALLOWED,
    PUBLIC_CONTROL_PLANE_LABEL,
    SMALLEST_AUTHORIZED_PREFIX,
    too_wide,
)
from serving.spec.secrets import credential_in, looks_secret


def _private_nodes(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type == CLUSTER and view(ClusterView, name, props).private_nodes is not True:
        yield f"{name}: nodes have public IP addresses (enablePrivateNodes is not true)"


def _workload_identity(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type == CLUSTER and not view(ClusterView, name, props).workload_pool:
        yield f"{name}: Workload Identity is off, so pods would borrow the node's credentials"


def _shielded_nodes(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type == CLUSTER and view(ClusterView, name, props).shielded_nodes is not True:
        yield f"{name}: shielded nodes are off (enableShieldedNodes)"


def _secrets_encryption(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type != CLUSTER:
        return
    cluster = view(ClusterView, name, props)
    if cluster.encryption_state != "ENCRYPTED" or not cluster.encryption_key:
        yield f"{name}: Secrets are not encrypted with a Cloud KMS key (databaseEncryption)"


def _binary_authorization(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type != CLUSTER:
        return
    mode = view(ClusterView, name, props).binary_authorization_mode
    if mode != "PROJECT_SINGLETON_POLICY_ENFORCE":
        yield f"{name}: Binary Authorization does not vet the cluster's images (mode {mode})"


def _authorized_networks(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type != CLUSTER:
        return
    smallest_prefix = int(config.get("min_prefix_length", SMALLEST_AUTHORIZED_PREFIX))
    cluster = view(ClusterView, name, props)
    labels = cluster.resource_labels
    public_by_choice = labels.get(PUBLIC_CONTROL_PLANE_LABEL) == PUBLIC_CONTROL_PLANE_ALLOWED
    authorized = cluster.authorized_networks
    if authorized is None and cluster.private_endpoint is not True:
        # Without the config, GKE's public endpoint answers every address.
        yield f"{name}: the control plane's public endpoint has no authorized networks"
        return
    if public_by_choice:
        # The stack set allow_public_control_plane, which the program's pre-checks require for
        # exactly the blocks judged here: the same rule, the same answer.
        return
    try:
        networks = [IPv4Network(block, strict=False) for block in authorized or []]
    except ValueError as exc:
        raise UnreadableError(
            name, "masterAuthorizedNetworksConfig.cidrBlocks", f"holds no CIDR block ({exc})"
        ) from None
    for network in too_wide(networks, smallest_prefix):
        yield (
            f"{name}: the control plane answers {network} (a /{network.prefixlen}); this "
            f"policy allows blocks of /{smallest_prefix} or smaller, unless the stack sets "
            "allow_public_control_plane"
        )


def _gpu_taint(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type != NODE_POOL:
        return
    pool = view(NodePoolView, name, props)
    if not pool.has_gpus:
        return
    if not any(
        t.get("key") == GPU_TAINT_KEY and t.get("effect") == GPU_TAINT_EFFECT for t in pool.taints
    ):
        yield (
            f"{name}: GPU nodes without the {GPU_TAINT_KEY} NoSchedule taint take any pod, and "
            "a stray pod can hold a node the autoscaler would otherwise release"
        )


def _no_plaintext_secret(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    for container in every_container(props):
        for variable in container.get("env") or []:
            if "value" not in variable:
                continue
            variable_name = str(variable.get("name", ""))
            what = credential_in(str(variable.get("value") or ""), variable_name)
            if looks_secret(variable_name) or what is not None:
                yield (
                    f"{name}: container {container.get('name')} carries "
                    f"{variable_name} as a plaintext value"
                    + (f" that looks like {what}" if what else "")
                )


def _edge_tls_and_auth(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type != INGRESS:
        return
    annotations = view(IngressView, name, props).annotations
    if annotations.get("haproxy.org/ssl-redirect") != "true":
        yield f"{name}: plain HTTP is served (haproxy.org/ssl-redirect is not 'true')"
    faults, _ = snippet_gate_faults(str(annotations.get(SNIPPET, "")))
    yield from (f"{name}: {fault}" for fault in faults)


def _pool_for_every_group(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    yield from unlabelled_gpu_pools(resources)
    pools = gpu_pools_by_machine(resources)
    steps = class_pools(resources)
    wanted: dict[str, int] = {}
    wanted_of_class: dict[str, int] = {}
    for service in rayservices(resources):
        for group in service.worker_groups:
            chain = group.compute_class
            if chain is not None:
                if chain not in steps:
                    yield (
                        f"{service.name}: worker group {group.name} selects ComputeClass "
                        f"{chain}, and the stack creates no node pool for it"
                    )
                    continue
                wanted_of_class[chain] = wanted_of_class.get(chain, 0) + group.max_replicas
                continue
            if group.machine is None or group.machine.name not in pools:
                selected = group.machine.name if group.machine else "no machine type"
                yield (
                    f"{service.name}: worker group {group.name} selects {selected}, and the "
                    "stack creates no node pool for it"
                )
                continue
            wanted[group.machine.name] = wanted.get(group.machine.name, 0) + group.max_replicas
    for machine, pods in wanted.items():
        ceiling = pools[machine].max_nodes
        if pods > ceiling:
            yield (
                f"the {machine} pool scales to {ceiling} node(s); its worker groups may ask for "
                f"{pods} (one pod per node)"
            )
    for chain, pods in wanted_of_class.items():
        # Any step may be the one with capacity: each holds the groups at peak.
        for pool in steps[chain]:
            if pods > pool.max_nodes:
                yield (
                    f"{pool.name}, a step of ComputeClass {chain}, scales to {pool.max_nodes} "
                    f"node(s); its worker groups may ask for {pods} (one pod per node)"
                )


PLATFORM_POLICIES = [
    resource_policy(
        "platform-cluster-private-nodes",
        "Cluster nodes have no public IP address.",
        "Create the cluster with GkeCluster (private nodes behind Cloud NAT).",
        _private_nodes,
    ),
    resource_policy(
        "platform-cluster-workload-identity",
        "Workload Identity is on, so pods never use the node's service account.",
        "Set workload_identity_config.workload_pool to <project>.svc.id.goog.",
        _workload_identity,
    ),
    resource_policy(
        "platform-cluster-shielded-nodes",
        "Shielded GKE nodes are on.",
        "Set enable_shielded_nodes: true on the cluster.",
        _shielded_nodes,
        severity=Severity.MEDIUM,
    ),
    resource_policy(
        "platform-cluster-authorized-networks",
        "The control plane is reachable only from narrow authorized networks, never 0.0.0.0/0, "
        "unless the stack chose a public control plane.",
        "List your own CIDR blocks in servestack:master_authorized_networks.",
        _authorized_networks,
        severity=Severity.CRITICAL,
        config={
            "min_prefix_length": {
                "type": "integer",
                "minimum": 0,
                "maximum": 32,
                "default": SMALLEST_AUTHORIZED_PREFIX,
                "description": "Shortest CIDR prefix an authorized network may have.",
            }
        },
    ),
    resource_policy(
        "platform-cluster-secrets-encryption",
        "The cluster encrypts Secrets at the application layer with a Cloud KMS key.",
        "Create the cluster with GkeCluster, which makes the key and grants GKE's agent on it.",
        _secrets_encryption,
    ),
    resource_policy(
        "platform-cluster-binary-authorization",
        "The cluster enforces the project's Binary Authorization policy.",
        "Keep servestack:binary_authorization: true, or switch this policy off in the stack's "
        "policy config together with it.",
        _binary_authorization,
    ),
    resource_policy(
        "platform-nodepool-gpu-taint",
        "GPU node pools carry the nvidia.com/gpu NoSchedule taint.",
        "Create GPU pools with GpuNodePool, which taints them.",
        _gpu_taint,
        severity=Severity.MEDIUM,
    ),
    resource_policy(
        "platform-pod-no-plaintext-secret",
        "No container carries a credential as a plaintext environment value.",
        "Put the value in a Kubernetes Secret made from a Pulumi secret and use "
        "valueFrom.secretKeyRef.",
        _no_plaintext_secret,
        severity=Severity.CRITICAL,
    ),
    resource_policy(
        "platform-ingress-tls-and-auth",
        "Every edge route redirects to TLS and denies a request without a valid Bearer key.",
        "Create routes with servestack's LlmService (ssl-redirect and the API-key check).",
        _edge_tls_and_auth,
        severity=Severity.CRITICAL,
    ),
    stack_policy(
        "stack-rayservice-pool-exists",
        "Every RayService worker group selects a node pool the stack creates, with enough "
        "max nodes for its max replicas.",
        "Let the stack derive its pools from the same profiles (one pool per machine type, "
        "sized from the plans), or raise the pool's maximum.",
        _pool_for_every_group,
    ),
]
