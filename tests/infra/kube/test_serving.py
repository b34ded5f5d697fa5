"""The serving plane: every RayService we render is one KubeRay 1.7.0 accepts, carries the
compiled Serve application and fast paths, lands on a pool the stack creates, and no secret
reaches any resource in plaintext.

`crds/ray.io_rayservices.yaml` is KubeRay v1.7.0's CRD as published (a copy kept in the
repository, so a clone tests itself). Validation is as strict as
`kubectl apply --validate=strict`: the CRD's defaults applied, unknown fields refused.
"""

from __future__ import annotations

import ast
import importlib
import json
import sys
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from compiled_support import compile_spec, deployable, model_objects_of
from crd_support import validate_rayservice
from infra_support import SECRET_VALUES, RecordingMocks, pulumi_config, run, use_stack
from repo import REPO

from infra.deploy.components.llm_service import LlmService, LlmServiceArgs
from infra.kube.edge import model_ingress
from infra.kube.manifests import rayservice
from infra.kube.router_code import router_configmap
from infra.platform.config import load_stack
from infra.platform.plan import stack_compute_classes
from infra.platform.resilience import resilience_for
from serving.compile.patterns import llm_configs_of
from serving.compile.scheduling import MACHINE_TYPE_LABEL
from serving.spec.loading import load_profile
from serving.spec.parts import Router
from serving.spec.profile import ModelSpec

PROFILES = sorted((REPO / "stacks" / "models").glob("*.yaml"))
IMAGE = "rayproject/ray-llm:2.56.1-py311-cu128"
KUBERNETES_VERSION = "1.33.0"
# Pulumi's wire marker for a secret value: {SIG: SECRET_SIG, "value": ...}.
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


@pytest.fixture(params=PROFILES, ids=lambda path: path.stem)
def shipped(request: pytest.FixtureRequest) -> ModelSpec:
    return load_profile(request.param)


class TestRayServiceSchema:
    def test_every_shipped_profile_renders_a_valid_rayservice(self, shipped: ModelSpec) -> None:
        stored = validate_rayservice(rayservice(deployable(shipped), IMAGE))
        groups = stored["spec"]["rayClusterConfig"]["workerGroupSpecs"]
        # The CRD's defaults were applied: what the API server would store.
        assert all(group["numOfHosts"] == 1 and group["priority"] == 0 for group in groups)

    @pytest.mark.parametrize(
        ("breakage", "message"),
        [
            (lambda m: m["spec"]["rayClusterConfig"]["workerGroupSpecs"][0].pop("groupName"),
             "'groupName' is a required property"),
            (lambda m: m["spec"]["rayClusterConfig"]["workerGroupSpecs"][0].update(
                rayStartParam={"num-gpus": "8"}), "'rayStartParam' was unexpected"),
            (lambda m: m["spec"]["rayClusterConfig"]["workerGroupSpecs"][0].update(
                maxReplicas="two"), "'two' is not of type 'integer'"),
            (lambda m: m["spec"]["rayClusterConfig"]["autoscalerOptions"].update(version="v3"),
             "'v3' is not one of"),
        ],
        ids=["missing-group-name", "misspelt-field", "wrong-type", "unknown-enum"],
    )  # fmt: skip
    def test_a_broken_rayservice_is_refused(self, breakage: Any, message: str) -> None:
        manifest = rayservice(deployable(load_profile(PROFILES[0])), IMAGE)
        breakage(manifest)
        with pytest.raises(jsonschema.ValidationError, match=message):
            validate_rayservice(manifest)


