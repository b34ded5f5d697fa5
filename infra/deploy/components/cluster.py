"""GkeCluster: a private GKE Standard cluster, secure and cheap to run by default.

Private nodes behind the control plane's authorized networks, Workload Identity, Dataplane V2,
shielded nodes, Secrets encrypted with a Cloud KMS key of its own, Binary Authorization, the GCS
FUSE CSI driver for model weights, image streaming, managed Prometheus (with NVIDIA DCGM GPU
metrics) and a daily maintenance window. The default node pool is removed:
node pools are their own components.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp
import yaml

from infra.deploy.components.args import ComponentArgs
from infra.platform.specs import ClusterSpec
from serving.frozen import Frozen
from serving.spec.exposure import PUBLIC_CONTROL_PLANE_ALLOWED, PUBLIC_CONTROL_PLANE_LABEL

StrInput = str | pulumi.Output[str]

# GKE's documented way for kubectl and client libraries to get a token for the cluster.
AUTH_PLUGIN = "gke-gcloud-auth-plugin"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# Application-layer Secrets encryption: GKE's service agent wraps the cluster's Secrets in etcd
# with this key; rotated every 90 days (old versions still decrypt what they wrapped).
SECRETS_KEY_ROTATION = f"{90 * 24 * 3600}s"
KMS_ENCRYPTER_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
GKE_SERVICE = "container.googleapis.com"
BINARY_AUTHORIZATION_MODE = "PROJECT_SINGLETON_POLICY_ENFORCE"


class SecretsKeyArgs(Frozen):
    project: str
    region: str


class SecretsKey(pulumi.ComponentResource):
    """A Cloud KMS key ring and key in the cluster's region, and the GKE service agent's right
    to encrypt and decrypt with it (GKE refuses a key its agent cannot use)."""

    key_id: pulumi.Output[str]

    def __init__(
        self, name: str, args: SecretsKeyArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:cluster:SecretsKey", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Key rings cannot be deleted: auto-named, so a re-created stack never collides.
        ring = gcp.kms.KeyRing(
            f"{name}-ring", project=args.project, location=args.region, opts=child
        )
        key = gcp.kms.CryptoKey(
            f"{name}-key", key_ring=ring.id, rotation_period=SECRETS_KEY_ROTATION, opts=child
        )
        agent = gcp.projects.ServiceIdentity(
            f"{name}-gke-agent", project=args.project, service=GKE_SERVICE, opts=child
        )
        grant = gcp.kms.CryptoKeyIAMMember(
            f"{name}-gke-agent-grant",
            crypto_key_id=key.id,
            role=KMS_ENCRYPTER_ROLE,
            member=agent.email.apply(lambda email: f"serviceAccount:{email}"),
            opts=child,
        )
        self.key_id = pulumi.Output.all(key.id, grant.id).apply(lambda values: values[0])
        self.register_outputs({"key_id": self.key_id})


class GkeClusterArgs(ComponentArgs):
    """The cluster's spec (whose validators hold its invariants) and what it is wired to."""

    spec: ClusterSpec
    network_id: StrInput
    subnetwork_id: StrInput
    pods_range_name: str
    services_range_name: str
    control_plane_cidr: str
    node_service_account: StrInput


