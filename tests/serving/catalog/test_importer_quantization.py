"""Quantized checkpoints declare themselves in `quantization_config`, not in their names: the
importer reads each scheme vLLM 0.22 serves into the planner's dtypes, the planner weighs them
so, and a scheme it does not size is refused with its field named."""

from __future__ import annotations

from typing import Any

import pytest
from importer_support import as_file, config_dict
from planner_support import spec

from serving.catalog.importer import import_architecture
from serving.errors import ServestackError
from serving.plan.memory import weight_bytes

LLAMA = "meta-llama__Llama-3.3-70B-Instruct"
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}


def _compressed(kind: str, bits: int, **weights: Any) -> dict[str, Any]:
    """A compressed-tensors block as llm-compressor writes it."""
    return {
        "quant_method": "compressed-tensors",
        "format": "float-quantized" if kind == "float" else "pack-quantized",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": {"type": kind, "num_bits": bits, "symmetric": True} | weights,
            }
        },
        "ignore": ["lm_head"],
    }


def _imported(quantization: dict[str, Any]) -> Any:
    data = config_dict(LLAMA) | {"quantization_config": quantization}
    return import_architecture(as_file(data))


@pytest.mark.parametrize(
    ("quantization", "dtype"),
    [
        (AWQ, "int4"),
        (GPTQ, "int4"),
        (_compressed("int", 4, strategy="group", group_size=128), "int4"),
        (_compressed("float", 8, strategy="channel"), "fp8"),
        (_compressed("float", 8, strategy="block", block_structure=[128, 128]), "fp8"),
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"),
    ],
    ids=["awq", "gptq", "w4a16", "fp8-dynamic", "fp8-block", "fp8"],
)
def test_each_scheme_reads_as_the_dtype_vllm_serves(
    quantization: dict[str, Any], dtype: str
) -> None:
    arch = _imported(quantization)
    assert (arch.weight_dtype, arch.expert_weight_dtype) == (dtype, None)


def test_int4_weighs_4_bits_and_a_group_scale_and_zero() -> None:
    arch = _imported(AWQ)
    dense, experts = weight_bytes(spec(architecture=arch.model_dump(), source="org/awq"))
    # Llama 3.3 70B: 70,553,706,496 parameters, 2 x 128,256 x 8,192 = 2,101,346,304 of them
    # embeddings in BF16; the rest at 4 + 20 / 128 bits (an FP16 scale and a 4-bit zero point
    # per group of 128).
    assert arch.total_params == 70_553_706_496
    rest = 70_553_706_496 - 2_101_346_304
    assert dense == pytest.approx(2_101_346_304 * 2 + rest * 4.15625 / 8, rel=1e-12)
    assert experts == 0


def test_a_smaller_group_weighs_more_scales() -> None:
    # Kimi K2 Thinking's W4A16 experts share a scale per 32 weights: 4 + 20 / 32 bits.
    arch = _imported(_compressed("int", 4, strategy="group", group_size=32))
    assert (arch.weight_dtype, arch.weight_group_size) == ("int4", 32)
    assert arch.bytes_per_weight("int4") == 4.625 / 8


@pytest.mark.parametrize(
    "quantization",
    [
        GPTQ | {"group_size": -1},
        AWQ | {"group_size": -1},
        _compressed("int", 4, strategy="channel"),
    ],
    ids=["gptq", "awq", "w4a16"],
)
def test_per_channel_int4_is_one_scale_per_row_of_the_hidden_size(
    quantization: dict[str, Any],
) -> None:
    # Llama 3.3 70B's rows are 8,192 wide: 4 + 20 / 8,192 bits a weight.
    arch = _imported(quantization)
    assert (arch.weight_dtype, arch.weight_group_size) == ("int4", 8192)
    assert arch.bytes_per_weight("int4") == (4 + 20 / 8192) / 8


def test_metas_fbgemm_fp8_is_fp8() -> None:
    """Meta's FP8 Llama 3.1 405B and Llama 4 releases: per-channel FP8 weights."""
    block = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
             "modules_to_not_convert": ["lm_head"]}  # fmt: skip
    arch = _imported(block)
    assert (arch.weight_dtype, arch.expert_weight_dtype) == ("fp8", None)


