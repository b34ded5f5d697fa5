"""What the real program registers for dev and prod keeps serving through the faults a GKE GPU
cluster meets: every pod fits its node, every RayService keeps its GCS state in the Redis the
stack creates, heads and GPU workers have disruption budgets, grace periods fit the notice the
nodes give, and upgrades have room in the pools."""

from __future__ import annotations

import importlib
import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run as run_cli
from compiled_support import deployable
from infra_support import TEST_REDIS_AUTH, RecordingMocks, Registered, pulumi_config, run, use_stack
from repo import REPO

from infra.kube.compute_class import compute_class_name
from infra.kube.disruption import (
    GCS_CA_MOUNT,
    drain_command,
    wait_script,
)
from infra.kube.manifests import rayservice
from infra.platform.config import load_stack
from infra.platform.plan import plan_platform
from serving import catalog
from serving.compile.patterns import llm_configs_of
from serving.compile.scheduling import (
    COMPUTE_CLASS_LABEL,
    MACHINE_TYPE_LABEL,
    SPOT_POD_NOTICE_S,
    head_pod_containers,
    misfit,
    quantity,
    requested,
)

GIB = 2**30
RAYSERVICE = "kubernetes:ray.io/v1:RayService"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
STACKS = ["dev", "prod"]


def _may_be_spot(gpu_pools: dict[str, Any], selector: dict[str, str]) -> bool:
    """The pool options a worker group's selector lands on (its machine type's, or those of
    the machine type whose capacity chain its ComputeClass is) ask for Spot somewhere."""
    for machine, options in gpu_pools.items():
        chained = selector.get(COMPUTE_CLASS_LABEL) == compute_class_name(machine)
        if chained or selector.get(MACHINE_TYPE_LABEL) == machine:
            return options.spot or any(step.mode == "spot" for step in options.capacity)
    return False


# Pulumi's wire marker for a secret value: {SIG: SECRET_SIG, "value": ...}.
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


def registered(mocks: RecordingMocks, stack: str, config: dict[str, str] | None = None) -> None:
    use_stack(mocks, stack, config or pulumi_config(REPO / f"stacks/Pulumi.{stack}.yaml"))
    run(importlib.import_module("infra.__main__").main)


def services(mocks: RecordingMocks) -> Iterator[Registered]:
    found = mocks.of_type(RAYSERVICE)
    assert found
    yield from found


