"""The cluster-side components under Pulumi's mock engine (preview=False): the GKE cluster, its
network and the nodes' service account register what our code derives, and their specs refuse
what would break an invariant."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

import pulumi
import pytest
import yaml
from components_support import (
    CLUSTER,
    SA_EMAIL,
    build_gpu_pool,
    fixable_field,
    gpu_spec,
)
from infra_support import RecordingMocks, Registered, resolve, run
from pydantic import ValidationError

from infra.deploy.components import (
    GkeCluster,
    GkeClusterArgs,
    GkeNetwork,
    GpuNodePool,
    NodeServiceAccount,
    NodeServiceAccountArgs,
)
from infra.deploy.components.identity import NODE_ROLES
from infra.deploy.components.network import HEALTH_CHECK_RANGES
from infra.platform.specs import ClusterSpec, NetworkSpec


def cluster_spec(**changes: Any) -> ClusterSpec:
    fields: dict[str, Any] = {
        "project": "my-gcp-project",
        "region": "us-central1",
        "master_authorized_networks": [IPv4Network("203.0.113.0/24")],
    }
    return ClusterSpec.model_validate(fields | changes)


def build_cluster(mocks: RecordingMocks, spec: ClusterSpec) -> tuple[GkeCluster, Registered]:
    args = GkeClusterArgs(
        spec=spec,
        network_id="network-id",
        subnetwork_id="subnet-id",
        pods_range_name="pods",
        services_range_name="services",
        control_plane_cidr="172.16.0.0/28",
        node_service_account=SA_EMAIL,
    )
    cluster = run(lambda: GkeCluster("gke", args))
    return cluster, mocks.one(CLUSTER)


class TestGkeCluster:
    """A private Standard cluster: private nodes, Workload Identity, no default pool, and a
    control plane reachable only from the authorized networks."""

    def test_nodes_are_private_and_workloads_use_workload_identity(
        self, mocks: RecordingMocks
    ) -> None:
        _, registered = build_cluster(mocks, cluster_spec())
        private = registered.inputs["privateClusterConfig"]
        assert private["enablePrivateNodes"] is True
        assert private["masterIpv4CidrBlock"] == "172.16.0.0/28"
        assert registered.inputs["workloadIdentityConfig"] == {
            "workloadPool": "my-gcp-project.svc.id.goog"
        }
        assert registered.inputs["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}

    def test_the_default_node_pool_is_removed(self, mocks: RecordingMocks) -> None:
        _, registered = build_cluster(mocks, cluster_spec())
        assert registered.inputs["removeDefaultNodePool"] is True
        assert registered.inputs["initialNodeCount"] == 1
        assert "nodePools" not in registered.inputs

    def test_the_control_plane_answers_only_the_authorized_networks(
        self, mocks: RecordingMocks
    ) -> None:
        _, registered = build_cluster(mocks, cluster_spec())
        authorized = registered.inputs["masterAuthorizedNetworksConfig"]
        assert [block["cidrBlock"] for block in authorized["cidrBlocks"]] == ["203.0.113.0/24"]
        assert authorized["gcpPublicCidrsAccessEnabled"] is False

    def test_no_authorized_network_closes_the_control_plane(self, mocks: RecordingMocks) -> None:
        _, registered = build_cluster(mocks, cluster_spec(master_authorized_networks=[]))
        authorized = registered.inputs["masterAuthorizedNetworksConfig"]
        assert authorized.get("cidrBlocks", []) == []
        assert authorized["gcpPublicCidrsAccessEnabled"] is False

    def test_serving_features_are_on(self, mocks: RecordingMocks) -> None:
        _, registered = build_cluster(mocks, cluster_spec(release_channel="STABLE"))
        inputs = registered.inputs
        assert inputs["datapathProvider"] == "ADVANCED_DATAPATH"
        assert inputs["enableShieldedNodes"] is True
        assert inputs["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}
        assert inputs["monitoringConfig"]["managedPrometheus"] == {"enabled": True}
        assert "DCGM" in inputs["monitoringConfig"]["enableComponents"]
        defaults = inputs["nodePoolDefaults"]["nodeConfigDefaults"]
        assert defaults["gcfsConfig"] == {"enabled": True}
        assert inputs["releaseChannel"] == {"channel": "STABLE"}
        assert inputs["maintenancePolicy"]["dailyMaintenanceWindow"]["startTime"] == "03:00"
        assert inputs["networkingMode"] == "VPC_NATIVE"

    def test_a_zonal_cluster_runs_in_its_zone(self, mocks: RecordingMocks) -> None:
        cluster, registered = build_cluster(mocks, cluster_spec(cluster_zone="us-central1-c"))
        assert registered.inputs["location"] == "us-central1-c" == cluster.location

    def test_kubeconfig_is_secret_and_authenticates_through_gcloud(
        self, mocks: RecordingMocks
    ) -> None:
        cluster, _ = build_cluster(mocks, cluster_spec())
        text, secret = resolve(cluster.kubeconfig)
        endpoint, _ = resolve(cluster.endpoint)
        assert secret
        document = yaml.safe_load(text)
        (entry,) = document["clusters"]
        assert entry["cluster"]["server"] == f"https://{endpoint}"
        (user,) = document["users"]
        assert user["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"
        assert "token" not in user["user"]


class TestClusterSpec:
    """The control plane is never open to 0.0.0.0/0 unless the stack says so, and a zonal
    cluster's zone lies in the region."""

    def test_refuses_an_open_control_plane(self) -> None:
        with pytest.raises(ValidationError) as caught:
            cluster_spec(master_authorized_networks=[IPv4Network("0.0.0.0/0")])
        assert fixable_field(caught.value) == "master_authorized_networks"

    def test_accepts_it_when_the_stack_says_so(self) -> None:
        spec = cluster_spec(
            master_authorized_networks=[IPv4Network("0.0.0.0/0")], allow_public_control_plane=True
        )
        assert spec.master_authorized_networks == (IPv4Network("0.0.0.0/0"),)

    @pytest.mark.parametrize("zone", ["europe-west4-a", "us-central1", "us-central1-a-b"])
    def test_refuses_a_zone_outside_the_region(self, zone: str) -> None:
        with pytest.raises(ValidationError) as caught:
            cluster_spec(cluster_zone=zone)
        assert fixable_field(caught.value) == "cluster_zone"


