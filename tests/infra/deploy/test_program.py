"""Each shipped stack's whole Pulumi program (`infra/__main__.py`) under the mock engine, with
its stack file's config handed over as Pulumi hands it: the resources by type and their key
properties follow from the catalog and the models' plans; bad config stops the program before
any resource is registered."""

from __future__ import annotations

import importlib
from collections import Counter
from types import ModuleType
from typing import Any

import pulumi
import pytest
import yaml
from compiled_support import compile_spec
from infra_support import (
    PLANNED_CHAINS,
    PLANNED_POOLS,
    RecordingMocks,
    Registered,
    pulumi_config,
    resolve,
    run,
    use_stack,
)
from pulumi.runtime import settings
from repo import REPO

from infra.deploy.components.identity import NODE_ROLES
from infra.kube.manifests import resource_name
from infra.kube.router_code import ships_router
from infra.platform.alerts import prefix_hit_rate_rule
from infra.platform.config import load_stack
from serving import catalog
from serving.compile.environment import forwards_body
from serving.compile.scheduling import MACHINE_TYPE_LABEL

STACKS = ["dev", "prod"]
NODE_POOL = "gcp:container/nodePool:NodePool"


def program() -> ModuleType:
    return importlib.import_module("infra.__main__")


def run_stack(mocks: RecordingMocks, stack: str, config: dict[str, str] | None = None) -> None:
    use_stack(mocks, stack, config or pulumi_config(REPO / f"stacks/Pulumi.{stack}.yaml"))
    run(program().main)


def exports() -> dict[str, Any]:
    root = settings.get_root_resource()
    assert root is not None
    outputs: dict[str, Any] = root.outputs  # type: ignore[attr-defined]
    return outputs


def gpu_pools(mocks: RecordingMocks) -> dict[str, list[Registered]]:
    """The GPU node pools by machine type: one, or one per step of its capacity chain."""
    pools: dict[str, list[Registered]] = {}
    for pool in mocks.of_type(NODE_POOL):
        if "guestAccelerators" in pool.inputs["nodeConfig"]:
            pools.setdefault(pool.inputs["nodeConfig"]["machineType"], []).append(pool)
    return pools


def steps_of(stack: str) -> int:
    return sum(len(chain) for chain in PLANNED_CHAINS[stack].values())