class TestEveryPodFitsItsNode:
    def test_the_catalog_reproduces_gkes_published_allocatable(self) -> None:
        """GKE's docs: an e2-standard-4 (4 vCPU, 16 GiB) allocates 3.92 CPU and ~13.3 GiB."""
        node = catalog.kubelet_allocatable(4, 16 * GIB)
        assert node.cpus == pytest.approx(3.92)
        assert node.memory_bytes / GIB == pytest.approx(13.3, abs=0.05)

    def test_the_old_dev_head_could_never_schedule(self) -> None:
        """4 CPU / 16 GiB plus KubeRay's autoscaler sidecar, on an e2-standard-4."""
        old_head = [
            {"resources": {"requests": {"cpu": "4", "memory": "16Gi"}}},
            {"resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}},
        ]
        assert misfit("head", requested(old_head), "e2-standard-4") is not None

    @pytest.mark.parametrize("stack", STACKS)
    def test_every_pod_of_a_shipped_stack_fits(self, stack: str) -> None:
        platform = plan_platform(load_stack(stack, REPO))
        kinds = {pod.pod.split(" ")[-1] for pod in platform.pods}
        assert {"head", "operator"} <= kinds and any("edge" in p.pod for p in platform.pods)
        assert any(pod.pool == "gpu" for pod in platform.pods)
        for pod in platform.pods:
            assert pod.fits, pod

    @pytest.mark.parametrize("stack", STACKS)
    def test_the_registered_head_pods_fit_the_system_pool(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        registered(mocks, stack)
        (system,) = [
            pool
            for pool in mocks.of_type("gcp:container/nodePool:NodePool")
            if "guestAccelerators" not in pool.inputs["nodeConfig"]
        ]
        machine = system.inputs["nodeConfig"]["machineType"]
        for service in services(mocks):
            asked = requested(head_pod_containers(service.inputs["spec"]["rayClusterConfig"]))
            assert misfit(service.name, asked, machine) is None

    def test_a_system_pool_too_small_for_the_head_is_refused(self, repo: Path) -> None:
        stack_file = repo / "stacks/Pulumi.dev.yaml"
        document = yaml.safe_load(stack_file.read_text())
        document["config"]["servestack:system_machine_type"] = "e2-standard-2"
        stack_file.write_text(yaml.safe_dump(document))
        result = run_cli(repo, "pools", "dev")
        assert result.returncode == 2, result.stdout
        assert "servestack:system_machine_type" in result.stderr
        assert "head requests" in result.stderr and "e2-standard-4" in result.stderr
        assert "Traceback" not in result.stderr

    def test_a_system_pool_without_room_for_an_upgrades_second_head_is_refused(
        self, repo: Path
    ) -> None:
        stack_file = repo / "stacks/Pulumi.prod.yaml"
        document = yaml.safe_load(stack_file.read_text())
        document["config"]["servestack:system_machine_type"] = "e2-standard-4"
        document["config"]["servestack:system_max_nodes"] = 2
        document["config"]["servestack:system_min_nodes"] = 1
        stack_file.write_text(yaml.safe_dump(document))
        result = run_cli(repo, "pools", "prod")
        assert result.returncode == 2
        assert "servestack:system_max_nodes" in result.stderr
        assert "second head" in result.stderr

    def test_quantities_read_as_kubernetes_reads_them(self) -> None:
        assert quantity("500m") == 0.5
        assert quantity("16Gi") == 16 * GIB
        assert quantity("400Mi") == 400 * 2**20
        assert quantity(2) == 2


class TestGcsFaultTolerance:
    @pytest.mark.parametrize("stack", STACKS)
    def test_every_rayservice_uses_the_stacks_redis_with_its_password_from_a_secret(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        registered(mocks, stack)
        redis = mocks.one("gcp:redis/instance:Instance").inputs
        assert redis["authEnabled"] is True
        assert redis["connectMode"] == "PRIVATE_SERVICE_ACCESS"
        assert redis["transitEncryptionMode"] == "SERVER_AUTHENTICATION"
        secrets = {
            s.inputs["metadata"]["name"]: s.inputs
            for s in mocks.of_type("kubernetes:core/v1:Secret")
        }
        for service in services(mocks):
            cluster = service.inputs["spec"]["rayClusterConfig"]
            options = cluster["gcsFaultToleranceOptions"]
            # The address the mock engine gave the Memorystore instance, over TLS.
            assert options["redisAddress"] == "rediss://10.9.0.3:6378"
            ref = options["redisPassword"]["valueFrom"]["secretKeyRef"]
            # Memorystore's AUTH string, and only as a value Pulumi encrypts.
            data = secrets[ref["name"]]["stringData"]
            assert SECRET_SIG in data.values()
            assert data["value"][ref["key"]] == TEST_REDIS_AUTH
            head = cluster["headGroupSpec"]["template"]["spec"]
            env = {e["name"]: e.get("value") for e in head["containers"][0]["env"]}
            mounts = {m["mountPath"] for m in head["containers"][0]["volumeMounts"]}
            assert env["RAY_REDIS_CA_CERT"].startswith(GCS_CA_MOUNT) and GCS_CA_MOUNT in mounts

    def test_rays_gcs_turns_tls_on_for_a_rediss_address(self) -> None:
        """Ray 2.56.1 itself: the address scheme the RayServices use switches its client to TLS."""
        from ray._private.services import get_address

        assert get_address("rediss://10.9.0.3:6378") == ("10.9.0.3", "6378", True)


class TestDisruptionBudgets:
    @pytest.mark.parametrize("stack", STACKS)
    def test_heads_and_gpu_workers_have_budgets_selecting_their_pods(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        registered(mocks, stack)
        budgets = [b.inputs for b in mocks.of_type(PDB)]
        for service in services(mocks):
            cluster = service.inputs["spec"]["rayClusterConfig"]
            head = cluster["headGroupSpec"]["template"]
            # KubeRay adds ray.io/node-type and ray.io/group to the template's labels.
            head_labels = head["metadata"]["labels"] | {"ray.io/node-type": "head"}
            assert _budget_for(budgets, head_labels)["minAvailable"] == 1
            assert (
                head["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"]
                == "false"
            )
            for group in cluster["workerGroupSpecs"]:
                labels = group["template"]["metadata"]["labels"] | {
                    "ray.io/node-type": "worker",
                    "ray.io/group": group["groupName"],
                }
                assert _budget_for(budgets, labels)["minAvailable"] == group["minReplicas"] >= 1


def _budget_for(budgets: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, Any]:
    (spec,) = [
        b["spec"] for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ]
    return spec


class TestDrainsFitTheNotice:
    @pytest.mark.parametrize("stack", STACKS)
    def test_serves_graceful_shutdown_ends_inside_the_pods_grace(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        registered(mocks, stack)
        config = load_stack(stack, REPO).config
        for service in services(mocks):
            spec = service.inputs["spec"]
            groups = spec["rayClusterConfig"]["workerGroupSpecs"]
            graces = []
            for group in groups:
                grace = group["template"]["spec"]["terminationGracePeriodSeconds"]
                if _may_be_spot(config.gpu_pools, group["template"]["spec"]["nodeSelector"]):
                    assert grace == SPOT_POD_NOTICE_S  # GKE's Spot notice for ordinary pods
                else:
                    assert grace > config.stream_timeout_s  # a drain lets the longest stream end
                graces.append(grace)
                pre_stop = group["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]
                assert "ray drain-node" in pre_stop["exec"]["command"][-1]
            # HAProxy's reloads (one per replica added or removed) never cut a stream.
            for pod in [spec["rayClusterConfig"]["headGroupSpec"], *groups]:
                env = {
                    e["name"]: e.get("value")
                    for e in pod["template"]["spec"]["containers"][0]["env"]
                }
                assert int(env["RAY_SERVE_HAPROXY_HARD_STOP_AFTER_S"]) > config.stream_timeout_s
            app = yaml.safe_load(spec["serveConfigV2"])["applications"][0]
            for _, llm in llm_configs_of(app["args"]):
                shutdown = llm["deployment_config"]["graceful_shutdown_timeout_s"]
                assert 0 < shutdown < min(graces)

    def test_a_longer_spot_shutdown_reaches_the_pool_and_the_pods(
        self, mocks: RecordingMocks
    ) -> None:
        config = pulumi_config(REPO / "stacks/Pulumi.dev.yaml")
        config["servestack:gpu_pools"] = (
            '{"a3-highgpu-1g": {"spot": true, "spot_shutdown_grace_s": 120}}'
        )
        registered(mocks, "dev", config)
        gpu_pool = next(
            p for p in mocks.of_type("gcp:container/nodePool:NodePool")
            if "guestAccelerators" in p.inputs["nodeConfig"]
        )  # fmt: skip
        kubelet = gpu_pool.inputs["nodeConfig"]["kubeletConfig"]
        assert kubelet["shutdownGracePeriodSeconds"] == 120
        (service,) = services(mocks)
        (group,) = service.inputs["spec"]["rayClusterConfig"]["workerGroupSpecs"]
        # The last 15 s belong to critical system pods.
        assert group["template"]["spec"]["terminationGracePeriodSeconds"] == 105

    def test_the_drain_hook_speaks_rays_drain_node(self) -> None:
        """Ray 2.56.1's own CLI parses the hook's arguments; the wait script is Python."""
        from ray.scripts.scripts import drain_node

        drain = shlex.split(drain_command(15)[-1].split(" || ")[0])
        assert drain[:2] == ["ray", "drain-node"]
        context = drain_node.make_context("drain-node", drain[2:])
        assert context.params["reason"] == "DRAIN_NODE_REASON_PREEMPTION"
        assert context.params["deadline_remaining_seconds"] == 15
        compile(wait_script(12), "<preStop>", "exec")


class TestUpgrades:
    @pytest.mark.parametrize("stack", STACKS)
    def test_the_old_cluster_outlives_the_longest_stream_and_no_deprecated_threshold_is_set(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        registered(mocks, stack)
        timeout = load_stack(stack, REPO).config.stream_timeout_s
        for service in services(mocks):
            spec = service.inputs["spec"]
            assert spec["rayClusterDeletionDelaySeconds"] >= timeout
            assert "serviceUnhealthySecondThreshold" not in spec
            assert "deploymentUnhealthySecondThreshold" not in spec

    def test_every_step_of_prods_chain_holds_the_peak_with_upgrade_room(self) -> None:
        """Prod's reservation overflows to flex-start and on demand, so it needs no upgrade room
        of its own: any step may be the one with room, and each holds peak plus upgrade."""
        steps = plan_platform(load_stack("prod", REPO)).gpu_pools
        assert [pool.mode for pool in steps] == ["reservation", "flex_start", "on_demand"]
        for pool in steps:
            assert pool.upgrade_room_nodes >= 1
            assert pool.max_nodes == steps[0].max_nodes


class TestWeightsCache:
    def test_a_node_cache_is_a_host_directory_the_next_pod_on_the_node_finds(self) -> None:
        from infra.kube.disruption import Resilience

        spec = load_stack("dev", REPO).profiles["llama-3.1-8b"]
        by_pod = rayservice(deployable(spec), "rayproject/ray-llm:2.56.1-py311-cu128")
        by_node = rayservice(
            deployable(spec, Resilience(weights_cache="node")),
            "rayproject/ray-llm:2.56.1-py311-cu128",
            resilience=Resilience(weights_cache="node"),
        )

        def cache(manifest: dict[str, Any]) -> dict[str, Any]:
            (group,) = manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]
            (volume,) = [v for v in group["template"]["spec"]["volumes"] if v["name"] == "hf-cache"]
            return volume

        assert "emptyDir" in cache(by_pod)
        assert cache(by_node)["hostPath"]["path"].startswith("/mnt/stateful_partition/")


class TestMaintenanceExclusion:
    def test_a_stacks_exclusion_reaches_the_cluster(self, mocks: RecordingMocks) -> None:
        config = pulumi_config(REPO / "stacks/Pulumi.prod.yaml")
        # Prod's chain without its flex-start step, whose 7-day nodes a 16-day exclusion
        # would outlive (refused: tests/policies/negative/stacks/).
        pools = json.loads(config["servestack:gpu_pools"])
        chain = pools["a3-highgpu-8g"]["capacity"]
        pools["a3-highgpu-8g"]["capacity"] = [step for step in chain if "flex_start" not in step]
        config["servestack:gpu_pools"] = json.dumps(pools)
        config["servestack:maintenance_exclusions"] = (
            '[{"name": "launch", "start_time": "2026-12-20T00:00:00Z", '
            '"end_time": "2027-01-05T00:00:00Z"}]'
        )
        registered(mocks, "prod", config)
        policy = mocks.one("gcp:container/cluster:Cluster").inputs["maintenancePolicy"]
        (exclusion,) = policy["maintenanceExclusions"]
        assert exclusion["exclusionName"] == "launch"
        assert exclusion["exclusionOptions"]["scope"] == "NO_MINOR_OR_NODE_UPGRADES"

    def test_an_exclusion_ending_before_it_starts_is_refused(self, repo: Path) -> None:
        stack_file = repo / "stacks/Pulumi.dev.yaml"
        document = yaml.safe_load(stack_file.read_text())
        document["config"]["servestack:maintenance_exclusions"] = [
            {"name": "x", "start_time": "2026-12-20T00:00:00Z", "end_time": "2026-12-01T00:00:00Z"}
        ]
        stack_file.write_text(yaml.safe_dump(document))
        result = run_cli(repo, "pools", "dev")
        assert result.returncode == 2
        assert "maintenance_exclusions" in result.stderr and "end_time" in result.stderr
