"""Pulumi components of the GKE platform, one per concern; each turns a spec from
`infra/platform_specs.py` into resources and decides nothing itself."""

from infra.components.cluster import GkeCluster, GkeClusterArgs
from infra.components.edge_ingress import EdgeIngress, EdgeIngressArgs
from infra.components.identity import NodeServiceAccount, NodeServiceAccountArgs
from infra.components.kuberay import KubeRayOperator
from infra.components.llm_service import LlmService, LlmServiceArgs
from infra.components.network import GkeNetwork
from infra.components.node_pools import (
    GpuNodePool,
    GpuNodePoolArgs,
    SystemNodePool,
    SystemNodePoolArgs,
)
from infra.components.observability import Observability, ObservabilityArgs
from infra.components.serving_plane import ServingPlane, ServingPlaneArgs

__all__ = [
    "EdgeIngress",
    "EdgeIngressArgs",
    "GkeCluster",
    "GkeClusterArgs",
    "GkeNetwork",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "KubeRayOperator",
    "LlmService",
    "LlmServiceArgs",
    "NodeServiceAccount",
    "NodeServiceAccountArgs",
    "Observability",
    "ObservabilityArgs",
    "ServingPlane",
    "ServingPlaneArgs",
    "SystemNodePool",
    "SystemNodePoolArgs",
]
