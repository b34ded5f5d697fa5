"""The compiled application's cluster environment, engine arguments, deployment config and
worker shapes: what the compiler derives from a profile, field by field."""

from __future__ import annotations

import pytest
from compiled_support import compile_spec, llama_8b, llm_configs
from ray.serve._private import constants as ray_serve_constants

from serving import catalog
from serving.catalog.fast_paths import FAST_PATHS
from serving.compile.patterns import (
    BUILD_DP_OPENAI_APP,
    BUILD_PD_OPENAI_APP,
)
from serving.compile.routers import RAY_DEFAULT_ROUTER_CLASS
from serving.spec.parts import FastPaths
from serving.spec.profile import ModelSpec

spec = llama_8b


class TestClusterEnv:
    """The 2.56 fast paths live on the head and every worker; each can be switched off."""

    @pytest.mark.parametrize(
        "router", ["servestack_prefix_affinity", "prefix_affinity", "power_of_two", "round_robin"]
    )
    @pytest.mark.parametrize("direct_streaming", [True, False])
    def test_forward_body_exactly_when_a_body_aware_router_meets_direct_streaming(
        self, router: str, direct_streaming: bool
    ) -> None:
        env = compile_spec(
            spec(router=router, fast_paths={"direct_streaming": direct_streaming})
        ).cluster_env
        expected = router.endswith("prefix_affinity") and direct_streaming
        assert ("RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY" in env) == expected
        assert ("RAY_SERVE_INGRESS_REQUEST_ROUTER_METRICS_ENABLED" in env) == expected
        assert env["RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"] == ("1" if direct_streaming else "0")

    def test_every_fast_path_is_on_by_default(self) -> None:
        env = compile_spec(spec()).cluster_env
        for name in (
            "RAY_SERVE_ENABLE_HA_PROXY",
            "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING",
            "RAY_SERVE_THROUGHPUT_OPTIMIZED",
            "VLLM_USE_RAY_V2_EXECUTOR_BACKEND",
        ):
            assert env[name] == "1", name

    def test_every_profile_switch_has_its_variable(self) -> None:
        """The fast-path table drives the compiler and the pack: a switch missing from it would
        be accepted in a profile and never reach a pod."""
        assert {path.field for path in FAST_PATHS} == set(FastPaths.model_fields)
        # + FORWARD_BODY and Ray's count of truncated bodies (the router reads the body)
        assert len(compile_spec(spec()).cluster_env) == len(FAST_PATHS) + 2

    def test_a_fast_path_turned_off_is_written_as_zero(self) -> None:
        """vLLM 0.22 turns the V2 executor on when the variable is unset, so off must be said."""
        compiled = spec(fast_paths={"ray_v2_executor": False, "throughput_optimized": False})
        env = compile_spec(compiled).cluster_env
        assert env["VLLM_USE_RAY_V2_EXECUTOR_BACKEND"] == "0"
        assert env["RAY_SERVE_THROUGHPUT_OPTIMIZED"] == "0"
        assert "async_scheduling" not in compile_spec(compiled).llm_config()["engine_kwargs"]

    def test_fast_path_variables_never_go_into_the_runtime_env(self, shipped: ModelSpec) -> None:
        for _, arguments in llm_configs(shipped):
            env_vars = (arguments.get("runtime_env") or {}).get("env_vars", {})
            assert not set(env_vars) & set(compile_spec(shipped).cluster_env)


class TestEngineKwargs:
    def test_expert_parallel_only_for_mixture_of_experts(self) -> None:
        moe = spec(
            name="qwen3-30b-a3b",
            source="Qwen/Qwen3-30B-A3B",
            architecture="qwen3-30b-a3b",
            machine_type="a3-highgpu-8g",
            parallelism={"data": 8, "expert": True},
        )
        assert compile_spec(moe).llm_config()["engine_kwargs"]["enable_expert_parallel"] is True
        assert compile_spec(moe).llm_config()["engine_kwargs"]["data_parallel_size"] == 8
        assert compile_spec(moe).application["import_path"] == BUILD_DP_OPENAI_APP
        dense = spec(parallelism={"expert": True})  # the planner's ep-on-dense verdict
        assert "enable_expert_parallel" not in compile_spec(dense).llm_config()["engine_kwargs"]

    def test_fp8_kv_cache_on_hopper(self) -> None:
        kwargs = compile_spec(spec(kv_cache_dtype="fp8")).llm_config()["engine_kwargs"]
        assert kwargs["kv_cache_dtype"] == "fp8"

    def test_no_fp8_compute_settings_on_ampere(self) -> None:
        """A100 runs FP8 weights weight-only; it gets no FP8 KV cache even from a checkpoint."""
        for accelerator in ("a100-80gb", "a100-40gb"):
            compiled = spec(accelerator=accelerator, quantization="fp8_online")
            kwargs = compile_spec(compiled).llm_config()["engine_kwargs"]
            assert "kv_cache_dtype" not in kwargs
            assert not catalog.ACCELERATORS[accelerator].has_fp8_math

    def test_online_quantization_is_asked_and_a_checkpoints_scheme_is_not(self) -> None:
        assert (
            compile_spec(spec(quantization="fp8_online")).llm_config()["engine_kwargs"][
                "quantization"
            ]
            == "fp8"
        )
        assert (
            "quantization"
            not in compile_spec(spec(quantization="fp8")).llm_config()["engine_kwargs"]
        )

    def test_profile_engine_args_pass_through(self) -> None:
        kwargs = compile_spec(spec(engine_args={"enable_log_requests": True})).llm_config()[
            "engine_kwargs"
        ]
        assert kwargs["enable_log_requests"] is True

    def test_prefill_and_decode_both_carry_the_nixl_connector(self) -> None:
        compiled = spec(disaggregation={"decode": {"parallelism": {"tensor": 2}}})
        app = compile_spec(compiled).application
        assert app["import_path"] == BUILD_PD_OPENAI_APP
        prefill, decode = app["args"]["prefill_config"], app["args"]["decode_config"]
        for side in (prefill, decode):
            assert side["engine_kwargs"]["kv_transfer_config"]["kv_connector"] == "NixlConnector"
        assert prefill["engine_kwargs"]["tensor_parallel_size"] == 1
        assert decode["engine_kwargs"]["tensor_parallel_size"] == 2
        assert prefill["model_loading_config"] == decode["model_loading_config"]


