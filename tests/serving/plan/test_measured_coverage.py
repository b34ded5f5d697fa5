"""A plan's measured error covers only what the held-back published runs exercised: a plan that
rests on anything else (a B200, int4 weights, linear or sparse attention, MLA off Hopper, an FP8
KV cache, a pipeline, P/D, LoRA) names it, in its JSON, in `plan`'s text and in each
recommendation that rests on it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from importer_support import as_file, config_dict, deepseek_v3_2_config, fixture_file
from planner_support import spec
from rich.console import Console

from infra.cli.report import print_error_bands, print_recommendation
from serving.catalog.importer import import_architecture
from serving.plan import accuracy
from serving.plan.accuracy import MIN_MEASURING_RUNS, beyond_measured, exercised
from serving.plan.planner import plan
from serving.recommend.ranking import recommend
from serving.recommend.shortlist import shortlist
from serving.spec.parts import Parallelism

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


def imported(config: dict[str, Any], **fields: Any) -> Any:
    arch = import_architecture(as_file(config)).model_dump()
    return spec(architecture=arch, max_model_len=32_768, **fields)


def test_what_the_held_runs_measured_is_covered() -> None:
    # BF16 Llama on an H100: dense GQA weights, full attention, Hopper (GPUStack's Qwen3 rows)
    assert plan(spec()).beyond_measured == []
    # gpt-oss on an A100: MXFP4 experts, sliding windows, attention sinks, all measured there
    oss = spec(architecture="gpt-oss-120b", accelerator="a100-80gb", max_model_len=32_768)
    assert plan(oss).beyond_measured == []


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"accelerator": "b200-180gb", "machine_type": "a4-highgpu-8g"}, "Blackwell GPUs"),
        ({"kv_cache_dtype": "fp8"}, "an FP8 KV cache"),
        ({"parallelism": {"tensor": 1, "pipeline": 2}}, "pipeline parallelism"),
        ({"disaggregation": {}}, "prefill/decode disaggregation"),
        (
            {
                "source": "gs://wts/base",
                "lora": {"adapters": [{"name": "a", "source": "gs://wts/adapters/a", "rank": 8}]},
            },
            "LoRA adapters",
        ),
    ],
    ids=["b200", "fp8-kv", "pipeline", "pd", "lora"],
)
def test_a_plan_names_what_no_held_run_exercised(fields: dict[str, Any], named: str) -> None:
    assert named in plan(spec(**fields)).beyond_measured


def test_a_plan_names_the_attention_and_weights_no_held_run_exercised() -> None:
    sparse = imported(deepseek_v3_2_config(), accelerator="h200-141gb",
                      machine_type="a3-ultragpu-8g", parallelism={"tensor": 8})  # fmt: skip
    assert "sparse latent attention (an indexer's top-k) on Hopper" in plan(sparse).beyond_measured
    # the dense MLA of the same model on the same GPUs is measured (DeepSeek-R1's rows)
    assert "latent attention (MLA) on Hopper" not in plan(sparse).beyond_measured
    arch = import_architecture(fixture_file("Qwen__Qwen3-Next-80B-A3B-Instruct")).model_dump()
    hybrid = spec(architecture=arch, max_model_len=32_768, parallelism={"tensor": 4},
                  machine_type="a3-highgpu-4g")  # fmt: skip
    assert "linear attention on Hopper" in plan(hybrid).beyond_measured
    awq = imported(config_dict("Qwen__Qwen3-8B") | {"quantization_config": AWQ})
    assert "int4 weights on Hopper" in plan(awq).beyond_measured
    mla_on_ampere = spec(architecture="deepseek-v3", accelerator="a100-80gb")
    assert "latent attention (MLA) on Ampere" in exercised(mla_on_ampere, Parallelism())
    assert "latent attention (MLA) on Ampere" in beyond_measured(mla_on_ampere, [Parallelism()])


def test_a_feature_needs_enough_held_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    found = exercised(spec(), Parallelism())
    enough = dict.fromkeys(found, MIN_MEASURING_RUNS)
    monkeypatch.setattr(accuracy, "MEASURED_FEATURES", enough)
    assert beyond_measured(spec(), [Parallelism()]) == []
    monkeypatch.setattr(accuracy, "MEASURED_FEATURES", enough | {"Hopper GPUs": 2})
    assert beyond_measured(spec(), [Parallelism()]) == ["Hopper GPUs"]


def test_every_group_of_a_plan_counts() -> None:
    # a P/D pair's two groups each exercise their own layout: a pipelined prefill side is named
    layouts = [Parallelism(tensor=1), Parallelism(tensor=1, pipeline=2)]
    assert "pipeline parallelism" in beyond_measured(spec(), layouts)
    assert "pipeline parallelism" not in beyond_measured(spec(), layouts[:1])


def test_plan_text_says_what_its_band_does_not_cover() -> None:
    b200 = spec(accelerator="b200-180gb", machine_type="a4-highgpu-8g")
    console = Console(record=True, width=400)
    print_error_bands(console, b200, plan(b200).beyond_measured)
    text = console.export_text()
    assert f"fewer than {MIN_MEASURING_RUNS} of those runs exercised" in text
    assert "Blackwell GPUs" in text
    console = Console(record=True, width=400)
    print_error_bands(console, spec(), plan(spec()).beyond_measured)
    assert "not covered" not in console.export_text()
    # a plan scaled by a measurement of its own deployment is no extrapolation there
    console = Console(record=True, width=400)
    print_error_bands(console, b200, plan(b200).beyond_measured, calibrated=True)
    text = console.export_text()
    assert "Blackwell GPUs" in text
    assert "extrapolate" not in text
    assert "calibration of the deployed service below measured it" in text


def test_a_recommendation_on_a_b200_says_its_cost_is_an_extrapolation() -> None:
    candidates = recommend(spec(), itl_target_s=0.2, ttft_target_s=10.0)
    b200 = [c for c in candidates if c.accelerator == "b200-180gb"]
    hopper = [c for c in candidates if c.accelerator == "h100-80gb" and c.parallelism.pipeline == 1]
    assert b200 and hopper
    for candidate in b200:
        assert "Blackwell GPUs" in candidate.beyond_measured
        assert "beyond the measured runs: " in candidate.reason
    assert all(c.beyond_measured == [] for c in hopper)


def test_a_winner_beyond_the_measured_runs_is_called_an_extrapolation() -> None:
    ranked = recommend(spec(), itl_target_s=0.2, ttft_target_s=10.0)
    answer = shortlist(ranked, 0.2, 10.0, None)
    assert answer.winner is not None
    console = Console(record=True, width=400)
    print_recommendation(console, spec(), answer, 200, 10_000)
    warned = "its cost is an extrapolation" in console.export_text()
    assert warned == bool(answer.winner.beyond_measured)
    hopper = [c for c in ranked if c.accelerator == "h100-80gb" and c.meets_targets]
    assert hopper
    measured = dataclasses.replace(answer, winner=hopper[0])
    console = Console(record=True, width=400)
    print_recommendation(console, spec(), measured, 200, 10_000)
    assert "extrapolation" not in console.export_text()
