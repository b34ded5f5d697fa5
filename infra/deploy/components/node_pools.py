"""GpuNodePool and SystemNodePool: the nodes of the cluster, one pool per role.

A GPU pool holds the nodes of one machine type for every model planned onto it: the catalog
gives its accelerators, the plans its autoscaling bounds and whether it needs compact placement,
the stack how its nodes are obtained. The system pool holds the CPU pods: Ray heads, the
ingress, operators. Both run hardened nodes (shielded, Workload Identity metadata, a
least-privilege service account) and upgrade by surging, never by taking a serving node away.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.deploy.components.args import ComponentArgs
from infra.deploy.components.cluster import CLOUD_PLATFORM_SCOPE
from infra.platform.pool_specs import GpuPoolSpec, SystemPoolSpec
from serving.compile.scheduling import (
    COMPUTE_CLASS_LABEL,
    COMPUTE_CLASS_TAINT_EFFECT,
    GPU_POOL,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    MACHINE_TYPE_LABEL,
    NODE_SURGE,
    POOL_LABEL,
    RESERVATION_MACHINE_LABEL,
    RESERVATION_ZONE_LABEL,
    RESERVED_NODES_LABEL,
    SPOT_CRITICAL_PODS_S,
    SYSTEM_POOL,
)

StrInput = str | pulumi.Output[str]

# Room for a vLLM image (about 10 GB, more when image streaming falls back to a full pull) and
# its unpacked layers; model weights stream from GCS or sit on local SSD, not here.
GPU_BOOT_DISK_GB = 200
SYSTEM_BOOT_DISK_GB = 100
_RESERVATION_TYPES = {
    "none": "NO_RESERVATION",
    "any": "ANY_RESERVATION",
    "specific": "SPECIFIC_RESERVATION",
}
# GCE's label for targeting a reservation by name.
RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"


class _PoolArgs(ComponentArgs):
    cluster_id: StrInput
    cluster_location: str
    service_account: StrInput


class GpuNodePoolArgs(_PoolArgs):
    """The pool's spec (whose validators hold its invariants) and the cluster it joins."""

    spec: GpuPoolSpec


class SystemNodePoolArgs(_PoolArgs):
    """The system pool's spec (whose validators hold its invariants) and the cluster it joins."""

    spec: SystemPoolSpec


def _hardened(service_account: StrInput) -> dict[str, Any]:
    """Node settings every pool shares."""
    return {
        "service_account": service_account,
        # Access is decided by the service account's IAM roles; the scope does not narrow it.
        "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        # Pods see the GKE metadata server, which serves their Workload Identity, never the
        # node's credentials.
        "workload_metadata_config": gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(
            mode="GKE_METADATA"
        ),
        "shielded_instance_config": gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
            enable_secure_boot=True, enable_integrity_monitoring=True
        ),
        "gvnic": gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
        "gcfs_config": gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=True),
        "metadata": {"disable-legacy-endpoints": "true"},
    }


# A new node comes up before an old one drains, so an upgrade never lowers serving capacity.
_SURGE_UPGRADE = gcp.container.NodePoolUpgradeSettingsArgs(
    strategy="SURGE", max_surge=NODE_SURGE, max_unavailable=0
)
# The autoscaler owns the node count once the pool exists; GKE would replace the whole pool
# (every serving node at once) for a changed initial count.
_AUTOSCALER_OWNS_SIZE = ["initialNodeCount"]


def _resource_labels(spec: GpuPoolSpec) -> dict[str, str] | None:
    """What the policy pack checks a pool's reservations against rides on the pool as GCE
    labels (it never sees the reservation itself): the VMs they hold, and for a chain step's
    specific reservation its machine type and zone as the stack declares them."""
    labels = {}
    if spec.reserved_nodes is not None:
        labels[RESERVED_NODES_LABEL] = str(spec.reserved_nodes)
    if spec.reservation_machine_type is not None:
        labels[RESERVATION_MACHINE_LABEL] = spec.reservation_machine_type
    if spec.reservation_zone is not None:
        labels[RESERVATION_ZONE_LABEL] = spec.reservation_zone
    return labels or None