def test_groups_of_two_sizes_are_one_scheme_too_many() -> None:
    block = _compressed("int", 4, strategy="group", group_size=128)
    block["config_groups"]["group_1"] = {
        "targets": ["re:.*mlp.*"],
        "weights": {"type": "int", "num_bits": 4, "strategy": "group", "group_size": 32},
    }
    with pytest.raises(ServestackError) as caught:
        _imported(block)
    assert caught.value.field == "quantization_config.config_groups"


@pytest.mark.parametrize(
    ("quantization", "field", "words"),
    [
        (AWQ | {"bits": 8}, "quantization_config.bits", "is 8"),
        (GPTQ | {"group_size": -2}, "quantization_config.group_size", "-1 for GPTQ"),
        (
            _compressed("int", 8, strategy="channel"),
            "quantization_config.config_groups.group_0.weights",
            "8-bit 'int' weights",
        ),
        (
            _compressed("int", 4, strategy="group"),
            "quantization_config.config_groups.group_0.weights.group_size",
            "in groups",
        ),
        ({"quant_method": "compressed-tensors"}, "quantization_config.config_groups", "missing"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "quantization_config.quant_method",
         "'modelopt'"),
    ],
    ids=["awq-8-bit", "gptq-bad-group", "int8-w8a8", "w4a16-no-group", "no-groups", "nvfp4"],
)  # fmt: skip
def test_a_scheme_it_does_not_size_is_refused_with_its_field(
    quantization: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ServestackError) as caught:
        _imported(quantization)
    assert caught.value.field == field, caught.value.render()
    assert words in caught.value.render() and caught.value.fix


class TestWhereVllmFindsTheBlock:
    """vLLM reads a checkpoint's quantization from `quantization_config`, else from
    compressed-tensors' older `compression_config`, else from a multimodal model's
    `text_config`; the importer reads it from the same places, or it would size a 4- or 8-bit
    checkpoint as 16-bit weights."""

    def test_compression_config_is_read_where_quantization_config_is_absent(self) -> None:
        data = config_dict(LLAMA) | {"compression_config": _compressed("float", 8)}
        arch = import_architecture(as_file(data))
        assert arch.weight_dtype == "fp8"

    def test_a_multimodal_models_text_config_carries_it(self) -> None:
        data = config_dict("google__gemma-3-4b-it")
        data["text_config"]["quantization_config"] = AWQ
        arch = import_architecture(as_file(data))
        assert (arch.weight_dtype, arch.weight_group_size) == ("int4", 128)

    def test_a_refusal_names_the_block_it_read(self) -> None:
        data = config_dict(LLAMA) | {"compression_config": _compressed("int", 8)}
        with pytest.raises(ServestackError) as caught:
            import_architecture(as_file(data))
        assert caught.value.field == "compression_config.config_groups.group_0.weights"


@pytest.mark.parametrize(
    "method", ["AWQ", "Compressed-Tensors", "compressed_tensors"], ids=["upper", "title", "snake"]
)
def test_quant_method_is_read_as_vllm_normalizes_it(method: str) -> None:
    block = AWQ if method == "AWQ" else _compressed("float", 8)
    arch = _imported(block | {"quant_method": method})
    assert arch.weight_dtype == ("int4" if method == "AWQ" else "fp8")


def test_a_block_without_quant_method_says_it_is_missing() -> None:
    """A ModelOpt export's block names its producer, not a quant_method vLLM reads."""
    block = {"producer": {"name": "modelopt"}, "quant_algo": "FP8"}
    with pytest.raises(ServestackError) as caught:
        _imported(block)
    assert caught.value.field == "quantization_config.quant_method"
    assert "is missing" in caught.value.render() and "None" not in caught.value.render()


def test_a_block_that_is_no_object_is_refused_as_such() -> None:
    with pytest.raises(ServestackError) as caught:
        _imported("fp8")  # type: ignore[arg-type]
    assert caught.value.field == "quantization_config"
    assert "not an object" in caught.value.render()
