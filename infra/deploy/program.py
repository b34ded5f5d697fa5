"""The composition of one stack's resources: the network, the cluster and its identity, the node
pools, the GCS store, the serving plane and observability, each a component built from the
stack's platform plan (`infra.platform.plan.plan_platform`) and its compiled models. The Pulumi
program (`infra/__main__.py`) and the offline preview run it."""

from __future__ import annotations

import pulumi

from infra.deploy.components import (
    GkeCluster,
    GkeClusterArgs,
    GkeNetwork,
    GpuNodePool,
    GpuNodePoolArgs,
    NodeServiceAccount,
    NodeServiceAccountArgs,
    Observability,
    ObservabilityArgs,
    ServingPlane,
    ServingPlaneArgs,
    SystemNodePool,
    SystemNodePoolArgs,
)
from infra.deploy.components.gcs_store import GcsStore, GcsStoreArgs
from infra.platform.config import ServingSecrets, Stack
from infra.platform.plan import PlatformPlan
from serving.compile.scheduling import MACHINE_TYPE_LABEL

PREFIX = "servestack"


def build(stack: Stack, platform: PlatformPlan, secrets: ServingSecrets) -> None:
    network = GkeNetwork(f"{PREFIX}-network", platform.network)
    account = NodeServiceAccountArgs(
        project=platform.cluster.project, account_id=platform.node_service_account_id
    )
    nodes = NodeServiceAccount(f"{PREFIX}-nodes", account)
    cluster = GkeCluster(
        f"{PREFIX}-gke",
        GkeClusterArgs(
            spec=platform.cluster,
            network_id=network.network_id,
            subnetwork_id=network.subnetwork_id,
            pods_range_name=network.pods_range_name,
            services_range_name=network.services_range_name,
            control_plane_cidr=network.control_plane_cidr,
            node_service_account=nodes.email,
        ),
    )
    system_pool = SystemNodePool(
        f"{PREFIX}-system",
        SystemNodePoolArgs(
            spec=platform.system_pool,
            cluster_id=cluster.cluster_id,
            cluster_location=cluster.location,
            service_account=nodes.email,
        ),
    )
    gpu_pools = {
        spec.pool_key: GpuNodePool(
            f"{PREFIX}-{spec.pool_key}",
            GpuNodePoolArgs(
                spec=spec,
                cluster_id=cluster.cluster_id,
                cluster_location=cluster.location,
                service_account=nodes.email,
            ),
        )
        for spec in platform.gpu_pools
    }
    config = stack.config
    gcs = GcsStore(
        f"{PREFIX}-gcs",
        GcsStoreArgs(
            project=platform.cluster.project, region=platform.cluster.region,
            network_id=network.network_id, tier=config.gcs_redis_tier,
            memory_gb=config.gcs_redis_memory_gb,
        ),
    )  # fmt: skip
    serving = ServingPlane(
        f"{PREFIX}-serving",
        ServingPlaneArgs(
            objects=platform.objects, compute_classes=platform.compute_classes,
            project=platform.cluster.project, config=config,
            secrets=secrets, kubeconfig=cluster.kubeconfig, gcs_address=gcs.address,
            gcs_auth=gcs.auth_string, gcs_ca_certificate=gcs.ca_certificate,
        ),
        pulumi.ResourceOptions(depends_on=[system_pool, *gpu_pools.values()]),
    )  # fmt: skip
    observability = Observability(
        f"{PREFIX}-observability",
        ObservabilityArgs(
            stack=stack.name, project=platform.cluster.project, models=platform.models,
            gpu_pools=platform.gpu_pools, config=stack.config, provider=serving.provider,
        ),
        pulumi.ResourceOptions(depends_on=[serving]),
    )  # fmt: skip
    pulumi.export("cluster_name", cluster.cluster_name)
    pulumi.export("cluster_endpoint", cluster.endpoint)
    pulumi.export("kubeconfig", cluster.kubeconfig)
    pulumi.export("system_node_pool", system_pool.pool_name)
    pulumi.export("gpu_node_pools", {name: pool.pool_name for name, pool in gpu_pools.items()})
    pulumi.export("machine_type_label", MACHINE_TYPE_LABEL)
    pulumi.export("rayservices", serving.rayservices)
    pulumi.export("dashboard", observability.dashboard_id)