def network_spec(**changes: Any) -> NetworkSpec:
    fields: dict[str, Any] = {
        "region": "us-central1",
        "subnet_cidr": "10.0.0.0/20",
        "pods_cidr": "10.4.0.0/14",
        "services_cidr": "10.8.0.0/20",
        "control_plane_cidr": "172.16.0.0/28",
    }
    return NetworkSpec.model_validate(fields | changes)


class TestGkeNetwork:
    """The subnet carries the pod and service ranges the cluster uses, NAT covers it for private
    nodes, and Google's health checkers may reach the nodes."""

    def test_subnet_ranges_nat_and_health_checks(self, mocks: RecordingMocks) -> None:
        network = run(lambda: GkeNetwork("net", network_spec()))
        subnet = mocks.one("gcp:compute/subnetwork:Subnetwork").inputs
        assert subnet["privateIpGoogleAccess"] is True
        assert {r["rangeName"]: r["ipCidrRange"] for r in subnet["secondaryIpRanges"]} == {
            network.pods_range_name: "10.4.0.0/14",
            network.services_range_name: "10.8.0.0/20",
        }
        assert mocks.one("gcp:compute/network:Network").inputs["autoCreateSubnetworks"] is False
        nat = mocks.one("gcp:compute/routerNat:RouterNat").inputs
        assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"
        (covered,) = nat["subnetworks"]
        subnet_id, _ = resolve(network.subnetwork_id)
        assert covered["name"] == subnet_id
        firewall = mocks.one("gcp:compute/firewall:Firewall").inputs
        assert sorted(firewall["sourceRanges"]) == sorted(HEALTH_CHECK_RANGES)
        assert firewall["direction"] == "INGRESS"

    @pytest.mark.parametrize(
        ("changes", "field"),
        [
            ({"pods_cidr": "8.8.0.0/16"}, "pods_cidr"),
            ({"services_cidr": "10.4.0.0/20"}, "pods_cidr"),
            ({"control_plane_cidr": "172.16.0.0/24"}, "control_plane_cidr"),
        ],
        ids=["public-range", "overlap", "control-plane-not-28"],
    )
    def test_refuses(self, changes: dict[str, Any], field: str) -> None:
        with pytest.raises(ValidationError) as caught:
            network_spec(**changes)
        assert fixable_field(caught.value) == field


class TestNodeServiceAccount:
    """Nodes run as their own account with only the roles nodes need: no editor, no owner."""

    def test_roles_are_the_least_privilege_set(self, mocks: RecordingMocks) -> None:
        args = NodeServiceAccountArgs(project="my-gcp-project", account_id="servestack-dev-nodes")
        account = run(lambda: NodeServiceAccount("nodes", args))
        email, _ = resolve(account.email)
        grants = mocks.of_type("gcp:projects/iAMMember:IAMMember")
        assert sorted(g.inputs["role"] for g in grants) == sorted(NODE_ROLES.values())
        assert all(g.inputs["member"] == f"serviceAccount:{email}" for g in grants)
        assert not any(
            g.inputs["role"] in {"roles/editor", "roles/owner"} or "admin" in g.inputs["role"]
            for g in grants
        )

    def test_refuses_an_account_id_gcp_would(self) -> None:
        with pytest.raises(ValidationError):
            NodeServiceAccountArgs(project="p", account_id="a-name-far-longer-than-thirty-chars")


def test_components_register_exactly_their_public_outputs(mocks: RecordingMocks) -> None:
    """register_outputs lists each component's typed public attributes, no more, no less."""
    captured: dict[str, set[str]] = {}
    original = pulumi.ComponentResource.register_outputs

    def spy(self: pulumi.ComponentResource, outputs: Any) -> None:
        captured[type(self).__name__] = set(outputs)
        original(self, outputs)

    pulumi.ComponentResource.register_outputs = spy  # type: ignore[method-assign]
    try:
        run(lambda: GkeNetwork("net", network_spec()))
        build_cluster(mocks, cluster_spec())
        build_gpu_pool(mocks, gpu_spec())
    finally:
        pulumi.ComponentResource.register_outputs = original  # type: ignore[method-assign]
    for component in (GkeNetwork, GkeCluster, GpuNodePool):
        assert captured[component.__name__] == set(component.__annotations__), component
