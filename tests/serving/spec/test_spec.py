"""The model spec's rules: what a profile may say, and how each mistake is reported.

Every rejection is checked for what our code derives from it: the dotted field it names, and the
fix it proposes (the nearest known key, the catalog's limit, the machines that would work).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from repo import REPO
from spec_support import SOURCE, accepted, llama_8b_fields, problems, profile, the_problem

from serving import catalog
from serving.errors import ServestackError
from serving.spec.loading import load_profile, validate
from serving.spec.profile import ModelSpec


class TestDefaults:
    """A minimal profile gets the fast, cache-friendly configuration without asking for it."""

    def test_minimal_profile_turns_on_prefix_caching(self) -> None:
        assert accepted().prefix_caching is True

    def test_minimal_profile_routes_by_servestacks_prefix_affinity_with_its_defaults(
        self,
    ) -> None:
        router = accepted().router
        assert router.kind == "servestack_prefix_affinity"
        assert router.affinity_kwargs() == {}

    def test_minimal_profile_turns_on_every_fast_path(self) -> None:
        fast_paths = accepted().fast_paths
        assert fast_paths.model_dump() == {
            "haproxy": True,
            "direct_streaming": True,
            "throughput_optimized": True,
            "ray_v2_executor": True,
        }

    def test_minimal_profile_is_one_unquantized_gpu_per_replica(self) -> None:
        spec = accepted()
        assert spec.quantization == "none"
        assert spec.weights_dtype == "bf16"
        assert spec.kv_cache_dtype == "auto"
        assert spec.machine_type is None
        assert spec.parallelism.gpus_per_replica == 1
        assert spec.parallelism.expert_parallel_size == 1
        assert (spec.autoscaling.min_replicas, spec.autoscaling.max_replicas) == (1, 1)
        assert spec.disaggregation is None

    def test_a_router_given_as_a_bare_kind_is_accepted(self) -> None:
        assert accepted(router="power_of_two").router.kind == "power_of_two"

    @pytest.mark.parametrize("path", sorted((REPO / "stacks" / "models").glob("*.yaml")), ids=str)
    def test_every_shipped_profile_loads_and_serves_under_its_file_name(self, path: Path) -> None:
        assert load_profile(path).name == path.stem


class TestUnknownKeys:
    """An unknown key is named by its dotted path, with the nearest known key suggested."""

    def test_unknown_top_level_key_names_the_key_and_suggests_the_nearest(self) -> None:
        error = the_problem(max_model_lenn=8192)
        assert error.field == "max_model_lenn"
        assert error.problem == "unknown key 'max_model_lenn'"
        assert error.fix.startswith("did you mean 'max_model_len'?")
        assert all(key in error.fix for key in ModelSpec.model_fields)

    def test_misspelt_required_key_reports_both_the_unknown_and_the_missing_key(self) -> None:
        data = profile(max_model_lenn=8192)
        del data["max_model_len"]
        by_field = {error.field: error for error in problems(data)}
        assert set(by_field) == {"max_model_len", "max_model_lenn"}
        assert by_field["max_model_len"].problem == "is required"
        assert "did you mean 'max_model_len'?" in by_field["max_model_lenn"].fix

    def test_unknown_nested_key_is_named_by_its_path_and_lists_its_siblings(self) -> None:
        error = the_problem(parallelism={"tensr": 2})
        assert error.field == "parallelism.tensr"
        assert error.fix == "did you mean 'tensor'? known keys: data, expert, pipeline, tensor"

    def test_unknown_key_deep_inside_an_optional_section_is_named_by_its_path(self) -> None:
        error = the_problem(disaggregation={"decode": {"autoscaling": {"max_replica": 2}}})
        assert error.field == "disaggregation.decode.autoscaling.max_replica"
        assert error.fix.startswith("did you mean 'max_replicas'?")

    def test_unknown_key_inside_an_inline_architecture_suggests_the_architecture_field(
        self,
    ) -> None:
        fields = llama_8b_fields()
        fields["num_layer"] = fields.pop("num_layers")
        by_field = {error.field: error for error in problems(profile(architecture=fields))}
        assert "did you mean 'num_layers'?" in by_field["architecture.num_layer"].fix
        assert by_field["architecture.num_layers"].problem == "is required"


class TestTypes:
    def test_wrong_type_names_the_field_shows_the_value_and_describes_the_field(self) -> None:
        error = the_problem(max_model_len="long")
        assert error.field == "max_model_len"
        assert "'long'" in error.problem
        assert "Longest sequence (prompt + output) served." in error.fix

    def test_unknown_router_kind_names_the_router_kinds_that_exist(self) -> None:
        error = the_problem(router={"kind": "least_loaded"})
        assert error.field == "router.kind"
        assert all(
            kind in error.problem for kind in ("prefix_affinity", "power_of_two", "round_robin")
        )

    def test_a_profile_that_is_not_a_mapping_is_rejected_as_a_whole(self) -> None:
        with pytest.raises(ServestackError) as caught:
            validate(ModelSpec, ["name", "llama"], SOURCE)
        assert (caught.value.source, caught.value.field) == (SOURCE, "")
        assert caught.value.problem == "expected a mapping of keys to values"


class TestCatalogKeys:
    """Catalog keys are checked against the catalogs, with the nearest key as the fix."""

    def test_unknown_accelerator_suggests_the_full_catalog_key(self) -> None:
        error = the_problem(accelerator="h100")
        assert error.field == "accelerator"
        assert error.problem == "unknown accelerator 'h100'"
        assert error.fix.startswith("did you mean 'h100-80gb'?")
        assert all(key in error.fix for key in catalog.ACCELERATORS)

    @pytest.mark.parametrize(
        ("typed", "nearest"),
        [
            ("llama-3.1-8", "llama-3.1-8b"),
            ("llama-3.3-70", "llama-3.3-70b"),
            ("mixtral-8x7", "mixtral-8x7b"),
            ("deepseek-v2", "deepseek-v3"),
            ("gpt-oss-12b", "gpt-oss-120b"),
        ],
    )
    def test_unknown_architecture_suggests_the_nearest_and_the_inline_form(
        self, typed: str, nearest: str
    ) -> None:
        error = the_problem(architecture=typed)
        assert error.field == "architecture"
        assert error.problem == f"unknown architecture '{typed}'"
        assert error.fix.startswith(f"did you mean '{nearest}'?")
        assert "inline" in error.fix

    def test_unknown_machine_type_suggests_the_nearest(self) -> None:
        error = the_problem(machine_type="a3-highgpu-8")
        assert error.field == "machine_type"
        assert error.fix.startswith("did you mean 'a3-highgpu-8g'?")

    def test_machine_type_carrying_another_accelerator_is_rejected_with_the_right_machines(
        self,
    ) -> None:
        error = the_problem(accelerator="h100-80gb", machine_type="a2-highgpu-8g")
        assert error.field == "machine_type"
        assert error.problem == "machine type a2-highgpu-8g carries a100-40gb, not h100-80gb"
        carriers = [machine.name for machine in catalog.machines_for("h100-80gb")]
        assert carriers  # the fix below would be empty otherwise
        choose = "drop machine_type to let the planner choose"
        assert error.fix == f"use one of {', '.join(carriers)}, or {choose}"

    def test_machine_type_carrying_the_profiles_accelerator_is_accepted(self) -> None:
        spec = accepted(accelerator="a100-40gb", machine_type="a2-highgpu-8g")
        assert spec.machine.gpus_per_node == 8
        assert spec.gpu.key == "a100-40gb"


class TestImpossibleValues:
    @pytest.mark.parametrize("axis", ["tensor", "pipeline", "data"])
    def test_a_parallel_size_of_zero_is_rejected_naming_the_axis(self, axis: str) -> None:
        error = the_problem(parallelism={axis: 0})
        assert error.field == f"parallelism.{axis}"
        assert "greater than or equal to 1" in error.problem

    @pytest.mark.parametrize(
        ("architecture", "positions"), [("llama-3.1-8b", 131072), ("qwen3-0.6b", 40960)]
    )
    def test_max_model_len_beyond_the_architectures_positions_names_the_limit(
        self, architecture: str, positions: int
    ) -> None:
        error = the_problem(architecture=architecture, max_model_len=positions + 1)
        assert error.field == "max_model_len"
        assert f"{positions:,} positions" in error.problem
        assert error.fix == f"set max_model_len to at most {positions}"

    def test_max_model_len_at_the_architectures_positions_is_accepted(self) -> None:
        assert accepted(max_model_len=131072).max_model_len == 131072

    def test_min_replicas_above_max_replicas_is_rejected_with_the_bound_to_raise(self) -> None:
        error = the_problem(autoscaling={"min_replicas": 3, "max_replicas": 2})
        assert error.field == "autoscaling"
        assert error.problem == "min_replicas (3) is above max_replicas (2)"
        assert error.fix.startswith("raise max_replicas to at least 3")

    def test_min_replicas_above_max_replicas_in_a_disaggregated_role_names_the_role(self) -> None:
        error = the_problem(
            disaggregation={"prefill": {"autoscaling": {"min_replicas": 4, "max_replicas": 1}}}
        )
        assert error.field == "disaggregation.prefill.autoscaling"

    def test_scale_to_zero_is_accepted(self) -> None:
        assert accepted(autoscaling={"min_replicas": 0, "max_replicas": 2}).autoscaling

    def test_max_num_batched_tokens_below_max_num_seqs_is_rejected(self) -> None:
        error = the_problem(max_num_batched_tokens=128, max_num_seqs=256)
        assert error.field == "max_num_batched_tokens"
        assert error.fix == "raise max_num_batched_tokens to at least 256"

    def test_max_num_batched_tokens_equal_to_max_num_seqs_is_accepted(self) -> None:
        assert accepted(max_num_batched_tokens=256, max_num_seqs=256).max_num_seqs == 256

    def test_a_workload_longer_than_max_model_len_is_rejected(self) -> None:
        error = the_problem(
            max_model_len=2048, workload={"input_tokens": 2000, "output_tokens": 49}
        )
        assert error.field == "workload"
        assert "2000 + 49 tokens exceed max_model_len 2048" in error.problem

    def test_disaggregation_with_data_parallel_groups_is_rejected(self) -> None:
        error = the_problem(parallelism={"data": 2}, disaggregation={})
        assert error.field == "disaggregation"
        assert "parallelism.data: 1" in error.fix


class TestRouter:
    @pytest.mark.parametrize("kind", ["power_of_two", "round_robin"])
    def test_prefix_affinity_tuning_on_another_router_is_rejected(self, kind: str) -> None:
        error = the_problem(router={"kind": kind, "imbalanced_threshold": 4, "do_eviction": True})
        assert error.field == "router"
        assert error.problem == (
            f"do_eviction, imbalanced_threshold tune the prefix_affinity router, not {kind}"
        )
        assert "kind: prefix_affinity" in error.fix

    def test_servestack_router_tuning_on_rays_router_is_rejected(self) -> None:
        error = the_problem(router={"kind": "prefix_affinity", "window_s": 5})
        assert (
            error.problem
            == "window_s tune the servestack_prefix_affinity router, not prefix_affinity"
        )
        assert error.fix == "remove them, or set kind: servestack_prefix_affinity"

    def test_servestack_router_tuning_reaches_its_router_as_set(self) -> None:
        router = accepted(
            router={"kind": "servestack_prefix_affinity", "imbalance_ratio": 2, "chunk_chars": 128}
        ).router
        assert router.affinity_kwargs() == {"imbalance_ratio": 2, "chunk_chars": 128}

    def test_prefix_affinity_tuning_reaches_the_router_as_set(self) -> None:
        router = accepted(
            router={
                "kind": "prefix_affinity",
                "imbalanced_threshold": 4,
                "match_rate_threshold": 0.2,
            }
        ).router
        assert router.affinity_kwargs() == {"imbalanced_threshold": 4, "match_rate_threshold": 0.2}


class TestWhatRayCannotDo:
    """Profiles asking for what Ray 2.56 and vLLM 0.22 cannot do are stopped at the field."""

    def test_an_engine_argument_vllm_does_not_know_is_named_with_the_nearest(self) -> None:
        error = the_problem(engine_args={"enable_prefix_cachng": True})
        assert error.field == "engine_args.enable_prefix_cachng"
        assert error.problem == "vLLM 0.22.0 has no engine argument 'enable_prefix_cachng'"
        assert error.fix.startswith("did you mean 'enable_prefix_caching'?")

    def test_an_engine_argument_the_profile_already_sets_points_at_its_field(self) -> None:
        error = the_problem(engine_args={"tensor_parallel_size": 4})
        assert error.field == "engine_args.tensor_parallel_size"
        assert error.fix == "set parallelism.tensor instead"

    @pytest.mark.parametrize("key", ["hf_token", "api_key"])
    def test_a_secret_engine_argument_is_refused(self, key: str) -> None:
        error = the_problem(engine_args={key: "hf_abc"})
        assert error.field == f"engine_args.{key}"
        assert "plaintext" in error.problem
        assert "pulumi config set --secret" in error.fix

    def test_vllms_own_http_server_settings_are_refused(self) -> None:
        error = the_problem(engine_args={"ssl_certfile": "/tls/cert.pem"})
        assert "edge ingress" in error.fix

    def test_a_known_engine_argument_is_accepted(self) -> None:
        assert accepted(engine_args={"all2all_backend": "naive"}).engine_args

    def test_a_fast_path_variable_in_env_points_at_the_fast_path_switch(self) -> None:
        error = the_problem(env={"RAY_SERVE_ENABLE_HA_PROXY": "0"})
        assert error.field == "env.RAY_SERVE_ENABLE_HA_PROXY"
        assert error.fix == "set fast_paths.haproxy in the profile instead"

    @pytest.mark.parametrize("name", ["HF_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "KEY"])
    def test_a_secret_looking_variable_is_refused(self, name: str) -> None:
        assert the_problem(env={name: "x"}).field == f"env.{name}"

    def test_env_values_are_kept_as_the_strings_the_environment_holds(self) -> None:
        assert accepted(env={"VLLM_USE_DEEP_GEMM": 1, "NCCL_DEBUG": True}).env == {
            "VLLM_USE_DEEP_GEMM": "1",
            "NCCL_DEBUG": "true",
        }

    def test_direct_streaming_without_haproxy_is_refused(self) -> None:
        error = the_problem(fast_paths={"haproxy": False})
        assert error.field == "fast_paths.direct_streaming"
        assert error.fix == "set haproxy: true, or direct_streaming: false"

    @pytest.mark.parametrize("key", ["source", "architecture", "quantization"])
    def test_prefill_and_decode_cannot_serve_different_models(self, key: str) -> None:
        error = the_problem(disaggregation={"decode": {key: "Other/Model"}})
        assert error.field == "disaggregation.decode"
        assert "one model id on both sides" in error.problem
        assert error.fix.startswith(f"set {key} once at the top of the profile")

    def test_an_unknown_router_argument_is_named_with_the_routers_arguments(self) -> None:
        error = the_problem(router={"kind": "prefix_affinity", "imbalance_threshold": 2})
        assert error.field == "router.imbalance_threshold"
        assert "did you mean 'imbalanced_threshold'?" in error.fix

    def test_an_fp8_kv_cache_on_ampere_is_refused(self) -> None:
        error = the_problem(accelerator="a100-80gb", kv_cache_dtype="fp8")
        assert error.field == "kv_cache_dtype"
        # The GPUs offered are the catalog's FP8-capable ones, never another Ampere.
        assert "h100-80gb" in error.fix and "h200-141gb" in error.fix
        assert "a100" not in error.fix
