"""Pulumi components of the GKE platform, one per concern; each turns a spec from
`infra/platform.py` into resources and decides nothing itself."""

from infra.components.cluster import GkeCluster, GkeClusterArgs
from infra.components.identity import NodeServiceAccount, NodeServiceAccountArgs
from infra.components.network import GkeNetwork
from infra.components.node_pools import (
    GpuNodePool,
    GpuNodePoolArgs,
    SystemNodePool,
    SystemNodePoolArgs,
)

__all__ = [
    "GkeCluster",
    "GkeClusterArgs",
    "GkeNetwork",
    "GpuNodePool",
    "GpuNodePoolArgs",
    "NodeServiceAccount",
    "NodeServiceAccountArgs",
    "SystemNodePool",
    "SystemNodePoolArgs",
]