class TestRayServiceDerivedValues:
    def test_the_serve_config_is_the_compiled_one(self, shipped: ModelSpec) -> None:
        """The compiled application, with the graceful shutdown its nodes' notice allows."""
        manifest = rayservice(deployable(shipped), IMAGE)
        deployed = yaml.safe_load(manifest["spec"]["serveConfigV2"])
        (shutdown,) = {
            config["deployment_config"]["graceful_shutdown_timeout_s"]
            for _, config in llm_configs_of(deployed["applications"][0]["args"])
        }
        assert deployed == compile_spec(shipped, graceful_shutdown_s=shutdown).serve_config

    def test_the_fast_path_environment_is_on_the_head_and_every_worker(
        self, shipped: ModelSpec
    ) -> None:
        cluster = rayservice(deployable(shipped), IMAGE)["spec"]["rayClusterConfig"]
        pods = [cluster["headGroupSpec"]] + cluster["workerGroupSpecs"]
        for pod in pods:
            (container,) = pod["template"]["spec"]["containers"]
            env = {e["name"]: e.get("value") for e in container["env"]}
            assert compile_spec(shipped).cluster_env.items() <= env.items()

    def test_the_head_runs_no_replica_and_no_gpu_on_the_system_pool(
        self, shipped: ModelSpec
    ) -> None:
        head = rayservice(deployable(shipped), IMAGE)["spec"]["rayClusterConfig"]["headGroupSpec"]
        assert head["rayStartParams"]["num-cpus"] == "0"
        (container,) = head["template"]["spec"]["containers"]
        assert "nvidia.com/gpu" not in container["resources"]["limits"]
        assert head["template"]["spec"]["nodeSelector"] == {"servestack.io/pool": "system"}

    def test_workers_take_the_worker_shape(self, shipped: ModelSpec) -> None:
        groups = rayservice(deployable(shipped), IMAGE)["spec"]["rayClusterConfig"][
            "workerGroupSpecs"
        ]
        shapes = compile_spec(shipped).worker_shapes
        assert [g["groupName"] for g in groups] == [s.name for s in shapes]
        for group, shape in zip(groups, shapes, strict=True):
            pod = group["template"]["spec"]
            (container,) = pod["containers"]
            limits = container["resources"]["limits"]
            assert limits["nvidia.com/gpu"] == str(shape.gpus)
            assert group["rayStartParams"]["num-gpus"] == str(shape.gpus)
            assert (group["minReplicas"], group["maxReplicas"]) == (
                shape.min_replicas,
                shape.max_replicas,
            )
            assert pod["nodeSelector"][MACHINE_TYPE_LABEL] == shape.machine_type
            assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
                "tolerations"
            ]
            shm = next(v for v in pod["volumes"] if v["name"] == "dshm")
            assert shm["emptyDir"]["medium"] == "Memory"

    def test_the_hugging_face_token_is_a_secret_reference_on_the_workers_only(self) -> None:
        spec = load_profile(REPO / "stacks/models/llama-3.1-8b.yaml")
        cluster = rayservice(deployable(spec), IMAGE)["spec"]["rayClusterConfig"]
        for group in cluster["workerGroupSpecs"]:
            (container,) = group["template"]["spec"]["containers"]
            (token,) = [e for e in container["env"] if e["name"] == "HF_TOKEN"]
            assert token == {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "llama-3-1-8b-hf-token", "key": "token"}},
            }
        # The head loads no weights: it runs no replica.
        (head,) = cluster["headGroupSpec"]["template"]["spec"]["containers"]
        assert "HF_TOKEN" not in {e["name"] for e in head["env"]}

    def test_gcs_weights_mount_through_gcs_fuse(self) -> None:
        spec = load_profile(REPO / "stacks/models/llama-3.1-8b.yaml").model_copy(
            update={"source": "gs://acme-weights/llama/8b"}
        )
        (group,) = rayservice(deployable(spec), IMAGE, with_hf_token=False)["spec"][
            "rayClusterConfig"
        ]["workerGroupSpecs"]
        template = group["template"]
        assert template["metadata"]["annotations"] == {"gke-gcsfuse/volumes": "true"}
        volume = next(v for v in template["spec"]["volumes"] if v["name"] == "weights")
        assert volume["csi"]["volumeAttributes"]["bucketName"] == "acme-weights"
        loaded_from = yaml.safe_load(rayservice(deployable(spec), IMAGE)["spec"]["serveConfigV2"])
        source = loaded_from["applications"][0]["args"]["llm_configs"][0]["model_loading_config"]
        mount = template["spec"]["containers"][0]["volumeMounts"][-1]["mountPath"]
        assert source["model_source"].startswith(mount)


