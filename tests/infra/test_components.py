"""Each component under Pulumi's mock engine (preview=False): the resources it registers carry
what our code derives (accelerators from the catalog, taints, labels, placement, bounds,
security settings), and each spec's validators refuse what would break an invariant."""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Network
from typing import Any

import pulumi
import pytest
import yaml
from infra_support import RecordingMocks, Registered, resolve, run, use_stack
from pulumi.runtime import settings
from pydantic import ValidationError

from infra.components import (
    GkeCluster,
    GkeClusterArgs,
    GkeNetwork,
    GpuNodePool,
    GpuNodePoolArgs,
    NodeServiceAccount,
    NodeServiceAccountArgs,
    SystemNodePool,
    SystemNodePoolArgs,
)
from infra.components.identity import NODE_ROLES
from infra.components.network import HEALTH_CHECK_RANGES
from infra.platform_specs import ClusterSpec, GpuPoolSpec, NetworkSpec, SystemPoolSpec
from serving import catalog
from serving.catalog import MachineType
from serving.errors import FixableValueError
from serving.scheduling import (
    GKE_ACCELERATOR_LABEL,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    MACHINE_TYPE_LABEL,
    POOL_LABEL,
)

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
SA_EMAIL = "nodes@my-gcp-project.iam.gserviceaccount.com"


def _home(machine: MachineType) -> tuple[str, str]:
    """A region and zone that stock the machine's GPU, from the zone catalog."""
    region = catalog.regions_offering(machine.gke_accelerator)[0]
    return region, catalog.zones_offering(machine.gke_accelerator, region)[0]


def gpu_spec(machine_type: str = "a3-highgpu-8g", **changes: Any) -> GpuPoolSpec:
    machine = catalog.MACHINE_TYPES[machine_type]
    region, zone = _home(machine)
    fields: dict[str, Any] = {
        "machine_type": machine_type,
        "region": region,
        "zones": [zone],
        "min_nodes": 1,
        "max_nodes": 3,
        "spot": not machine.on_demand,
        "models": ("some-model",),
    }
    return GpuPoolSpec.model_validate(fields | changes)


def build_gpu_pool(mocks: RecordingMocks, spec: GpuPoolSpec) -> tuple[GpuNodePool, Registered]:
    args = GpuNodePoolArgs(
        spec=spec, cluster_id="cluster-id", cluster_location="us-central1", service_account=SA_EMAIL
    )
    pool = run(lambda: GpuNodePool("gpu", args))
    return pool, mocks.one(NODE_POOL)


def _fixable_field(error: ValidationError) -> str | None:
    cause = (error.errors()[0].get("ctx") or {}).get("error")
    assert isinstance(cause, FixableValueError), error
    return cause.field


def test_the_mock_engine_runs_after_asyncio_run_left_no_event_loop() -> None:
    """The local data plane's tests call asyncio.run, which leaves the thread without an event
    loop; Pulumi's mock engine needs one, whatever order the tests run in."""
    asyncio.run(asyncio.sleep(0))
    recorder = RecordingMocks()
    try:
        use_stack(recorder, "dev", {})
        _, registered = build_gpu_pool(recorder, gpu_spec())
        assert registered.inputs["nodeConfig"]["machineType"] == "a3-highgpu-8g"
    finally:
        settings.ROOT.set(None)
        pulumi.runtime.set_all_config({})