class GpuNodePool(pulumi.ComponentResource):
    """The GPU nodes of one machine type, shaped by the catalog and the models' plans."""

    pool_name: pulumi.Output[str]
    machine_type: str
    node_selector: dict[str, str]

    def __init__(
        self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:node_pools:GpuNodePool", name, None, opts)
        spec = args.spec
        machine = spec.machine
        # Flex-start and queued nodes are granted for a bounded run as capacity frees up: GKE
        # requires auto-repair off (a repair would recreate the node outside the grant) and
        # the pool to start empty.
        granted = spec.flex_start or spec.queued_provisioning
        pool = gcp.container.NodePool(
            f"{name}-pool",
            cluster=args.cluster_id,
            location=args.cluster_location,
            node_locations=list(spec.zones),
            initial_node_count=0 if granted else spec.initial_nodes_per_zone,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=spec.min_nodes,
                total_max_node_count=spec.max_nodes,
                # ANY tries every zone and reservation before giving up, which is what scarce
                # GPUs need; BALANCED would wait on an empty zone.
                location_policy="ANY",
            ),
            placement_policy=(
                gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT") if spec.compact else None
            ),
            queued_provisioning=(
                gcp.container.NodePoolQueuedProvisioningArgs(enabled=True)
                if spec.queued_provisioning
                else None
            ),
            management=gcp.container.NodePoolManagementArgs(
                auto_repair=not granted, auto_upgrade=True
            ),
            upgrade_settings=_SURGE_UPGRADE,
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=machine.name,
                guest_accelerators=[
                    gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                        type=machine.gke_accelerator,
                        count=machine.gpus_per_node,
                        gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                            gpu_driver_version=spec.gpu_driver_version
                        ),
                    )
                ],
                taints=[
                    gcp.container.NodePoolNodeConfigTaintArgs(
                        key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect=GPU_TAINT_EFFECT
                    ),
                    # A pool made by hand joins its ComputeClass by this taint and label.
                    *(
                        [
                            gcp.container.NodePoolNodeConfigTaintArgs(
                                key=COMPUTE_CLASS_LABEL,
                                value=spec.compute_class,
                                effect=COMPUTE_CLASS_TAINT_EFFECT,
                            )
                        ]
                        if spec.compute_class is not None
                        else []
                    ),
                ],
                labels={POOL_LABEL: GPU_POOL, MACHINE_TYPE_LABEL: machine.name}
                | ({COMPUTE_CLASS_LABEL: spec.compute_class} if spec.compute_class else {}),
                # The bundled local SSDs back emptyDir and the image cache: weights copied
                # there load at NVMe speed.
                ephemeral_storage_local_ssd_config=(
                    gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
                        local_ssd_count=machine.local_ssd_count
                    )
                    if machine.local_ssd_count
                    else None
                ),
                disk_size_gb=GPU_BOOT_DISK_GB,
                spot=spec.spot,
                # A longer graceful node shutdown for preempted Spot nodes, where the stack
                # asks; the worker pods' grace and Serve's shutdown are sized from it.
                kubelet_config=(
                    gcp.container.NodePoolNodeConfigKubeletConfigArgs(
                        shutdown_grace_period_seconds=spec.spot_shutdown_grace_s,
                        shutdown_grace_period_critical_pods_seconds=SPOT_CRITICAL_PODS_S,
                    )
                    if spec.spot_shutdown_grace_s is not None
                    else None
                ),
                flex_start=spec.flex_start,
                max_run_duration=(
                    f"{spec.max_run_duration_s}s" if spec.max_run_duration_s is not None else None
                ),
                reservation_affinity=gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                    consume_reservation_type=_RESERVATION_TYPES[spec.reservation_affinity],
                    key=RESERVATION_NAME_KEY if spec.reservations else None,
                    values=list(spec.reservations) or None,
                ),
                resource_labels=_resource_labels(spec),
                **_hardened(args.service_account),
            ),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=_AUTOSCALER_OWNS_SIZE),
        )
        self.pool_name = pool.name
        self.machine_type = machine.name
        self.node_selector = spec.node_selector
        self.register_outputs(
            {
                "pool_name": self.pool_name,
                "machine_type": self.machine_type,
                "node_selector": self.node_selector,
            }
        )


class SystemNodePool(pulumi.ComponentResource):
    """The CPU nodes for everything that is not a model server."""

    pool_name: pulumi.Output[str]
    node_selector: dict[str, str]

    def __init__(
        self, name: str, args: SystemNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:node_pools:SystemNodePool", name, None, opts)
        spec = args.spec
        self.node_selector = {POOL_LABEL: SYSTEM_POOL}
        pool = gcp.container.NodePool(
            f"{name}-pool",
            cluster=args.cluster_id,
            location=args.cluster_location,
            initial_node_count=1 if spec.min_nodes else 0,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=spec.min_nodes,
                total_max_node_count=spec.max_nodes,
                # Spread the heads and the ingress over zones, so one zone's outage leaves
                # the others serving.
                location_policy="BALANCED",
            ),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            upgrade_settings=_SURGE_UPGRADE,
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=spec.machine_type,
                labels=dict(self.node_selector),
                disk_size_gb=SYSTEM_BOOT_DISK_GB,
                **_hardened(args.service_account),
            ),
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=_AUTOSCALER_OWNS_SIZE),
        )
        self.pool_name = pool.name
        self.register_outputs({"pool_name": self.pool_name, "node_selector": self.node_selector})
