"""GkeNetwork: the VPC a private cluster lives in.

One custom-mode VPC with one subnet in the region (secondary ranges for pods and services), a
Cloud Router and Cloud NAT so private nodes can pull images and weights, and the firewall rule
that lets Google's load-balancer health checks reach the nodes.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.platform.specs import NetworkSpec

# Google Cloud load balancers and health checks probe from these ranges
# (https://cloud.google.com/load-balancing/docs/health-check-concepts#ip-ranges).
HEALTH_CHECK_RANGES = ("35.191.0.0/16", "130.211.0.0/22")


class GkeNetwork(pulumi.ComponentResource):
    """A private VPC for one GKE cluster."""

    network_id: pulumi.Output[str]
    subnetwork_id: pulumi.Output[str]
    pods_range_name: str
    services_range_name: str
    control_plane_cidr: str

    def __init__(
        self, name: str, args: NetworkSpec, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("servestack:network:GkeNetwork", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.pods_range_name = f"{name}-pods"
        self.services_range_name = f"{name}-services"
        self.control_plane_cidr = str(args.control_plane_cidr)

        vpc = gcp.compute.Network(
            f"{name}-vpc",
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            description="servestack: private GKE network",
            opts=child,
        )
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            network=vpc.id,
            region=args.region,
            ip_cidr_range=str(args.subnet_cidr),
            # Private nodes reach Google APIs (Artifact Registry, GCS weights) without NAT.
            private_ip_google_access=True,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=self.pods_range_name, ip_cidr_range=str(args.pods_cidr)
                ),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=self.services_range_name, ip_cidr_range=str(args.services_cidr)
                ),
            ],
            opts=child,
        )
        router = gcp.compute.Router(
            f"{name}-router", network=vpc.id, region=args.region, opts=child
        )
        # Private nodes have no external IP: NAT is their only way to registries outside
        # Google (Hugging Face, Docker Hub).
        gcp.compute.RouterNat(
            f"{name}-nat",
            router=router.name,
            region=args.region,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[
                gcp.compute.RouterNatSubnetworkArgs(
                    name=subnet.id, source_ip_ranges_to_nats=["ALL_IP_RANGES"]
                )
            ],
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=child,
        )
        gcp.compute.Firewall(
            f"{name}-health-checks",
            network=vpc.id,
            direction="INGRESS",
            source_ranges=list(HEALTH_CHECK_RANGES),
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp")],
            description="Google Cloud load-balancer health checks to nodes and pods",
            opts=child,
        )

        self.network_id = vpc.id
        self.subnetwork_id = subnet.id
        self.register_outputs(
            {
                "network_id": self.network_id,
                "subnetwork_id": self.subnetwork_id,
                "pods_range_name": self.pods_range_name,
                "services_range_name": self.services_range_name,
                "control_plane_cidr": self.control_plane_cidr,
            }
        )