class TestGpuNodePool:
    """A GPU pool's accelerators come from its machine type in the catalog; its nodes are
    tainted for GPU pods only and labelled with the machine type the RayService selects."""

    @pytest.mark.parametrize("machine_type", sorted(catalog.MACHINE_TYPES))
    def test_accelerator_type_and_count_come_from_the_machine_type(
        self, mocks: RecordingMocks, machine_type: str
    ) -> None:
        machine = catalog.MACHINE_TYPES[machine_type]
        _, registered = build_gpu_pool(mocks, gpu_spec(machine_type))
        node = registered.inputs["nodeConfig"]
        assert node["machineType"] == machine_type
        (accelerator,) = node["guestAccelerators"]
        assert accelerator["type"] == machine.gke_accelerator
        assert accelerator["count"] == machine.gpus_per_node
        assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}

    @pytest.mark.parametrize("machine_type", sorted(catalog.MACHINE_TYPES))
    def test_local_ssds_back_ephemeral_storage_exactly_where_the_machine_has_them(
        self, mocks: RecordingMocks, machine_type: str
    ) -> None:
        machine = catalog.MACHINE_TYPES[machine_type]
        _, registered = build_gpu_pool(mocks, gpu_spec(machine_type))
        storage = registered.inputs["nodeConfig"].get("ephemeralStorageLocalSsdConfig")
        if machine.local_ssd_count:
            assert storage == {"localSsdCount": machine.local_ssd_count}
        else:
            assert storage is None

    def test_nodes_are_tainted_for_gpu_pods_and_labelled_with_their_machine_type(
        self, mocks: RecordingMocks
    ) -> None:
        pool, registered = build_gpu_pool(mocks, gpu_spec("a2-ultragpu-4g"))
        node = registered.inputs["nodeConfig"]
        assert node["taints"] == [
            {"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT}
        ]
        assert (GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT) == (
            "nvidia.com/gpu",
            "present",
            "NO_SCHEDULE",
        )
        assert node["labels"][MACHINE_TYPE_LABEL] == "a2-ultragpu-4g"
        assert node["labels"][POOL_LABEL] == "gpu"
        # What a RayService worker group will select: our label and GKE's accelerator label.
        assert pool.node_selector == {
            MACHINE_TYPE_LABEL: "a2-ultragpu-4g",
            GKE_ACCELERATOR_LABEL: catalog.MACHINE_TYPES["a2-ultragpu-4g"].gke_accelerator,
        }

    def test_autoscaling_spans_the_plans_bounds_in_any_zone(self, mocks: RecordingMocks) -> None:
        machine = catalog.MACHINE_TYPES["a3-highgpu-8g"]
        zones = list(catalog.zones_offering(machine.gke_accelerator, "us-central1"))
        spec = gpu_spec(region="us-central1", zones=zones, min_nodes=3, max_nodes=7)
        _, registered = build_gpu_pool(mocks, spec)
        assert registered.inputs["autoscaling"] == {
            "totalMinNodeCount": 3,
            "totalMaxNodeCount": 7,
            "locationPolicy": "ANY",
        }
        assert registered.inputs["nodeLocations"] == zones
        # GKE counts initial nodes per zone: enough in each that the total reaches the minimum.
        assert registered.inputs["initialNodeCount"] * len(zones) >= 3

    @pytest.mark.parametrize(
        ("changes", "compact"),
        [
            ({}, False),
            ({"replicas_span_nodes": True}, True),
            ({"compact_placement": True}, True),
        ],
        ids=["fits-a-node", "replica-spans-nodes", "stack-asks"],
    )
    def test_compact_placement_exactly_where_a_replica_spans_nodes_or_the_stack_asks(
        self, mocks: RecordingMocks, changes: dict[str, Any], compact: bool
    ) -> None:
        _, registered = build_gpu_pool(mocks, gpu_spec(**changes))
        placement = registered.inputs.get("placementPolicy")
        assert placement == ({"type": "COMPACT"} if compact else None)

    def test_upgrades_surge_and_never_take_a_serving_node_away(self, mocks: RecordingMocks) -> None:
        _, registered = build_gpu_pool(mocks, gpu_spec())
        upgrade = registered.inputs["upgradeSettings"]
        assert upgrade["strategy"] == "SURGE"
        assert upgrade["maxUnavailable"] == 0
        assert upgrade["maxSurge"] >= 1

    def test_nodes_are_hardened(self, mocks: RecordingMocks) -> None:
        _, registered = build_gpu_pool(mocks, gpu_spec())
        node = registered.inputs["nodeConfig"]
        assert node["serviceAccount"] == SA_EMAIL
        assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert node["shieldedInstanceConfig"] == {
            "enableSecureBoot": True,
            "enableIntegrityMonitoring": True,
        }
        assert node["gvnic"] == {"enabled": True}
        assert node["gcfsConfig"] == {"enabled": True}

    def test_spot_nodes(self, mocks: RecordingMocks) -> None:
        _, registered = build_gpu_pool(mocks, gpu_spec("a3-highgpu-1g", spot=True))
        node = registered.inputs["nodeConfig"]
        assert node["spot"] is True
        assert node["reservationAffinity"]["consumeReservationType"] == "NO_RESERVATION"
        assert registered.inputs["management"]["autoRepair"] is True

    def test_flex_start_nodes_start_empty_without_auto_repair(self, mocks: RecordingMocks) -> None:
        spec = gpu_spec("a3-highgpu-1g", spot=False, flex_start=True)
        _, registered = build_gpu_pool(mocks, spec)
        assert registered.inputs["nodeConfig"]["flexStart"] is True
        assert registered.inputs["nodeConfig"]["spot"] is False
        assert registered.inputs["management"]["autoRepair"] is False
        assert registered.inputs["initialNodeCount"] == 0

    def test_queued_provisioning_takes_no_reservation_and_starts_no_node(
        self, mocks: RecordingMocks
    ) -> None:
        spec = gpu_spec(queued_provisioning=True, min_nodes=0)
        _, registered = build_gpu_pool(mocks, spec)
        assert registered.inputs["queuedProvisioning"] == {"enabled": True}
        affinity = registered.inputs["nodeConfig"]["reservationAffinity"]
        assert affinity["consumeReservationType"] == "NO_RESERVATION"
        assert registered.inputs["management"]["autoRepair"] is False
        assert registered.inputs["initialNodeCount"] == 0

    def test_a_specific_reservation_is_targeted_by_name(self, mocks: RecordingMocks) -> None:
        spec = gpu_spec(
            reservation_affinity="specific", reservations=["h100-block"], reserved_nodes=4
        )
        _, registered = build_gpu_pool(mocks, spec)
        assert registered.inputs["nodeConfig"]["reservationAffinity"] == {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": ["h100-block"],
        }

    def test_any_reservation_falls_back_to_on_demand(self, mocks: RecordingMocks) -> None:
        _, registered = build_gpu_pool(mocks, gpu_spec(reservation_affinity="any"))
        affinity = registered.inputs["nodeConfig"]["reservationAffinity"]
        assert affinity == {"consumeReservationType": "ANY_RESERVATION"}

    def test_children_are_named_after_the_component(self, mocks: RecordingMocks) -> None:
        build_gpu_pool(mocks, gpu_spec())
        component = mocks.one("servestack:node_pools:GpuNodePool")
        assert component.name == "gpu" and not component.custom
        assert mocks.one(NODE_POOL).name == "gpu-pool"


class TestGpuPoolSpec:
    """A GPU pool's invariants: ordered bounds; zones in the region that stock the GPU; one zone
    when compact; Spot, flex-start and queued provisioning exclusive and reservation-free;
    queued provisioning neither compact nor holding nodes; Spot-only machines never on demand."""

    @pytest.mark.parametrize(
        ("machine_type", "changes", "field"),
        [
            ("a3-highgpu-8g", {"min_nodes": 4, "max_nodes": 2}, "min_nodes"),
            ("a3-highgpu-8g", {"zones": []}, "zones"),
            ("a3-highgpu-8g", {"zones": ["europe-west4-b"]}, "zones"),
            ("a3-highgpu-8g", {"zones": ["us-central1-f"]}, "zones"),
            (
                "a3-highgpu-8g",
                {"replicas_span_nodes": True, "zones": ["us-central1-a", "us-central1-c"]},
                "zones",
            ),
            ("a3-highgpu-8g", {"spot": True, "queued_provisioning": True}, "spot"),
            (
                "a3-highgpu-8g",
                {"flex_start": True, "reservation_affinity": "any"},
                "reservation_affinity",
            ),
            ("a3-highgpu-8g", {"reservation_affinity": "specific"}, "reservations"),
            ("a3-highgpu-8g", {"reservations": ["r"]}, "reservations"),
            (
                "a3-highgpu-8g",
                {"queued_provisioning": True, "min_nodes": 0, "replicas_span_nodes": True},
                "queued_provisioning",
            ),
            ("a3-highgpu-8g", {"queued_provisioning": True, "min_nodes": 1}, "queued_provisioning"),
            ("a3-highgpu-4g", {"spot": False}, "spot"),
            (
                "a3-highgpu-8g",
                {"reservation_affinity": "specific", "reservations": ["r"]},
                "reserved_nodes",
            ),
            ("a3-highgpu-8g", {"spot_shutdown_grace_s": 60}, "spot_shutdown_grace_s"),
        ],
        ids=[
            "min-above-max",
            "no-zone",
            "zone-outside-region",
            "zone-without-the-gpu",
            "compact-over-two-zones",
            "spot-and-queued",
            "flex-start-with-reservation",
            "specific-without-names",
            "names-without-specific",
            "queued-and-compact",
            "queued-with-a-minimum",
            "spot-only-machine-on-demand",
            "specific-without-a-vm-count",
            "shutdown-grace-on-demand",
        ],
    )
    def test_refuses(self, machine_type: str, changes: dict[str, Any], field: str) -> None:
        base = {"region": "us-central1", "zones": ["us-central1-a"]}
        with pytest.raises(ValidationError) as caught:
            gpu_spec(machine_type, **(base | changes))
        assert _fixable_field(caught.value) == field

    @pytest.mark.parametrize("obtained", ["spot", "flex_start", "queued_provisioning"])
    def test_a_spot_only_machine_is_accepted_however_it_is_not_on_demand(
        self, obtained: str
    ) -> None:
        machine = catalog.MACHINE_TYPES["a3-highgpu-2g"]
        assert not machine.on_demand
        spec = gpu_spec("a3-highgpu-2g", **{"spot": False, obtained: True, "min_nodes": 0})
        assert spec.provisioning != "on-demand"


class TestSystemNodePool:
    """The system pool runs CPU pods: no GPU taint, its own label, spread over zones."""

    def test_untainted_labelled_and_balanced(self, mocks: RecordingMocks) -> None:
        spec = SystemPoolSpec(machine_type="e2-standard-8", min_nodes=2, max_nodes=5)
        args = SystemNodePoolArgs(
            spec=spec,
            cluster_id="cluster-id",
            cluster_location="us-central1",
            service_account=SA_EMAIL,
        )
        pool = run(lambda: SystemNodePool("system", args))
        registered = mocks.one(NODE_POOL)
        node = registered.inputs["nodeConfig"]
        assert "taints" not in node and "guestAccelerators" not in node
        assert node["labels"] == {POOL_LABEL: "system"} == pool.node_selector
        assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert registered.inputs["autoscaling"]["locationPolicy"] == "BALANCED"
        assert registered.inputs["upgradeSettings"]["maxUnavailable"] == 0

    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            ({"machine_type": "e2-standard-4", "min_nodes": 3, "max_nodes": 2}, "min_nodes"),
            ({"machine_type": "a3-highgpu-8g", "min_nodes": 1, "max_nodes": 2}, None),
        ],
        ids=["min-above-max", "gpu-machine"],
    )
    def test_refuses(self, fields: dict[str, Any], field: str | None) -> None:
        with pytest.raises(ValidationError) as caught:
            SystemPoolSpec.model_validate(fields)
        assert _fixable_field(caught.value) == field


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
        assert _fixable_field(caught.value) == "master_authorized_networks"

    def test_accepts_it_when_the_stack_says_so(self) -> None:
        spec = cluster_spec(
            master_authorized_networks=[IPv4Network("0.0.0.0/0")], allow_public_control_plane=True
        )
        assert spec.master_authorized_networks == (IPv4Network("0.0.0.0/0"),)

    @pytest.mark.parametrize("zone", ["europe-west4-a", "us-central1", "us-central1-a-b"])
    def test_refuses_a_zone_outside_the_region(self, zone: str) -> None:
        with pytest.raises(ValidationError) as caught:
            cluster_spec(cluster_zone=zone)
        assert _fixable_field(caught.value) == "cluster_zone"


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
        assert _fixable_field(caught.value) == field


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
