"""Pulumi components of the GKE platform, one per concern; each turns a spec from
`infra/platform/specs.py` or `infra/platform/pool_specs.py` into resources and decides nothing
itself."""

from infra.deploy.components.cluster import GkeCluster, GkeClusterArgs
from infra.deploy.components.edge_ingress import EdgeIngress, EdgeIngressArgs
from infra.deploy.components.identity import NodeServiceAccount, NodeServiceAccountArgs
from infra.deploy.components.kuberay import KubeRayOperator
from infra.deploy.components.llm_service import LlmService, LlmServiceArgs
from infra.deploy.components.network import GkeNetwork
from infra.deploy.components.node_pools import (
    GpuNodePool,
    GpuNodePoolArgs,
    SystemNodePool,
    SystemNodePoolArgs,
)
from infra.deploy.components.observability import Observability, ObservabilityArgs
from infra.deploy.components.serving_plane import ServingPlane, ServingPlaneArgs

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
