"""Ray clusters no other pod can drive: token auth on every RayService, locked-down containers,
workers without the head's identity, and default-deny NetworkPolicies around every model."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy import Severity

from policies.common import resource_policy, stack_policy
from policies.views import RAYSERVICE, UnreadableError
from serving.catalog.ray_ports import CONTROL_PORTS

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
OPERATOR_NAMESPACES = frozenset({"kuberay-system"})


def _cluster(name: str, props: Mapping[str, Any]) -> Mapping[str, Any]:
    try:
        cluster: Mapping[str, Any] = props["spec"]["rayClusterConfig"]
        cluster["headGroupSpec"]["template"]["spec"]["containers"]
    except (KeyError, TypeError):
        raise UnreadableError("it has no rayClusterConfig with a head pod template") from None
    return cluster


def _groups(cluster: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield "head", cluster["headGroupSpec"]
    for group in cluster.get("workerGroupSpecs") or []:
        yield f"worker group {group.get('groupName')}", group


def _token_auth(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type != RAYSERVICE:
        return
    options = _cluster(name, props).get("authOptions") or {}
    if options.get("mode", "token" if options else None) != "token":
        yield f"{name}: Ray token auth is off: any pod that reaches the dashboard can run jobs"


def _pod_security(
    resource_type: str, name: str, props: Mapping[str, Any], config: Mapping[str, Any]
) -> Iterator[str]:
    if resource_type != RAYSERVICE:
        return
    for where, group in _groups(_cluster(name, props)):
        pod = (group.get("template") or {}).get("spec") or {}
        pod_context = pod.get("securityContext") or {}
        for container in pod.get("containers") or []:
            context = container.get("securityContext") or {}
            label = f"{name}: {where}, container {container.get('name')}"
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
    if resource_type != RAYSERVICE:
        return
    cluster = _cluster(name, props)
    head = cluster["headGroupSpec"]["template"]["spec"]
    for container in head.get("containers") or []:
        if any(e.get("name") == "HF_TOKEN" for e in container.get("env") or []):
            yield f"{name}: the head carries the Hugging Face token, and loads no weights"
    for where, group in _groups(cluster):
        if where == "head":
            continue
        pod = (group.get("template") or {}).get("spec") or {}
        if pod.get("serviceAccountName") in (None, "", head.get("serviceAccountName")):
            yield (
                f"{name}: {where} runs as the head's service account, to which KubeRay binds "
                "its autoscaler's Role"
            )
        if pod.get("automountServiceAccountToken") is not False:
            yield f"{name}: {where} mounts a Kubernetes API token it does not need"


def _selects(policy: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    wanted = (policy.get("podSelector") or {}).get("matchLabels") or {}
    return all(labels.get(key) == value for key, value in wanted.items())


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
    policies: dict[str, list[Mapping[str, Any]]] = {}
    for resource in resources:
        if resource.resource_type == NETWORK_POLICY:
            metadata = resource.props.get("metadata") or {}
            policies.setdefault(str(metadata.get("namespace")), []).append(
                resource.props.get("spec") or {}
            )
    for resource in resources:
        if resource.resource_type != RAYSERVICE:
            continue
        namespace = str((resource.props.get("metadata") or {}).get("namespace"))
        here = policies.get(namespace, [])
        if not any(
            p.get("podSelector") in ({}, None)
            and not p.get("ingress")
            and {"Ingress", "Egress"} <= set(p.get("policyTypes") or [])
            for p in here
        ):
            yield f"namespace {namespace} has no default-deny NetworkPolicy (ingress and egress)"
        cluster = _cluster(resource.name, resource.props)
        for where, group in _groups(cluster):
            labels = ((group.get("template") or {}).get("metadata") or {}).get("labels") or {}
            selecting = [p for p in here if p.get("podSelector") and _selects(p, labels)]
            if not selecting:
                yield f"{resource.name}: no NetworkPolicy selects the {where}'s pods"
            for policy in selecting:
                for rule in policy.get("ingress") or []:
                    if not _admits_others(rule, labels):
                        continue
                    for what, port in ((what, p.port) for what, p in CONTROL_PORTS.items()):
                        if _opens(rule, port):
                            yield (
                                f"{resource.name}: the {where}'s {what} port {port} is open to "
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