class TestDeploymentConfig:
    def test_autoscaling_and_router_come_from_the_profile(self) -> None:
        knobs = {"target_ongoing_requests": 40, "upscale_delay_s": 5, "downscale_delay_s": 900}
        compiled = spec(
            autoscaling={"min_replicas": 2, "max_replicas": 6, "max_ongoing_requests": 80} | knobs,
            router={"kind": "prefix_affinity", "imbalanced_threshold": 12},
        )
        config = compile_spec(compiled).llm_config()["deployment_config"]
        assert config["autoscaling_config"] == {"min_replicas": 2, "max_replicas": 6} | knobs
        assert config["max_ongoing_requests"] == 80
        assert config["request_router_config"] == {
            "request_router_class": "ray.serve.llm.request_router:PrefixCacheAffinityRouter",
            "request_router_kwargs": {"imbalanced_threshold": 12},
        }

    def test_power_of_two_is_rays_default_router(self) -> None:
        compiled = spec(router="power_of_two", fast_paths={"direct_streaming": False})
        assert (
            "request_router_config" not in compile_spec(compiled).llm_config()["deployment_config"]
        )

    def test_power_of_two_is_named_under_direct_streaming(self) -> None:
        """Ray 2.56's direct-streaming builder gives a deployment without a router config
        RoundRobinRouter, not power of two."""
        config = compile_spec(spec(router="power_of_two")).llm_config()["deployment_config"]
        router_class = config["request_router_config"]["request_router_class"]
        assert router_class == RAY_DEFAULT_ROUTER_CLASS
        assert router_class == ray_serve_constants.DEFAULT_REQUEST_ROUTER_PATH

    def test_gcs_weights_load_from_the_fuse_mount(self) -> None:
        compiled = spec(source="gs://my-weights/llama/3.1-8b/")
        source = compile_spec(compiled).llm_config()["model_loading_config"]["model_source"]
        assert source == "/mnt/models/my-weights/llama/3.1-8b"


class TestWorkerShapes:
    def test_a_pod_takes_its_node(self, shipped: ModelSpec) -> None:
        for shape in compile_spec(shipped).worker_shapes:
            machine = catalog.MACHINE_TYPES[shape.machine_type]
            assert shape.gpus == machine.gpus_per_node
            assert shape.gke_accelerator == machine.gke_accelerator
            assert 0 < shape.cpus < machine.vcpus
            assert 0 < shape.memory_bytes < machine.memory_bytes
            assert shape.object_store_bytes < shape.shared_memory_bytes < shape.memory_bytes

    def test_pod_bounds_follow_the_plan(self) -> None:
        compiled = spec(
            architecture="llama-3.3-70b",
            machine_type="a3-highgpu-8g",
            parallelism={"tensor": 2},
            autoscaling={"min_replicas": 3, "max_replicas": 9},
        )
        (shape,) = compile_spec(compiled).worker_shapes
        # Four TP=2 replicas per 8-GPU node.
        assert (shape.min_replicas, shape.max_replicas) == (1, 3)

    def test_a_replica_spanning_nodes_takes_whole_nodes(self) -> None:
        compiled = spec(
            architecture="llama-3.3-70b",
            machine_type="a3-highgpu-8g",
            parallelism={"tensor": 8, "pipeline": 2},
            autoscaling={"min_replicas": 1, "max_replicas": 3},
        )
        (shape,) = compile_spec(compiled).worker_shapes
        assert (shape.nodes_per_replica, shape.min_replicas, shape.max_replicas) == (2, 2, 6)

    def test_prefill_and_decode_share_nodes_of_one_machine_type(self) -> None:
        compiled = spec(
            machine_type="a3-highgpu-8g",
            disaggregation={
                "prefill": {"autoscaling": {"min_replicas": 3, "max_replicas": 6}},
                "decode": {"autoscaling": {"min_replicas": 2, "max_replicas": 6}},
            },
        )
        (shape,) = compile_spec(compiled).worker_shapes
        assert shape.roles == ["prefill", "decode"]
        assert (shape.min_replicas, shape.max_replicas) == (1, 2)  # 5 and 12 single-GPU replicas

    def test_a100_80g_is_advertised_by_name(self) -> None:
        """Ray detects every A100 as 'A100'; the 80 GB kind must be declared for LLMConfig's
        accelerator_type to find it."""
        (shape,) = compile_spec(spec(accelerator="a100-80gb")).worker_shapes
        assert shape.ray_resources == {"accelerator_type:A100-80G": 1.0}


def test_servestacks_router_takes_its_tuning_from_the_profile() -> None:
    compiled = spec(router={"kind": "servestack_prefix_affinity", "window_s": 5.0})
    config = compile_spec(compiled).llm_config()["deployment_config"]["request_router_config"]
    assert config == {
        "request_router_class": "serving.router.prefix_affinity:PrefixAffinityRouter",
        "request_router_kwargs": {"window_s": 5.0},
    }
    assert (
        compile_spec(compiled).cluster_env["RAY_SERVE_INGRESS_REQUEST_ROUTER_FORWARD_BODY"] == "1"
    )
