"""GcsStore: the Memorystore for Redis instance that holds every Ray head's GCS state for a stack.

Reached only from the VPC through private service access; AUTH on, its string a Pulumi secret;
in-transit encryption on, since Ray 2.56.1's GCS client speaks TLS to a `rediss://` address
(`ray._private.services.get_address`) and checks the server against `RAY_REDIS_CA_CERT`. Each
RayCluster keeps its keys under its own namespace (KubeRay sets it to the cluster's UID), so one
instance serves every model of the stack.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.deploy.components.args import ComponentArgs
from infra.platform.stack_config import RedisTier

StrInput = str | pulumi.Output[str]

REDIS_VERSION = "REDIS_7_2"
# Private service access peers Google's service network with the VPC through a range of ours;
# a /24 is Memorystore's smallest and leaves room for a replica and maintenance.
PSA_PREFIX_LENGTH = 24
SERVICE_NETWORKING = "servicenetworking.googleapis.com"


class GcsStoreArgs(ComponentArgs):
    project: str
    region: str
    network_id: StrInput
    tier: RedisTier
    memory_gb: int


class GcsStore(pulumi.ComponentResource):
    """One Redis per stack for GCS fault tolerance."""

    address: pulumi.Output[str]
    auth_string: pulumi.Output[str]
    ca_certificate: pulumi.Output[str]

    def __init__(
        self, name: str, args: GcsStoreArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:gcs_store:GcsStore", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        peering_range = gcp.compute.GlobalAddress(
            f"{name}-psa-range",
            project=args.project,
            purpose="VPC_PEERING",
            address_type="INTERNAL",
            prefix_length=PSA_PREFIX_LENGTH,
            network=args.network_id,
            opts=child,
        )
        peering = gcp.servicenetworking.Connection(
            f"{name}-psa",
            network=args.network_id,
            service=SERVICE_NETWORKING,
            reserved_peering_ranges=[peering_range.name],
            opts=child,
        )
        instance = gcp.redis.Instance(
            f"{name}-redis",
            project=args.project,
            region=args.region,
            tier=args.tier,
            memory_size_gb=args.memory_gb,
            redis_version=REDIS_VERSION,
            authorized_network=args.network_id,
            connect_mode="PRIVATE_SERVICE_ACCESS",
            auth_enabled=True,
            transit_encryption_mode="SERVER_AUTHENTICATION",
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[peering], additional_secret_outputs=["authString"]
            ),
        )
        self.address = pulumi.Output.concat(
            "rediss://", instance.host, ":", instance.port.apply(str)
        )
        self.auth_string = pulumi.Output.secret(instance.auth_string)
        self.ca_certificate = instance.server_ca_certs.apply(lambda certs: certs[0].cert or "")
        self.register_outputs(
            {
                "address": self.address,
                "auth_string": self.auth_string,
                "ca_certificate": self.ca_certificate,
            }
        )
