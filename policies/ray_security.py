"""Ray clusters no other pod can drive: token auth on every RayService, locked-down containers,
workers without the head's identity, and default-deny NetworkPolicies around every model."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import Severity

from policies.common import resource_policy, stack_policy
from policies.views import (
    NETWORK_POLICY,
    NetworkPolicyView,
    PodGroup,
    RayServiceView,
    rayservice,
    rayservices,
    views,
)
from serving.catalog.ray_ports import CONTROL_PORTS

OPERATOR_NAMESPACES = frozenset({"kuberay-system"})


def _groups(view: RayServiceView) -> list[PodGroup]:
    """The head and every worker group; a RayService without a head pod template cannot be
    judged (its view says which field is missing)."""
    view.head.containers  # noqa: B018 - fails closed before any group is judged
    return list(view.groups)


def _token_auth(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    view = rayservice(resource_type, name, props)
    if view is None:
        return
    _groups(view)
    if view.auth_mode != "token":
        yield f"{name}: Ray token auth is off: any pod that reaches the dashboard can run jobs"


def _pod_security(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    view = rayservice(resource_type, name, props)
    if view is None:
        return
    for group in _groups(view):
        pod_context = group.security_context
        for container in group.containers:
            context = container.security_context
            label = f"{name}: {group.where}, container {container.name}"
            if context.get("allowPrivilegeEscalation") is not False:
                yield f"{label} may escalate privileges (allowPrivilegeEscalation is not false)"
            if context.get("privileged"):
                yield f"{label} is privileged"
            if "ALL" not in ((context.get("capabilities") or {}).get("drop") or []):
                yield f"{label} keeps Linux capabilities (capabilities.drop lacks ALL)"
            seccomp = context.get("seccompProfile") or pod_context.get("seccompProfile") or {}
            if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
                yield f"{label} runs without a seccomp profile"
            if not (context.get("runAsNonRoot") or pod_context.get("runAsNonRoot")):
                yield f"{label} may run as root (runAsNonRoot is not true)"


def _worker_identity(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    view = rayservice(resource_type, name, props)
    if view is None:
        return
    _groups(view)
    head = view.head
    for container in head.containers:
        if "HF_TOKEN" in container.env:
            yield f"{name}: the head carries the Hugging Face token, and loads no weights"
    for group in view.worker_groups:
        if group.service_account in (None, "", head.service_account):
            yield (
                f"{name}: {group.where} runs as the head's service account, to which KubeRay "
                "binds its autoscaler's Role"
            )
        if group.automount_token is not False:
            yield f"{name}: {group.where} mounts a Kubernetes API token it does not need"


def _selects(policy: NetworkPolicyView, labels: Mapping[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in policy.match_labels.items())


def _admits_others(rule: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether an ingress rule admits pods other than the cluster's own and the operator."""
    sources = rule.get("from")
    if not sources:
        return True
    for source in sources:
        if "ipBlock" in source:
            return True
        namespace = (source.get("namespaceSelector") or {}).get("matchLabels")
        pods = (source.get("podSelector") or {}).get("matchLabels")
        if "namespaceSelector" in source:
            if namespace is None or namespace.get("kubernetes.io/metadata.name") not in (
                OPERATOR_NAMESPACES
            ):
                return True
        elif pods is None or any(labels.get(k) != v for k, v in pods.items()):
            return True
    return False


def _opens(rule: Mapping[str, Any], port: int) -> bool:
    ports = rule.get("ports")
    if not ports:
        return True
    for entry in ports:
        low = int(entry.get("port") or 0)
        high = int(entry.get("endPort") or low)
        if low <= port <= high:
            return True
    return False


def _network_policies(resources: list[Any], config: Mapping[str, Any]) -> Iterator[str]:
    policies: dict[str, list[NetworkPolicyView]] = {}
    for policy in views(resources, NETWORK_POLICY, NetworkPolicyView):
        policies.setdefault(str(policy.namespace), []).append(policy)
    for view in rayservices(resources):
        namespace = str(view.namespace)
        here = policies.get(namespace, [])
        if not any(
            p.pod_selector in ({}, None)
            and not p.ingress
            and {"Ingress", "Egress"} <= p.policy_types
            for p in here
        ):
            yield f"namespace {namespace} has no default-deny NetworkPolicy (ingress and egress)"
        for group in _groups(view):
            where, labels = group.where, group.labels
            selecting = [p for p in here if p.pod_selector and _selects(p, labels)]
            if not selecting:
                yield f"{view.name}: no NetworkPolicy selects the {where}'s pods"
            for policy in selecting:
                for rule in policy.ingress:
                    if not _admits_others(rule, labels):
                        continue
                    for what, control in CONTROL_PORTS.items():
                        if _opens(rule, control.port):
                            yield (
                                f"{view.name}: the {where}'s {what} port {control.port} is open to "
                                "pods outside its cluster"
                            )


RAY_SECURITY_POLICIES = [
    resource_policy(
        "platform-rayservice-token-auth",
        "Every RayService's cluster has Ray token auth on (authOptions.mode: token).",
        "Create RayServices with servestack's LlmService, which sets authOptions.",
        _token_auth,
        severity=Severity.CRITICAL,
    ),
    resource_policy(
        "platform-rayservice-pod-security",
        "Every Ray container runs non-root, without privilege escalation or capabilities, "
        "under a seccomp profile.",
        "Keep servestack's securityContexts (infra/kube/ray_security.py) on the head and workers.",
        _pod_security,
    ),
    resource_policy(
        "platform-rayservice-worker-identity",
        "Workers run as their own service account without an API token, and only they get the "
        "Hugging Face token.",
        "Keep servestack's worker service account (automountServiceAccountToken: false).",
        _worker_identity,
    ),
    stack_policy(
        "stack-rayservice-network-policies",
        "The serving namespace denies by default and no pod outside a Ray cluster reaches its "
        "GCS, dashboard or client port.",
        "Keep servestack's NetworkPolicies: default-deny plus one per model "
        "(infra/kube/ray_security.py).",
        _network_policies,
        severity=Severity.CRITICAL,
    ),
]
