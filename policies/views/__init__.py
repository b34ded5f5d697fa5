"""The one reader of the resources the analyzer hands the pack (camelCase inputs): views of a
RayService (its Ray cluster, pods, containers and env, the compiled Serve config and its LLM
deployments, the profile annotation), of GKE clusters and node pools, and of the Kubernetes
objects around a model. Policies read resources only through these views.

One fail-closed behaviour: a resource missing what a policy needs raises `UnreadableError`
naming the resource and the field, which the pack reports as a violation. One parse per run:
a resource's view is built once however many policies judge it, and the planner's verdicts on
a deployment are computed once for every rule that asks (`verdicts`)."""

from policies.views.base import (
    CLUSTER,
    CONFIGMAP,
    HELM_RELEASE,
    INGRESS,
    NETWORK_POLICY,
    NODE_POOL,
    PDB,
    RAYSERVICE,
    REDIS,
    SECRET,
    UnreadableError,
    forget,
    of,
)
from policies.views.pods import (
    KUBERNETES_DEFAULT_GRACE_S,
    Container,
    PodGroup,
    WorkerGroup,
    every_container,
)
from policies.views.rayservice import (
    GcsOptions,
    RayServiceView,
    deployments_of,
    rayservice,
    rayservices,
)
from policies.views.resources import (
    BudgetView,
    ClusterView,
    ConfigMapView,
    IngressView,
    KubernetesObject,
    NetworkPolicyView,
    NodePoolView,
    RedisView,
    ReleaseView,
    class_pools,
    gpu_pools_by_machine,
    view,
    views,
)
from policies.views.serve_config import Deployment
from policies.views.verdicts import judge, planner_verdicts, spec_for

__all__ = [
    "CLUSTER",
    "CONFIGMAP",
    "HELM_RELEASE",
    "INGRESS",
    "KUBERNETES_DEFAULT_GRACE_S",
    "NETWORK_POLICY",
    "NODE_POOL",
    "PDB",
    "RAYSERVICE",
    "REDIS",
    "SECRET",
    "BudgetView",
    "ClusterView",
    "ConfigMapView",
    "Container",
    "Deployment",
    "GcsOptions",
    "IngressView",
    "KubernetesObject",
    "NetworkPolicyView",
    "NodePoolView",
    "PodGroup",
    "RayServiceView",
    "RedisView",
    "ReleaseView",
    "UnreadableError",
    "WorkerGroup",
    "class_pools",
    "deployments_of",
    "every_container",
    "forget",
    "gpu_pools_by_machine",
    "judge",
    "of",
    "planner_verdicts",
    "rayservice",
    "rayservices",
    "spec_for",
    "view",
    "views",
]
