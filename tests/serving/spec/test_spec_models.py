"""The model spec's rules on what a model is: quantization, identity, inline architectures, frozen
specs, and how problems are reported."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError
from spec_support import (
    accepted,
    llama_8b_fields,
    problems,
    profile,
    the_problem,
)

from serving import catalog
from serving.errors import ProfileValidationError, ServestackError
from serving.plan import planner
from serving.spec.loading import load_profile
from serving.spec.profile import ModelSpec


class TestQuantization:
    def test_fp8_on_an_architecture_already_published_in_fp8_is_rejected(self) -> None:
        error = the_problem(
            architecture="deepseek-v3", name="deepseek-v3", max_model_len=8192, quantization="fp8"
        )
        assert error.field == "quantization"
        assert error.problem.startswith("deepseek-v3 is published in fp8")
        assert error.fix == "set quantization: none"

    @pytest.mark.parametrize("quantization", ["fp8", "fp8_online"])
    def test_fp8_on_a_bf16_architecture_serves_fp8_weights(self, quantization: str) -> None:
        assert accepted(quantization=quantization).weights_dtype == "fp8"

    def test_an_fp8_architecture_is_served_as_published(self) -> None:
        spec = accepted(architecture="deepseek-v3", max_model_len=8192)
        assert spec.weights_dtype == "fp8"


class TestIdentity:
    @pytest.mark.parametrize("source", ["not a repo", "just-a-name", "gs://", "gs://B/weights"])
    def test_a_source_that_is_neither_a_hf_repo_nor_a_gs_path_is_rejected(
        self, source: str
    ) -> None:
        error = the_problem(source=source)
        assert error.field == "source"
        assert "gs://" in error.fix

    @pytest.mark.parametrize(
        "source", ["meta-llama/Llama-3.1-8B-Instruct", "gs://my-bucket/models/llama-3.1-8b"]
    )
    def test_a_hf_repo_or_a_gs_path_is_a_valid_source(self, source: str) -> None:
        assert accepted(source=source).source == source

    def test_a_served_name_with_capitals_or_spaces_is_rejected(self) -> None:
        error = the_problem(name="Llama 8B")
        assert error.field == "name"
        assert "lower-case" in error.fix


class TestInlineArchitecture:
    """A model the catalog lacks is described inline and checked like a catalog entry."""

    def test_inline_architecture_is_accepted_and_its_shape_drives_the_plan(self) -> None:
        spec = accepted(architecture=llama_8b_fields(num_layers=16, num_kv_heads=4))
        assert spec.architecture.key == "my-llama"
        assert spec.architecture.num_layers == 16
        # KV bytes per token = 2 (K and V) x layers x KV heads x head_dim x 2 bytes (bf16)
        assert planner.kv_bytes_per_token(spec) == 2 * 16 * 4 * 128 * 2
        assert planner.kv_bytes_per_token(spec) * 4 == planner.kv_bytes_per_token(accepted())

    def test_inline_architecture_limits_max_model_len_to_its_own_positions(self) -> None:
        error = the_problem(
            architecture=llama_8b_fields(max_position_embeddings=8192), max_model_len=8193
        )
        assert error.field == "max_model_len"
        assert "my-llama's 8,192 positions" in error.problem

    @pytest.mark.parametrize(
        ("groups", "per_token"), [(1, 4), (8, 9), (3, 1)]
    )  # fmt: skip
    def test_routing_groups_a_token_cannot_pick_from_are_refused(
        self, groups: int, per_token: int
    ) -> None:
        # More groups a token than there are, or groups that do not split DeepSeek's 256
        # experts evenly: the planner could not say where a token's experts sit.
        deepseek = catalog.ARCHITECTURES["deepseek-v3"].model_dump()
        deepseek.update(key="my-deepseek", hf_repo=None, expert_groups=groups,
                        expert_groups_per_token=per_token)  # fmt: skip
        error = the_problem(architecture=deepseek)
        assert error.field == "architecture"
        assert "expert_groups" in error.problem

    def test_inline_architecture_missing_fields_names_each_of_them(self) -> None:
        found = problems(profile(architecture={"total_params": 8e9, "active_params": 8e9}))
        fields = {error.field for error in found}
        assert {"architecture.num_layers", "architecture.head_dim", "architecture.vocab_size"} <= (
            fields
        )
        assert all(error.problem == "is required" for error in found)

    def test_inline_architecture_from_a_yaml_file_is_used(self, tmp_path: Path) -> None:
        path = tmp_path / "custom.yaml"
        path.write_text(
            "name: custom\n"
            "source: my-org/custom-7b\n"
            "accelerator: a100-80gb\n"
            "max_model_len: 4096\n"
            "architecture:\n"
            "  key: custom-7b\n"
            "  total_params: 7.0e9\n"
            "  active_params: 7.0e9\n"
            "  num_layers: 28\n"
            "  hidden_size: 3584\n"
            "  num_attention_heads: 28\n"
            "  num_kv_heads: 4\n"
            "  head_dim: 128\n"
            "  intermediate_size: 18944\n"
            "  vocab_size: 152064\n"
            "  max_position_embeddings: 32768\n"
        )
        spec = load_profile(path)
        assert spec.architecture.key == "custom-7b"
        assert planner.kv_bytes_per_token(spec) == 2 * 28 * 4 * 128 * 2


class TestFrozen:
    def test_a_spec_cannot_be_changed_after_it_is_read(self) -> None:
        spec = accepted()
        with pytest.raises(ValidationError, match="frozen"):
            spec.max_model_len = 8192  # type: ignore[misc]

    def test_a_specs_nested_sections_cannot_be_changed_either(self) -> None:
        spec = accepted()
        with pytest.raises(ValidationError, match="frozen"):
            spec.parallelism.tensor = 8  # type: ignore[misc]


class TestReporting:
    def test_several_problems_in_one_file_are_all_reported_with_the_file(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "broken.yaml"
        path.write_text(
            "name: llama-3.1-8b\n"
            "source: meta-llama/Llama-3.1-8B-Instruct\n"
            "architecture: llama-3.1-8b\n"
            "accelerator: h100\n"
            "max_model_len: 4096\n"
            "max_model_lenn: 8192\n"
            "parallelism:\n"
            "  tensor: 0\n"
            "autoscaling:\n"
            "  min_replicas: 3\n"
            "  max_replicas: 2\n"
        )
        with pytest.raises(ProfileValidationError) as caught:
            load_profile(path)
        found = caught.value.errors
        assert {error.field for error in found} == {
            "accelerator",
            "max_model_lenn",
            "parallelism.tensor",
            "autoscaling",
        }
        assert {Path(error.source).resolve() for error in found} == {path.resolve()}
        rendered = caught.value.render()
        assert rendered.count("  fix: ") == len(found)
        assert all(
            f"{error.source}: {error.field}: {error.problem}\n  fix: {error.fix}" in rendered
            for error in found
        )

    def test_a_yaml_syntax_error_names_the_line(self, tmp_path: Path) -> None:
        path = tmp_path / "broken.yaml"
        path.write_text("name: llama-3.1-8b\nsource: [unclosed\naccelerator: h100-80gb\n")
        with pytest.raises(ServestackError) as caught:
            load_profile(path)
        assert Path(caught.value.source).resolve() == path.resolve()
        assert caught.value.field.startswith("line ")
        assert caught.value.problem.startswith("not valid YAML")

    def test_a_missing_profile_file_is_reported_not_raised_as_oserror(self, tmp_path: Path) -> None:
        with pytest.raises(ServestackError) as caught:
            load_profile(tmp_path / "absent.yaml")
        assert caught.value.problem == "no such file"


def test_every_profile_field_is_described() -> None:
    """Error hints and the README's profile reference are built from the descriptions."""
    undescribed: list[str] = []
    seen: set[type[BaseModel]] = set()

    def walk(model: type[BaseModel]) -> None:
        if model in seen:
            return
        seen.add(model)
        for name, field in model.model_fields.items():
            if not field.description:
                undescribed.append(f"{model.__name__}.{name}")
            for candidate in typing.get_args(field.annotation) or (field.annotation,):
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    walk(candidate)

    walk(ModelSpec)
    assert undescribed == []
