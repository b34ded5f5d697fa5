"""The compiler against Ray 2.56.1 itself: every shipped profile compiles to a Serve document Ray's
own schemas accept, with the engine keys vLLM knows, and to deployment options Ray derives the
GPUs we planned. Then the derived values one by one: placement strategy, the fast-path
environment, expert-parallel and FP8 flags, replica and pod bounds.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace
from typing import Any

import pytest
import ray
from compiled_support import SHIPPED_PROFILES, compile_spec, llama_8b, llm_configs
from ray.llm._internal.serve.core.configs.llm_config import LLMConfig
from ray.llm._internal.serve.core.ingress.builder import LLMServingArgs
from ray.llm._internal.serve.core.server.llm_server import LLMServer
from ray.llm._internal.serve.engines.vllm.vllm_models import VLLMEngineConfig
from ray.llm._internal.serve.serving_patterns.data_parallel.builder import DPOpenAiServingArgs
from ray.llm._internal.serve.serving_patterns.data_parallel.dp_server import DPServer
from ray.llm._internal.serve.serving_patterns.prefill_decode.builder import PDServingArgs
from ray.llm._internal.serve.serving_patterns.prefill_decode.pd_server import (
    PDDecodeServer,
    PDPrefillServer,
)
from ray.runtime_env import RuntimeEnv
from ray.serve.schema import ServeDeploySchema

from serving.compile.patterns import (
    BUILD_DP_OPENAI_APP,
    BUILD_OPENAI_APP,
    BUILD_PD_OPENAI_APP,
)
from serving.plan.planner import plan
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec

ARGS_MODELS: dict[str, Any] = {
    BUILD_OPENAI_APP: LLMServingArgs,
    BUILD_DP_OPENAI_APP: DPOpenAiServingArgs,
    BUILD_PD_OPENAI_APP: PDServingArgs,
}

spec = llama_8b


def server_class(compiled: ModelSpec, role: str) -> Any:
    if role == "prefill":
        return PDPrefillServer
    if role == "decode":
        return PDDecodeServer
    return DPServer if compiled.parallelism.data > 1 else LLMServer


def test_every_seed_feature_has_a_shipped_profile() -> None:
    """Dense BF16 on A100, FP8 70B on H100 with prefix affinity, MoE DP+EP on one H100 node,
    DeepSeek-V3 DP+EP on H200, and a prefill/decode pair."""
    specs = [load_profile(path) for path in SHIPPED_PROFILES]

    def has(check: Any) -> bool:
        return any(check(s) for s in specs)

    assert has(lambda s: s.gpu.key.startswith("a100") and s.weights_dtype == "bf16")
    assert has(
        lambda s: (
            s.architecture.key == "llama-3.3-70b"
            and s.weights_dtype == "fp8"
            and s.gpu.key == "h100-80gb"
            and s.router.kind in ("prefix_affinity", "servestack_prefix_affinity")
        )
    )
    assert has(
        lambda s: (
            s.architecture.is_moe
            and s.parallelism.expert
            and s.gpu.key == "h100-80gb"
            and plan(s).groups[0].placement.nodes_per_replica == 1
        )
    )
    assert has(
        lambda s: (
            s.architecture.key == "deepseek-v3"
            and s.parallelism.expert
            and s.parallelism.data > 1
            and s.gpu.key == "h200-141gb"
        )
    )
    assert has(lambda s: s.disaggregation is not None)


class TestAgainstRay:
    """What Ray 2.56.1 and vLLM 0.22 would do with the compiled application."""

    def test_the_document_is_a_valid_serve_deploy_schema(self, shipped: ModelSpec) -> None:
        document = ServeDeploySchema.model_validate(compile_spec(shipped).serve_config)
        assert [app.name for app in document.applications] == [shipped.name]

    def test_the_builder_import_path_resolves(self, shipped: ModelSpec) -> None:
        module, _, function = compile_spec(shipped).application["import_path"].partition(":")
        builder = getattr(importlib.import_module(module), function)
        assert callable(builder)
        assert module == "ray.serve.llm"

    def test_the_builder_accepts_its_args(self, shipped: ModelSpec) -> None:
        app = compile_spec(shipped).application
        ARGS_MODELS[app["import_path"]].model_validate(app["args"])

    def test_each_llm_config_validates_and_every_engine_key_is_known(
        self, shipped: ModelSpec
    ) -> None:
        for _, arguments in llm_configs(shipped):
            config = LLMConfig.model_validate(arguments)
            engine = VLLMEngineConfig.from_llm_config(config)
            assert engine.tensor_parallel_degree == shipped.parallelism.tensor

    def test_ray_rejects_an_engine_key_vllm_does_not_know(self) -> None:
        arguments = compile_spec(spec()).llm_config()
        arguments["engine_kwargs"]["max_num_seqss"] = 8
        with pytest.raises(ValueError, match="Unknown engine argument: max_num_seqss"):
            VLLMEngineConfig.from_llm_config(LLMConfig.model_validate(arguments))

    def test_ray_places_the_gpus_the_plan_counts(
        self, shipped: ModelSpec, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Ray's own deployment options: serve replicas at min x GPU bundles per replica equals
        the plan's GPUs (replicas x DP x TP x PP), and every bundle asks for a resource the
        worker pods advertise."""
        advertised = {
            key for shape in compile_spec(shipped).worker_shapes for key in shape.ray_resources
        }
        # Ray reads the runtime env of the process deriving the options (the Serve controller,
        # in the cluster); asked here, its API would start a whole local Ray in this test's
        # process, left running under every later test. A driver started without a runtime env
        # reports an empty one.
        monkeypatch.setattr(
            ray, "get_runtime_context", lambda: SimpleNamespace(runtime_env=RuntimeEnv())
        )
        total = 0
        for role, arguments in llm_configs(shipped):
            options = server_class(shipped, role).get_deployment_options(
                LLMConfig.model_validate(arguments)
            )
            bundles = options["placement_group_bundles"]
            replicas = options["autoscaling_config"]["min_replicas"]
            total += replicas * sum(int(bundle.get("GPU", 0)) for bundle in bundles)
            for bundle in bundles:
                assert {k for k in bundle if k.startswith("accelerator_type:")} <= advertised
        assert total == plan(shipped).total_gpus_min