class TestCoreObjects:
    """Our core Kubernetes objects against Kubernetes' own schemas (strict)."""

    def test_the_edge_route_is_a_valid_ingress(self, shipped: ModelSpec) -> None:
        ingress = model_ingress(
            shipped, host="llm.example.com", requests_per_second=20, stream_timeout_s=600
        )
        kubernetes_validate.validate(ingress, KUBERNETES_VERSION, strict=True)
        (path,) = ingress["spec"]["rules"][0]["http"]["paths"]
        assert path["backend"]["service"]["port"]["number"] == 8000

    def test_every_core_object_the_program_registers_is_valid(self, mocks: RecordingMocks) -> None:
        use_stack(mocks, "prod", pulumi_config(REPO / "stacks/Pulumi.prod.yaml"))
        run(importlib.import_module("infra.__main__").main)
        core = [r for r in mocks.registered if r.type.startswith("kubernetes:core/v1:")]
        core += [r for r in mocks.registered if r.type.startswith("kubernetes:networking")]
        core += [r for r in mocks.registered if r.type.startswith("kubernetes:policy")]
        assert core
        for resource in core:
            manifest = _unwrap_secrets(resource.inputs)
            kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def _unwrap_secrets(value: Any) -> Any:
    if isinstance(value, dict):
        if SECRET_SIG in value.values():
            return _unwrap_secrets(value["value"])
        return {k: _unwrap_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(v) for v in value]
    return value


