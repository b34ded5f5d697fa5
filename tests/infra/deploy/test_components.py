"""Each component under Pulumi's mock engine (preview=False): the resources it registers carry
what our code derives (accelerators from the catalog, taints, labels, placement, bounds,
security settings), and each spec's validators refuse what would break an invariant."""

from __future__ import annotations

import asyncio
from typing import Any

import pulumi
import pytest
from components_support import (
    NODE_POOL,
    SA_EMAIL,
    build_gpu_pool,
    fixable_field,
    gpu_spec,
)
from infra_support import RecordingMocks, run, use_stack
from pulumi.runtime import settings
from pydantic import ValidationError

from infra.deploy.components import (
    SystemNodePool,
    SystemNodePoolArgs,
)
from infra.platform.pool_specs import SystemPoolSpec
from serving import catalog
from serving.compile.scheduling import (
    GKE_ACCELERATOR_LABEL,
    GPU_TAINT_EFFECT,
    GPU_TAINT_KEY,
    GPU_TAINT_VALUE,
    MACHINE_TYPE_LABEL,
    POOL_LABEL,
)


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
        assert fixable_field(caught.value) == field

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
        assert fixable_field(caught.value) == field
