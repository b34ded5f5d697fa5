"""A safetensors index beside the config: its exact count is taken where it has one, and an
index that describes another model (fewer layers, a size the shapes cannot weigh) is refused
naming the index file and its field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from importer_support import HF_CONFIGS, as_file, fixture_file

from serving.catalog.importer import (
    INDEX_FILE,
    MAX_INDEX_BYTES,
    JsonFile,
    import_architecture,
    read_model_files,
)
from serving.errors import ServestackError

LLAMA = "meta-llama__Llama-3.1-8B-Instruct"
# 8,030,261,248 parameters (see test_importer) x 2 bytes in bfloat16: the published index's size.
LLAMA_BYTES = 16_060_522_496


def llama_index(total_size: int = LLAMA_BYTES, layers: int = 32, **metadata: Any) -> JsonFile:
    names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    for layer in range(layers):
        for tensor in ("self_attn.q_proj", "self_attn.k_proj", "mlp.down_proj"):
            names.append(f"model.layers.{layer}.{tensor}.weight")
    index = {
        "metadata": {"total_size": total_size, **metadata},
        "weight_map": dict.fromkeys(names, "model-00001-of-00004.safetensors"),
    }
    return as_file(index, INDEX_FILE)


def test_a_bf16_index_gives_the_exact_count() -> None:
    arch = import_architecture(fixture_file(LLAMA), llama_index())
    assert arch.total_params == LLAMA_BYTES / 2


def test_the_index_total_parameters_is_taken_as_exact() -> None:
    # An index saved by recent transformers says its count; one more than the shapes' (a tensor
    # the shapes do not know) is within the 2% the check allows and is what the model holds.
    arch = import_architecture(fixture_file(LLAMA), llama_index(total_parameters=8_030_261_249))
    assert arch.total_params == 8_030_261_249


def test_an_index_of_half_the_size_is_another_model() -> None:
    with pytest.raises(ServestackError) as caught:
        import_architecture(fixture_file(LLAMA), llama_index(total_size=LLAMA_BYTES // 2))
    assert (caught.value.source, caught.value.field) == (INDEX_FILE, "metadata.total_size")


def test_an_index_with_fewer_layers_is_another_model() -> None:
    with pytest.raises(ServestackError) as caught:
        import_architecture(fixture_file(LLAMA), llama_index(layers=16))
    assert (caught.value.source, caught.value.field) == (INDEX_FILE, "weight_map")
    assert "names 16 layers; config.json has 32" in caught.value.problem


def test_an_index_count_far_from_the_shapes_is_refused() -> None:
    with pytest.raises(ServestackError) as caught:
        import_architecture(fixture_file(LLAMA), llama_index(total_parameters=9_000_000_000))
    assert caught.value.field == "metadata"


def test_multi_token_prediction_layers_in_the_index_are_not_served() -> None:
    """DeepSeek-V3's checkpoint holds a 62nd layer (num_nextn_predict_layers: 1) that vLLM
    serves only for speculative decoding: the shapes' 61 layers are the count."""
    names = [f"model.layers.{layer}.self_attn.kv_a_proj_with_mqa.weight" for layer in range(62)]
    index = as_file(
        # 688,586,727,753 bytes: the size the published index gives (FP8 weights, their scales,
        # BF16 embeddings and the MTP layer), as recalled.
        {"metadata": {"total_size": 688_586_727_753}, "weight_map": dict.fromkeys(names, "a")},
        INDEX_FILE,
    )
    arch = import_architecture(fixture_file("deepseek-ai__DeepSeek-V3"), index)
    shapes_only = import_architecture(fixture_file("deepseek-ai__DeepSeek-V3"))
    assert arch.total_params == shapes_only.total_params


def test_a_folder_with_config_and_index_is_read_whole(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_bytes((HF_CONFIGS / LLAMA / "config.json").read_bytes())
    (folder / INDEX_FILE).write_text(json.dumps(llama_index().data))
    files = read_model_files(folder, "model")
    assert files.index is not None and files.config.file == "model/config.json"
    assert import_architecture(files.config, files.index).total_params == LLAMA_BYTES / 2


def test_a_folder_without_config_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ServestackError) as caught:
        read_model_files(tmp_path, "model")
    assert "holds no config.json" in caught.value.problem


def test_an_oversized_file_on_disk_is_refused_before_it_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_bytes((HF_CONFIGS / LLAMA / "config.json").read_bytes())
    with (folder / INDEX_FILE).open("wb") as index:
        index.truncate(MAX_INDEX_BYTES + 1)  # sparse: the size is what is checked
    with pytest.raises(ServestackError) as caught:
        read_model_files(folder, "model")
    assert caught.value.source == f"model/{INDEX_FILE}"
    assert f"more than the {MAX_INDEX_BYTES:,}" in caught.value.problem


def test_an_fp8_checkpoint_declared_in_compression_config_is_weighed_as_fp8() -> None:
    """compressed-tensors' older key: its index is weighed as FP8 weights, not read as a 16-bit
    checkpoint of twice the size (which would refuse it as another model)."""
    data = json.loads((HF_CONFIGS / LLAMA / "config.json").read_text())
    data["compression_config"] = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"type": "float", "num_bits": 8}}},
    }
    # Embeddings and head stay 16-bit: 2 x 128,256 x 4,096 x 2 bytes = 2,101,346,304; the other
    # 6,979,588,096 parameters weigh a byte each.
    fp8_bytes = 2_101_346_304 + 6_979_588_096
    arch = import_architecture(as_file(data), llama_index(total_size=fp8_bytes))
    assert arch.weight_dtype == "fp8" and arch.total_params == 8_030_261_248