def _plaintext(value: Any) -> Any:
    """The inputs with every secret-marked value removed: what would be readable in state."""
    if isinstance(value, dict):
        if SECRET_SIG in value.values():
            return "[secret]"
        return {k: _plaintext(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plaintext(v) for v in value]
    return value


class TestProgram:
    @pytest.mark.parametrize("stack", ["dev", "prod"])
    def test_no_secret_appears_in_plaintext_in_any_registered_input(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        use_stack(mocks, stack, pulumi_config(REPO / f"stacks/Pulumi.{stack}.yaml"))
        run(importlib.import_module("infra.__main__").main)
        everything = json.dumps([_unwrap_secrets(r.inputs) for r in mocks.registered])
        readable = json.dumps([_plaintext(r.inputs) for r in mocks.registered])
        # The token does reach its Secret (else the search below proves nothing) ...
        assert SECRET_VALUES[0] in everything
        # ... but only ever inside a value Pulumi encrypts.
        for secret in SECRET_VALUES:
            assert secret not in readable, secret

    @pytest.mark.parametrize("stack", ["dev", "prod"])
    def test_every_worker_group_selects_a_pool_big_enough(
        self, mocks: RecordingMocks, stack: str
    ) -> None:
        use_stack(mocks, stack, pulumi_config(REPO / f"stacks/Pulumi.{stack}.yaml"))
        run(importlib.import_module("infra.__main__").main)
        pools = [
            pool.inputs
            for pool in mocks.of_type("gcp:container/nodePool:NodePool")
            if MACHINE_TYPE_LABEL in pool.inputs["nodeConfig"].get("labels", {})
        ]
        wanted: dict[tuple[tuple[str, str], ...], int] = {}
        for service in mocks.of_type("kubernetes:ray.io/v1:RayService"):
            validate_rayservice(_unwrap_secrets(service.inputs))
            for group in service.inputs["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
                # The machine type's label, or a capacity chain's ComputeClass label.
                selector = tuple(sorted(group["template"]["spec"]["nodeSelector"].items()))
                wanted[selector] = wanted.get(selector, 0) + int(group["maxReplicas"])
        for selector, pods in wanted.items():
            # Every pool the selector matches may be the one with room (each step of a chain).
            matching = [
                pool for pool in pools if set(selector) <= set(pool["nodeConfig"]["labels"].items())
            ]
            assert matching, f"{dict(selector)} selects no pool"
            for pool in matching:
                assert pool["autoscaling"]["totalMaxNodeCount"] >= pods

    def test_rendered_manifests_are_what_the_program_registers(self, mocks: RecordingMocks) -> None:
        use_stack(mocks, "prod", pulumi_config(REPO / "stacks/Pulumi.prod.yaml"))
        run(importlib.import_module("infra.__main__").main)
        stack = load_stack("prod", REPO)
        registered = {
            r.inputs["metadata"]["name"]: r.inputs
            for r in mocks.of_type("kubernetes:ray.io/v1:RayService")
        }
        # The address is the Memorystore instance's (the mock engine's answer for it).
        resilience = resilience_for(
            stack.config.gpu_pools, stream_timeout_s=stack.config.stream_timeout_s,
            gcs_address="rediss://10.9.0.3:6378",
        )  # fmt: skip
        for spec in stack.profiles.values():
            rendered = rayservice(
                deployable(spec, resilience),
                stack.config.ray_image,
                with_hf_token=True,
                resilience=resilience,
                compute_classes=stack_compute_classes(stack),
            )
            assert registered[rendered["metadata"]["name"]]["spec"] == json.loads(
                json.dumps(rendered["spec"])
            )


class TestServestacksRouter:
    """servestack's own request router reaches the stock Ray image as source on the path."""

    @staticmethod
    def spec() -> ModelSpec:
        spec = load_profile(REPO / "stacks/models/llama-3.1-8b.yaml")
        assert spec.router.kind == "servestack_prefix_affinity"  # the shipped default
        return spec

    def test_every_ray_container_mounts_the_router_and_has_it_on_the_path(self) -> None:
        manifest = rayservice(deployable(self.spec()), IMAGE)
        validate_rayservice(manifest)
        cluster = manifest["spec"]["rayClusterConfig"]
        router_class = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"][0]["args"][
            "llm_configs"
        ][0]["deployment_config"]["request_router_config"]["request_router_class"]
        module = router_class.partition(":")[0]
        for pod in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
            (container,) = pod["template"]["spec"]["containers"]
            path = {e["name"]: e.get("value") for e in container["env"]}["PYTHONPATH"]
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            # The class's module resolves under the mount: <path>/serving/router/prefix_affinity.py.
            assert f"{path}/{module.rpartition('.')[0].replace('.', '/')}" in mounts

    def test_the_configmap_holds_the_router_package_whole_as_it_is(self) -> None:
        configmap = router_configmap(self.spec())
        kubernetes_validate.validate(configmap, KUBERNETES_VERSION, strict=True)
        package = REPO / "serving/router"
        assert set(configmap["data"]) == {path.name for path in package.glob("*.py")}
        assert {"__init__.py", "prefix_affinity.py", "precise.py"} <= set(configmap["data"])
        for name, source in configmap["data"].items():
            assert source == (package / name).read_text(), name

    def test_the_router_modules_need_nothing_the_stock_image_lacks(self) -> None:
        """Each shipped module imports the standard library, Ray, and the shipped package; the
        replicas' server also what Ray's LLM image runs vLLM with."""
        engine_side = {"cache_server.py": {"vllm", "zmq", "msgspec"}}
        for path in (REPO / "serving/router").glob("*.py"):
            tree = ast.parse(path.read_text())
            names = {
                alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names
            } | {
                node.module for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
            }  # fmt: skip
            outside = {
                name for name in names
                if name.split(".")[0]
                not in {*sys.stdlib_module_names, "ray", *engine_side.get(path.name, ())}
                and not name.startswith("serving.router.")
            }  # fmt: skip
            assert outside == set(), path.name

    def test_rays_router_ships_nothing(self) -> None:
        spec = load_profile(REPO / "stacks/models/llama-3.1-8b.yaml").model_copy(
            update={"router": Router(kind="prefix_affinity")}
        )
        manifest = rayservice(deployable(spec), IMAGE)
        head = manifest["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
        assert "servestack-router" not in {volume["name"] for volume in head.get("volumes", [])}
        assert "PYTHONPATH" not in {e["name"] for e in head["containers"][0]["env"]}

    def test_the_program_registers_the_router_before_the_rayservice(
        self, mocks: RecordingMocks
    ) -> None:
        run(
            lambda: LlmService(
                "llm",
                LlmServiceArgs(objects=model_objects_of(self.spec()), project="p"),
            )
        )
        (configmap,) = mocks.of_type("kubernetes:core/v1:ConfigMap")
        assert configmap.inputs["metadata"]["name"] == "llama-3-1-8b-servestack-router"
        assert "class PrefixAffinityRouter" in configmap.inputs["data"]["prefix_affinity.py"]
