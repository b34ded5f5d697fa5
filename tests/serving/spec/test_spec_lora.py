"""The `lora:` section: adapters named as clean, unique model ids `<base>:<adapter>`, ranks within
`max_lora_rank`, `max_cpu_loras` at least `max_loras`, and every adapter where Ray 2.56.1 loads it
(one gs:// folder, a subfolder per adapter) in the bucket the model's own weights account reads.
Each refusal names the file, the field and what would work."""

from __future__ import annotations

from typing import Any

import pytest
from spec_support import SOURCE, accepted, the_problem

from serving.spec.lora import MAX_LORA_RANKS, adapter_model_id, smallest_rank_at_least

WEIGHTS = "gs://team-models/llama-3.1-8b"
FOLDER = "gs://team-models/adapters"


def adapter(name: str, rank: int = 8, source: str | None = None) -> dict[str, Any]:
    return {"name": name, "source": source or f"{FOLDER}/{name}", "rank": rank}


def lora(*adapters: dict[str, Any], **settings: Any) -> dict[str, Any]:
    return {"adapters": list(adapters or [adapter("sql")]), **settings}


def with_lora(**settings: Any) -> dict[str, Any]:
    return {"source": WEIGHTS, "lora": settings}


class TestAccepted:
    def test_two_adapters_in_one_folder_of_the_weights_bucket(self) -> None:
        spec = accepted(source=WEIGHTS, lora=lora(adapter("sql", 16), adapter("tone", 8)))
        assert spec.lora is not None
        assert [(a.name, a.rank) for a in spec.lora.adapters] == [("sql", 16), ("tone", 8)]
        assert spec.lora.loading_path == FOLDER
        assert spec.lora.buckets == ["team-models"]

    def test_max_cpu_loras_defaults_to_max_loras_as_vllm_does(self) -> None:
        spec = accepted(source=WEIGHTS, lora=lora(max_loras=3))
        assert spec.lora is not None and spec.lora.cpu_loras == 3

    def test_a_profile_without_lora_serves_no_adapter(self) -> None:
        assert accepted().lora is None

    def test_the_model_id_of_an_adapter_is_base_colon_adapter(self) -> None:
        spec = accepted(source=WEIGHTS, lora=lora(adapter("sql-expert")))
        assert spec.lora is not None
        assert spec.adapter_model_ids == ["llama-3.1-8b:sql-expert"]
        assert adapter_model_id("base", "x") == "base:x"


class TestRefused:
    @pytest.mark.parametrize("name", ["SQL", "a:b", "a/b", "-a", "a" * 65, ""])
    def test_an_adapter_name_that_is_no_clean_model_id(self, name: str) -> None:
        error = the_problem(source=WEIGHTS, lora=lora(adapter(name, source=f"{FOLDER}/x")))
        assert error.source == SOURCE
        assert error.field == "lora.adapters.0.name"
        assert "no ':'" in error.fix

    def test_an_adapter_named_twice(self) -> None:
        error = the_problem(source=WEIGHTS, lora=lora(adapter("sql"), adapter("sql")))
        assert error.field == "lora.adapters"
        assert "named twice" in error.problem

    def test_a_rank_above_max_lora_rank_names_the_rank_that_holds_it(self) -> None:
        error = the_problem(
            source=WEIGHTS, lora=lora(adapter("sql"), adapter("big", 48), max_lora_rank=32)
        )
        assert error.field == "lora.adapters.1.rank"
        assert "rank 48, above max_lora_rank 32" in error.problem
        assert error.fix == "raise max_lora_rank to 64"

    def test_a_max_lora_rank_vllm_does_not_build(self) -> None:
        error = the_problem(source=WEIGHTS, lora=lora(max_lora_rank=24))
        assert error.field == "lora.max_lora_rank"

    def test_max_cpu_loras_below_max_loras(self) -> None:
        error = the_problem(source=WEIGHTS, lora=lora(max_loras=4, max_cpu_loras=2))
        assert error.field == "lora.max_cpu_loras"
        assert error.fix == "raise max_cpu_loras to at least 4, or unset it"

    def test_a_hugging_face_adapter_ray_cannot_load(self) -> None:
        error = the_problem(source=WEIGHTS, lora=lora(adapter("sql", source="org/sql-lora")))
        assert error.field == "lora.adapters.0.source"
        assert "Ray Serve LLM 2.56.1 loads adapters only from one cloud folder" in error.problem
        assert error.fix.startswith("copy it to gs://")

    def test_an_adapter_whose_folder_is_not_named_after_it(self) -> None:
        error = the_problem(source=WEIGHTS, lora=lora(adapter("sql", source=f"{FOLDER}/v2")))
        assert error.field == "lora.adapters.0.source"
        assert error.fix == f"put it at {FOLDER}/sql, or name it 'v2'"

    def test_adapters_in_two_folders(self) -> None:
        error = the_problem(
            source=WEIGHTS,
            lora=lora(adapter("sql"), adapter("tone", source="gs://team-models/other/tone")),
        )
        assert error.field == "lora.adapters.1.source"
        assert "one folder" in error.problem

    def test_an_adapter_bucket_the_weights_account_does_not_read(self) -> None:
        error = the_problem(
            source=WEIGHTS, lora=lora(adapter("sql", source="gs://elsewhere/adapters/sql"))
        )
        assert error.field == "lora.adapters.0.source"
        assert "gs://elsewhere, which the model's weights account does not read" in error.problem

    def test_gcs_adapters_on_a_model_without_a_weights_account(self) -> None:
        error = the_problem(lora=lora())  # weights from Hugging Face
        assert error.field == "lora.adapters.0.source"
        assert "no weights account" in error.problem

    def test_a_mixture_of_experts_model(self) -> None:
        error = the_problem(
            source=WEIGHTS, architecture="qwen3-30b-a3b", max_model_len=4096, lora=lora()
        )
        assert error.field == "lora"
        assert "does not lay out" in error.problem

    def test_lora_with_prefill_decode_disaggregation(self) -> None:
        error = the_problem(source=WEIGHTS, lora=lora(), disaggregation={})
        assert error.field == "lora"

    def test_lora_engine_arguments_are_the_sections_not_engine_args(self) -> None:
        error = the_problem(engine_args={"max_loras": 4})
        assert "lora.max_loras" in error.problem + error.fix


def test_the_smallest_rank_vllm_builds_that_holds_a_rank() -> None:
    assert [smallest_rank_at_least(r) for r in (1, 2, 16, 17, 300, 512)] == [
        1, 8, 16, 32, 320, 512,
    ]  # fmt: skip
    assert MAX_LORA_RANKS[-1] == 512