class TestShippedStacks:
    """A shipped stack builds one network, one private cluster, a system pool and one GPU pool
    per machine type its models are planned on, sized by their plans."""

    @pytest.mark.parametrize("stack", STACKS)
    def test_resources_by_type(self, mocks: RecordingMocks, stack: str) -> None:
        run_stack(mocks, stack)
        counted = Counter(r.type for r in mocks.registered if r.custom)
        models = load_stack(stack, REPO).profiles.values()
        from_huggingface = sum(1 for spec in models if not spec.source.startswith("gs://"))
        emails = load_stack(stack, REPO).config.alert_emails
        gpus_kept = {
            catalog.ACCELERATORS[catalog.MACHINE_TYPES[machine].accelerator].product_name
            for machine, (fewest, _, _) in PLANNED_POOLS[stack].items()
            if fewest
        }
        assert counted == {
            # The serving plane: a namespace each for models, KubeRay and the edge; the edge's
            # TLS Secret and API-key hashes; per model a service account, a RayService and a
            # route, and the Hugging Face token where the weights come from Hugging Face.
            "pulumi:providers:kubernetes": 1,
            "kubernetes:core/v1:Namespace": 3,
            "kubernetes:helm.sh/v3:Release": 2,
            # Scraped by managed Prometheus: the edge's HAProxy (inside the cluster, off its load
            # balancer), every model's Ray nodes and the KubeRay operator.
            "kubernetes:monitoring.googleapis.com/v1:PodMonitoring": 3,
            # The edge's API-key hashes, and servestack's router module where a model uses it.
            # The GCS Redis's CA beside them; its AUTH string as a Secret beside the TLS pair.
            "kubernetes:core/v1:ConfigMap": 2 + sum(1 for spec in models if ships_router(spec)),
            "kubernetes:core/v1:Secret": 2 + from_huggingface,
            # A budget for each model's head and each worker group with a minimum above zero.
            "kubernetes:policy/v1:PodDisruptionBudget": sum(
                1 + sum(1 for shape in compile_spec(spec).worker_shapes if shape.min_replicas > 0)
                for spec in models
            ),
            # Per model the head's account (KubeRay's autoscaler) and the workers' own.
            "kubernetes:core/v1:ServiceAccount": 2 * len(models),
            # The serving namespace's default deny, and one policy per model.
            "kubernetes:networking.k8s.io/v1:NetworkPolicy": 1 + len(models),
            "kubernetes:ray.io/v1:RayService": len(models),
            "kubernetes:networking.k8s.io/v1:Ingress": len(models),
            "gcp:compute/network:Network": 1,
            "gcp:compute/subnetwork:Subnetwork": 1,
            "gcp:compute/router:Router": 1,
            "gcp:compute/routerNat:RouterNat": 1,
            "gcp:compute/firewall:Firewall": 1,
            "gcp:serviceaccount/account:Account": 1,
            "gcp:projects/iAMMember:IAMMember": len(NODE_ROLES),
            "gcp:container/cluster:Cluster": 1,
            # Its Secrets' KMS key, and GKE's service agent allowed to use it.
            "gcp:kms/keyRing:KeyRing": 1,
            "gcp:kms/cryptoKey:CryptoKey": 1,
            "gcp:projects/serviceIdentity:ServiceIdentity": 1,
            "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": 1,
            # The GCS Redis and the private service access it is reached through.
            "gcp:redis/instance:Instance": 1,
            "gcp:compute/globalAddress:GlobalAddress": 1,
            "gcp:servicenetworking/connection:Connection": 1,
            # The system pool, and one GPU pool per step of each capacity chain; one
            # ComputeClass per chain, which the chain's workers select.
            NODE_POOL: 1 + steps_of(stack),
            "kubernetes:cloud.google.com/v1:ComputeClass": len(PLANNED_CHAINS[stack]),
            # Observability: one dashboard; an email channel per address; five alert policies
            # per model, two more (routing) per model on servestack's router, one (truncated
            # bodies) per model whose body HAProxy forwards to its router, one per model that
            # assumes a prefix-cache hit rate, and one per GPU model the pools keep nodes of.
            "gcp:monitoring/dashboard:Dashboard": 1,
            "gcp:monitoring/alertPolicy:AlertPolicy": 5 * len(models)
            + 2 * sum(1 for spec in models if ships_router(spec))
            + sum(1 for spec in models if forwards_body(spec))
            + sum(1 for spec in models if prefix_hit_rate_rule(spec) is not None)
            + len(gpus_kept),
        } | (
            {"gcp:monitoring/notificationChannel:NotificationChannel": len(emails)}
            if emails
            else {}
        )

    @pytest.mark.parametrize("stack", STACKS)
    def test_gpu_pools_follow_the_catalog_and_the_plans(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        run_stack(mocks, stack)
        pools = gpu_pools(mocks)
        planned = PLANNED_POOLS[stack]
        assert set(pools) == set(planned)
        for machine_type, (low, high, spans) in planned.items():
            machine = catalog.MACHINE_TYPES[machine_type]
            chain = PLANNED_CHAINS[stack].get(machine_type)
            assert len(pools[machine_type]) == (len(chain) if chain else 1)
            for pool in pools[machine_type]:
                inputs = pool.inputs
                (accelerator,) = inputs["nodeConfig"]["guestAccelerators"]
                assert (accelerator["type"], accelerator["count"]) == (
                    machine.gke_accelerator,
                    machine.gpus_per_node,
                )
                assert inputs["nodeConfig"]["labels"][MACHINE_TYPE_LABEL] == machine_type
                assert inputs["nodeConfig"]["taints"][0]["key"] == "nvidia.com/gpu"
                # A chain's steps start empty: the class scales whichever has room.
                assert inputs["autoscaling"]["totalMinNodeCount"] == (0 if chain else low)
                assert inputs["autoscaling"]["totalMaxNodeCount"] == high
                assert inputs["autoscaling"]["locationPolicy"] == "ANY"
                assert inputs["upgradeSettings"]["maxUnavailable"] == 0
                if spans:
                    assert inputs["placementPolicy"] == {"type": "COMPACT"}

    @pytest.mark.parametrize("stack", STACKS)
    def test_cluster_is_private_with_workload_identity_and_no_default_pool(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        run_stack(mocks, stack)
        project = load_stack(stack, REPO).gcp.project
        cluster = mocks.one("gcp:container/cluster:Cluster")
        inputs = cluster.inputs
        assert inputs["privateClusterConfig"]["enablePrivateNodes"] is True
        assert inputs["workloadIdentityConfig"] == {"workloadPool": f"{project}.svc.id.goog"}
        assert inputs["removeDefaultNodePool"] is True
        blocks = inputs["masterAuthorizedNetworksConfig"].get("cidrBlocks", [])
        assert all(not block["cidrBlock"].endswith("/0") for block in blocks)
        for pool in mocks.of_type(NODE_POOL):
            assert pool.inputs["cluster"] == f"{cluster.name}-id"  # the mock's id for it
            assert pool.inputs["location"] == inputs["location"]

    @pytest.mark.parametrize("stack", STACKS)
    def test_exports(self, mocks: RecordingMocks, stack: str) -> None:
        run_stack(mocks, stack)
        outputs = exports()
        assert set(outputs) == {
            "cluster_name",
            "cluster_endpoint",
            "kubeconfig",
            "system_node_pool",
            "gpu_node_pools",
            "machine_type_label",
            "rayservices",
            "dashboard",
        }
        rayservices, _ = resolve(pulumi.Output.from_input(outputs["rayservices"]))
        assert rayservices == {
            model: resource_name(spec) for model, spec in load_stack(stack, REPO).profiles.items()
        }
        kubeconfig, secret = resolve(outputs["kubeconfig"])
        assert secret
        endpoint, _ = resolve(outputs["cluster_endpoint"])
        assert yaml.safe_load(kubeconfig)["clusters"][0]["cluster"]["server"] == (
            f"https://{endpoint}"
        )
        pools, _ = resolve(pulumi.Output.from_input(outputs["gpu_node_pools"]))
        # One pool per chain step, named by the chain's machine type, its place and its way.
        assert set(pools) == {
            f"{machine}-{index}-{mode.replace('_', '-')}"
            for machine, chain in PLANNED_CHAINS[stack].items()
            for index, mode in enumerate(chain)
        }
        assert outputs["machine_type_label"] == MACHINE_TYPE_LABEL

    def test_dev_is_zonal_with_a_spot_h100_falling_back_to_flex_start(
        self, mocks: RecordingMocks
    ) -> None:
        run_stack(mocks, "dev")
        cluster = mocks.one("gcp:container/cluster:Cluster").inputs
        assert cluster["location"] == "us-central1-a"
        assert cluster["deletionProtection"] is False
        (steps,) = gpu_pools(mocks).values()
        spot, flex = (pool.inputs for pool in steps)
        machine = catalog.MACHINE_TYPES[spot["nodeConfig"]["machineType"]]
        assert machine.gpus_per_node == 1 and machine.accelerator in {"h100-80gb", "a100-80gb"}
        assert spot["nodeConfig"]["spot"] is True and not spot["nodeConfig"].get("flexStart")
        assert flex["nodeConfig"]["flexStart"] is True and not flex["nodeConfig"].get("spot")
        assert flex["management"]["autoRepair"] is False  # GKE's flex-start precondition
        for inputs in (spot, flex):
            assert inputs["nodeLocations"] == ["us-central1-a"]
            assert "placementPolicy" not in inputs  # one GPU per replica: nothing to compact

    def test_prods_chain_starts_on_its_reservation_in_its_zone(self, mocks: RecordingMocks) -> None:
        run_stack(mocks, "prod")
        cluster = mocks.one("gcp:container/cluster:Cluster").inputs
        assert cluster["location"] == "us-central1"
        assert cluster["deletionProtection"] is True
        (steps,) = gpu_pools(mocks).values()
        reservation, flex, on_demand = (pool.inputs for pool in steps)
        for inputs in (reservation, flex, on_demand):
            assert inputs["nodeConfig"]["machineType"] == "a3-highgpu-8g"
            assert inputs["nodeLocations"] == ["us-central1-a"]
            # No replica spans nodes, and GKE gives no compact flex-start a3-highgpu pool.
            assert "placementPolicy" not in inputs
        affinity = reservation["nodeConfig"]["reservationAffinity"]
        assert affinity["consumeReservationType"] == "SPECIFIC_RESERVATION"
        assert affinity["values"] == ["servestack-prod-a3-highgpu-8g"]
        assert reservation["nodeConfig"]["spot"] is False
        assert flex["nodeConfig"]["flexStart"] is True
        assert on_demand["nodeConfig"]["reservationAffinity"]["consumeReservationType"] == (
            "NO_RESERVATION"
        )


@pytest.mark.parametrize(
    ("stack", "key", "value", "field"),
    [
        (
            "prod",
            "servestack:master_authorized_networks",
            '["0.0.0.0/0"]',
            "servestack:master_authorized_networks",
        ),
        ("dev", "servestack:gpu_pools", "{}", "servestack:gpu_pools.a3-highgpu-1g.spot"),
        ("dev", "gcp:region", "europe-north1", "gcp:region"),
        ("prod", "servestack:system_min_nodes", "9", "servestack:system_min_nodes"),
        ("dev", "servestack:models", '["../../elsewhere/x"]', "servestack:models.0"),
        ("dev", "servestack:system_min_nodes", "true", "servestack:system_min_nodes"),
    ],
    ids=[
        "open-control-plane",
        "spot-only-gpu-on-demand",
        "gpu-not-in-region",
        "min-above-max",
        "path-traversal-model-name",
        "bool-for-a-count",
    ],
)
def test_bad_config_stops_the_program_before_any_resource_is_registered(
    mocks: RecordingMocks, stack: str, key: str, value: str, field: str
) -> None:
    config = pulumi_config(REPO / f"stacks/Pulumi.{stack}.yaml")
    config[key] = value
    if key == "gcp:region":
        config.pop("servestack:cluster_zone", None)
    with pytest.raises(pulumi.RunError) as caught:
        run_stack(mocks, stack, config)
    message = str(caught.value)
    assert f"Pulumi.{stack}.yaml: {field}: " in message
    assert "\n  fix: " in message
    assert mocks.registered == []