# Runs Ray's builders as the Serve controller on the head does: in a process started with the
# cluster's environment (Ray reads the fast-path switches once, at import).
BUILD_SCRIPT = """
import importlib, json, sys
built = {}
for app in json.load(sys.stdin):
    module, _, function = app["import_path"].partition(":")
    application = getattr(importlib.import_module(module), function)(app["args"])
    built[app["name"]] = {
        "ingress": application._bound_deployment.name,
        "ingress_request_router": application._ingress_request_router is not None,
    }
print(json.dumps(built))
"""


def build_with_rays_builders(apps: list[dict[str, Any]], env: dict[str, str]) -> Any:
    # Ray's builders start a local Ray in that process, which writes its session under Ray's
    # default place (/tmp/ray) unless told otherwise: that is what the local runs' check of
    # /tmp watches, and CI runs this beside them. A place of its own, short enough for Ray's
    # socket paths, removed with everything in it. Not named like a local run's directory
    # (serving.local.runtime.places.RUN_DIR_PREFIX, "ss-"): a local run's check counts those
    # whose owner is gone, and this one has no owner file (seen failing a vLLM run's check in CI).
    with tempfile.TemporaryDirectory(
        prefix="rb-", dir="/tmp", ignore_cleanup_errors=True
    ) as ray_tmp:
        result = subprocess.run(
            [sys.executable, "-c", BUILD_SCRIPT],
            input=json.dumps(apps),
            env={**os.environ, **env, "HF_HUB_OFFLINE": "1", "RAY_TMPDIR": ray_tmp},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


class TestRaysBuilders:
    """Ray's own builders turn every shipped application into a deployable graph."""

    def test_under_direct_streaming_the_server_is_the_ingress(self) -> None:
        specs = [load_profile(path) for path in SHIPPED_PROFILES]
        environments = {json.dumps(compile_spec(s).cluster_env, sort_keys=True) for s in specs}
        assert len(environments) == 1, "shipped profiles share one set of fast paths"
        built = build_with_rays_builders(
            [compile_spec(s).application for s in specs], compile_spec(specs[0]).cluster_env
        )
        assert set(built) == {s.name for s in specs}
        for compiled in specs:
            ingress = built[compiled.name]
            # HAProxy routes straight to the LLM server through Ray's LLMRouter: no Python
            # OpenAI ingress in the token path.
            assert ingress["ingress_request_router"] is True
            expected = {
                BUILD_OPENAI_APP: "LLMServer:",
                BUILD_DP_OPENAI_APP: "DPServer:",
                BUILD_PD_OPENAI_APP: "Decode:",
            }[builder_of(compiled)]
            assert ingress["ingress"].startswith(expected), ingress

    def test_without_direct_streaming_an_openai_ingress_fronts_the_server(self) -> None:
        compiled = spec(fast_paths={"direct_streaming": False})
        env = compile_spec(compiled).cluster_env
        built = build_with_rays_builders([compile_spec(compiled).application], env)[compiled.name]
        assert built == {"ingress": "OpenAiIngress", "ingress_request_router": False}


def builder_of(compiled: ModelSpec) -> str:
    return str(compile_spec(compiled).application["import_path"])


class TestPlacement:
    """STRICT_PACK keeps a tensor-parallel group inside one node; only pipeline stages that must
    cross nodes get PACK."""

    @pytest.mark.parametrize("tensor", [1, 2, 4, 8])
    def test_tensor_parallel_inside_a_node_is_strict_pack(self, tensor: int) -> None:
        compiled = spec(architecture="llama-3.3-70b", parallelism={"tensor": tensor})
        assert (
            compile_spec(compiled).llm_config()["placement_group_config"]["strategy"]
            == "STRICT_PACK"
        )

    def test_pipeline_stages_across_nodes_are_pack(self) -> None:
        compiled = spec(
            architecture="llama-3.3-70b",
            machine_type="a3-highgpu-8g",
            parallelism={"tensor": 8, "pipeline": 2},
        )
        config = compile_spec(compiled).llm_config()
        assert config["placement_group_config"]["strategy"] == "PACK"
        assert config["engine_kwargs"]["pipeline_parallel_size"] == 2

    def test_pipeline_stages_inside_a_node_stay_strict_pack(self) -> None:
        compiled = spec(
            architecture="llama-3.3-70b",
            machine_type="a3-highgpu-8g",
            parallelism={"tensor": 4, "pipeline": 2},
        )
        assert (
            compile_spec(compiled).llm_config()["placement_group_config"]["strategy"]
            == "STRICT_PACK"
        )
