"""FP8 weights scaled in blocks split over tensor parallelism only at whole blocks: vLLM 0.22
refuses a MoE layer whose gate/up shard is not whole blocks of rows, or (above a tensor size of
1) whose down shard is not whole blocks of columns (Fp8MoEMethod.create_weights), and a linear
layer likewise (validate_fp8_block_shape). The planner, the recommender and the policy pack
refuse such a layout by one verdict, `fp8-block-shard`, with a layout that loads."""

from __future__ import annotations

from typing import Any

import pytest
from importer_support import as_file, config_dict
from planner_support import codes, spec

from serving.catalog.importer import import_architecture
from serving.errors import ServestackError
from serving.plan.planner import plan
from serving.recommend.ranking import recommend
from serving.spec.parts import Parallelism

QWEN3_MOE = "Qwen__Qwen3-30B-A3B"
FP8_BLOCKS = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
              "weight_block_size": [128, 128]}  # fmt: skip


def _imported(fixture: str, quantization: dict[str, Any] | None) -> dict[str, Any]:
    data = config_dict(fixture)
    if quantization is not None:
        data["quantization_config"] = quantization
    return import_architecture(as_file(data)).model_dump()


def _verdict(model: Any) -> Any:
    return next(v for v in plan(model).verdicts if v.code == "fp8-block-shard")


def test_qwen3_experts_over_eight_gpus_are_192_rows_and_refused() -> None:
    """Qwen3-235B-A22B's experts are 1,536 wide: over 8 GPUs 192 rows each, one and a half
    128-row blocks (vLLM issue 17569); over 4, 384, three blocks."""
    model = spec(architecture="qwen3-235b-a22b", quantization="fp8", parallelism={"tensor": 8})
    verdict = _verdict(model)
    assert "1,536-wide expert into shards of 192" in verdict.message
    assert verdict.suggestion == Parallelism(tensor=4)
    assert "fp8-block-shard" not in codes(plan(model.model_copy(
        update={"parallelism": Parallelism(tensor=4)})))  # fmt: skip


def test_expert_parallelism_keeps_each_expert_whole() -> None:
    """Under expert parallelism vLLM runs the MoE layers at a tensor size of 1: 1,536 rows are
    twelve whole blocks on whichever rank holds the expert."""
    model = spec(
        architecture="qwen3-235b-a22b", quantization="fp8",
        parallelism={"tensor": 8, "expert": True},
    )  # fmt: skip
    assert "fp8-block-shard" not in codes(plan(model))


def test_an_imported_checkpoint_is_judged_by_its_own_blocks() -> None:
    """Qwen3-30B-A3B's 768-wide experts: whole 128-row blocks over 2 GPUs (384), not over 4
    (192). Without weight_block_size the FP8 scales are per tensor and any split loads."""
    blocks = _imported(QWEN3_MOE, FP8_BLOCKS)
    assert tuple(blocks["weight_block"]) == (128, 128)
    on = {"architecture": blocks, "accelerator": "h100-80gb"}
    assert "fp8-block-shard" in codes(plan(spec(**on, parallelism={"tensor": 4})))
    assert "fp8-block-shard" not in codes(plan(spec(**on, parallelism={"tensor": 2})))
    per_tensor = _imported(QWEN3_MOE, FP8_BLOCKS | {"weight_block_size": None})
    assert per_tensor["weight_block"] is None
    assert "fp8-block-shard" not in codes(plan(spec(architecture=per_tensor,
                                                    parallelism={"tensor": 4})))  # fmt: skip


def test_rows_are_checked_at_any_size_and_columns_only_once_split() -> None:
    """Blocks of 64 rows by 128 columns: 1,536 over 8 is 192, three blocks of rows but one and
    a half of columns, which the split down projection needs; 1,472 unsplit is 23 blocks of
    rows, and an unsplit down projection is not checked by columns."""
    fixture = _imported(QWEN3_MOE, FP8_BLOCKS | {"weight_block_size": [64, 128]})
    split = spec(architecture=fixture | {"intermediate_size": 1536}, parallelism={"tensor": 8})
    assert "fp8-block-shard" in codes(plan(split))
    whole = spec(architecture=fixture | {"intermediate_size": 1472}, parallelism={"tensor": 1})
    assert "fp8-block-shard" not in codes(plan(whole))
    rows = spec(architecture=fixture | {"intermediate_size": 1480}, parallelism={"tensor": 1})
    assert "fp8-block-shard" in codes(plan(rows))


def test_deepseek_v3s_shared_expert_and_dense_layers_are_checked_too() -> None:
    """DeepSeek-V3 over 8 GPUs: experts 2,048 / 8 = 256, the shared expert likewise, the three
    dense layers' 18,432 / 8 = 2,304: all whole blocks. Its dense layers' width read from the
    config is what the check divides."""
    imported = _imported("deepseek-ai__DeepSeek-V3", None)
    assert (imported["dense_intermediate_size"], tuple(imported["weight_block"])) == (
        18432, (128, 128))  # fmt: skip
    eight = spec(architecture="deepseek-v3", accelerator="h200-141gb", parallelism={"tensor": 8})
    assert "fp8-block-shard" not in codes(plan(eight))
    odd = spec(
        architecture=imported | {"dense_intermediate_size": 18432 + 64},
        accelerator="h200-141gb", parallelism={"tensor": 8},
    )  # fmt: skip
    assert "dense layers' MLP" in _verdict(odd).message


def test_online_quantization_scales_per_tensor() -> None:
    """fp8_online: vLLM quantizes the BF16 weights at load with one scale per tensor."""
    model = spec(architecture="qwen3-30b-a3b", quantization="fp8_online",
                 parallelism={"tensor": 4})  # fmt: skip
    assert "fp8-block-shard" not in codes(plan(model))


def test_the_recommender_never_ranks_a_split_vllm_refuses() -> None:
    model = spec(architecture="qwen3-235b-a22b", quantization="fp8")
    ranked = recommend(model, itl_target_s=0.2, ttft_target_s=30.0)
    split = [c for c in ranked if c.parallelism.tensor == 8 and not c.parallelism.expert]
    assert split and all(c.refused_by and not c.meets_targets for c in split)
    assert ranked[0].meets_targets and not (ranked[0].parallelism.tensor == 8
                                            and not ranked[0].parallelism.expert)  # fmt: skip


@pytest.mark.parametrize(
    ("where", "quantization"),
    [
        ("quantization_config.weight_block_size", FP8_BLOCKS | {"weight_block_size": [128]}),
        ("quantization_config.weight_block_size", FP8_BLOCKS | {"weight_block_size": [0, 128]}),
        (
            "quantization_config.config_groups.group_0.weights.block_structure",
            {
                "quant_method": "compressed-tensors",
                "format": "float-quantized",
                "config_groups": {
                    "group_0": {
                        "targets": ["Linear"],
                        "weights": {
                            "type": "float",
                            "num_bits": 8,
                            "strategy": "block",
                            "block_structure": "128",
                        },
                    }
                },
            },
        ),
    ],
    ids=["one-size", "zero", "compressed-tensors-string"],
)
def test_a_malformed_block_is_refused_with_its_field(where: str, quantization: Any) -> None:
    with pytest.raises(ServestackError) as raised:
        _imported(QWEN3_MOE, quantization)
    assert where in str(raised.value)