class GkeCluster(pulumi.ComponentResource):
    """A private GKE Standard cluster without a default node pool."""

    cluster_name: pulumi.Output[str]
    cluster_id: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    location: str
    kubeconfig: pulumi.Output[str]

    def __init__(
        self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:cluster:GkeCluster", name, None, opts)
        spec = args.spec
        secrets_key = SecretsKey(
            f"{name}-secrets",
            SecretsKeyArgs(project=spec.project, region=spec.region),
            pulumi.ResourceOptions(parent=self),
        )
        cluster = gcp.container.Cluster(
            f"{name}-cluster",
            project=spec.project,
            location=spec.location,
            network=args.network_id,
            subnetwork=args.subnetwork_id,
            networking_mode="VPC_NATIVE",
            resource_labels=(
                {PUBLIC_CONTROL_PLANE_LABEL: PUBLIC_CONTROL_PLANE_ALLOWED}
                if spec.allow_public_control_plane
                else None
            ),
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=args.pods_range_name,
                services_secondary_range_name=args.services_range_name,
            ),
            # GKE cannot create a cluster without a node pool: it starts with one node, which
            # is deleted straight away so that every node belongs to a pool we define.
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=gcp.container.ClusterNodeConfigArgs(
                service_account=args.node_service_account,
                oauth_scopes=[CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(
                    mode="GKE_METADATA"
                ),
                shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True
                ),
            ),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                # The public endpoint stays, closed to all but the authorized networks, so that
                # `pulumi up` from a workstation or CI can reach the Kubernetes API.
                enable_private_endpoint=False,
                master_ipv4_cidr_block=args.control_plane_cidr,
            ),
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                        cidr_block=str(cidr), display_name=f"servestack-{index}"
                    )
                    for index, cidr in enumerate(spec.master_authorized_networks)
                ],
                # Otherwise any Compute Engine address, anyone's VM, may reach the API.
                gcp_public_cidrs_access_enabled=False,
            ),
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{spec.project}.svc.id.goog"
            ),
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=spec.release_channel),
            datapath_provider="ADVANCED_DATAPATH",
            enable_shielded_nodes=True,
            # Secrets in etcd wrapped with our own KMS key, not only Google's default encryption.
            database_encryption=gcp.container.ClusterDatabaseEncryptionArgs(
                state="ENCRYPTED", key_name=secrets_key.key_id
            ),
            binary_authorization=gcp.container.ClusterBinaryAuthorizationArgs(
                evaluation_mode=(
                    BINARY_AUTHORIZATION_MODE if spec.binary_authorization else "DISABLED"
                )
            ),
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(
                    enabled=True
                ),
                # GKE's managed KubeRay, where the stack prefers it to the pinned chart.
                ray_operator_configs=[
                    gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(
                        enabled=spec.kuberay_install == "gke_addon"
                    )
                ],
            ),
            node_pool_defaults=gcp.container.ClusterNodePoolDefaultsArgs(
                node_config_defaults=gcp.container.ClusterNodePoolDefaultsNodeConfigDefaultsArgs(
                    # Image streaming: vLLM images are many GB; nodes start them before the
                    # last layer has arrived.
                    gcfs_config=gcp.container.ClusterNodePoolDefaultsNodeConfigDefaultsGcfsConfigArgs(
                        enabled=True
                    ),
                ),
            ),
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                enable_components=["SYSTEM_COMPONENTS", "DCGM"],
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(
                    enabled=True
                ),
            ),
            logging_config=gcp.container.ClusterLoggingConfigArgs(
                enable_components=["SYSTEM_COMPONENTS", "WORKLOADS"]
            ),
            maintenance_policy=gcp.container.ClusterMaintenancePolicyArgs(
                daily_maintenance_window=gcp.container.ClusterMaintenancePolicyDailyMaintenanceWindowArgs(
                    start_time=spec.maintenance_window_start
                ),
                # A stack's windows (a launch, a freeze) in which GKE starts no upgrade of the
                # kind named: with NO_MINOR_OR_NODE_UPGRADES the system pool, which holds the
                # Ray heads, is not drained either.
                maintenance_exclusions=[
                    gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                        exclusion_name=exclusion.name,
                        start_time=exclusion.start_time.isoformat(),
                        end_time=exclusion.end_time.isoformat(),
                        exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                            scope=exclusion.scope
                        ),
                    )
                    for exclusion in spec.maintenance_exclusions
                ]
                or None,
            ),
            deletion_protection=spec.deletion_protection,
            # node_config only shapes the default pool, deleted at creation; GKE reports it
            # back differently and a diff on it would recreate the cluster.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["nodeConfig"]),
        )

        self.cluster_name = cluster.name
        self.cluster_id = cluster.id
        self.endpoint = cluster.endpoint
        self.location = spec.location
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                cluster.name, cluster.endpoint, cluster.master_auth.cluster_ca_certificate
            ).apply(lambda values: kubeconfig(spec.project, spec.location, *values))
        )
        self.register_outputs(
            {
                "cluster_name": self.cluster_name,
                "cluster_id": self.cluster_id,
                "endpoint": self.endpoint,
                "location": self.location,
                "kubeconfig": self.kubeconfig,
            }
        )


def kubeconfig(
    project: str, location: str, cluster_name: str, endpoint: str, ca_certificate: str
) -> str:
    """A kubeconfig that authenticates through gke-gcloud-auth-plugin: no key in the file."""
    context = f"gke_{project}_{location}_{cluster_name}"
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": context,
                "cluster": {
                    "server": f"https://{endpoint}",
                    "certificate-authority-data": ca_certificate,
                },
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
        "users": [
            {
                "name": context,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": AUTH_PLUGIN,
                        "installHint": "gcloud components install gke-gcloud-auth-plugin",
                        "provideClusterInfo": True,
                    }
                },
            }
        ],
    }
    return yaml.safe_dump(document, sort_keys=False)
