"""Tiny configs of each family, made from the stored config.json files by shrinking their
widths and layer counts while keeping what decides the KV cache's layout: the kinds of layers
and their pattern, windows, chunks, KV heads and head widths, experts, sinks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from importer_support import config_dict

SMALL = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
}


def _llama() -> dict[str, Any]:
    return config_dict("meta-llama__Llama-3.1-8B-Instruct") | SMALL | {"num_hidden_layers": 4}


def _qwen3_moe() -> dict[str, Any]:
    return config_dict("Qwen__Qwen3-30B-A3B") | SMALL | {
        "num_hidden_layers": 4, "num_experts": 8, "num_experts_per_tok": 2,
        "moe_intermediate_size": 64,
    }  # fmt: skip


def _gemma3() -> dict[str, Any]:
    text = config_dict("google__gemma-3-4b-it")["text_config"]
    # Gemma 3's five sliding layers to one full, twice over, with a 128-token window.
    return text | SMALL | {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        "num_hidden_layers": 12, "sliding_window": 128, "torch_dtype": "bfloat16",
    }  # fmt: skip


def _gpt_oss() -> dict[str, Any]:
    data = config_dict("openai__gpt-oss-20b") | SMALL | {
        "num_hidden_layers": 4, "num_local_experts": 4, "experts_per_token": 2,
        "num_experts_per_tok": 2, "layer_types": ["sliding_attention", "full_attention"] * 2,
    }  # fmt: skip
    del data["quantization_config"]  # MXFP4 needs a GPU; BF16 experts lay out the same cache
    return data


def _llama4() -> dict[str, Any]:
    text = config_dict("meta-llama__Llama-4-Scout-17B-16E-Instruct")["text_config"]
    return text | SMALL | {
        "architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text",
        "num_hidden_layers": 4, "num_local_experts": 2, "intermediate_size_mlp": 256,
        "attention_chunk_size": 256, "no_rope_layers": [1, 1, 1, 0], "moe_layers": [1, 3],
        "interleave_moe_layer_step": 2, "torch_dtype": "bfloat16",
    }  # fmt: skip


def _qwen3_next() -> dict[str, Any]:
    return config_dict("Qwen__Qwen3-Next-80B-A3B-Instruct") | SMALL | {
        "num_hidden_layers": 8, "num_experts": 8, "num_experts_per_tok": 2,
        "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64,
        "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
    }  # fmt: skip


def _deepseek_v3() -> dict[str, Any]:
    data = config_dict("deepseek-ai__DeepSeek-V3")
    del data["quantization_config"]  # block FP8 needs a GPU
    return data | SMALL | {
        "num_hidden_layers": 2, "first_k_dense_replace": 1, "n_routed_experts": 4,
        "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "moe_intermediate_size": 64,
        "q_lora_rank": 64, "kv_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16,
        "v_head_dim": 32, "num_nextn_predict_layers": 0, "torch_dtype": "bfloat16",
    }  # fmt: skip


FAMILIES = {
    "llama": _llama,
    "qwen3_moe": _qwen3_moe,
    "gemma3": _gemma3,
    "gpt_oss": _gpt_oss,
    "llama4_chunked": _llama4,
    "qwen3_next": _qwen3_next,
    "deepseek_v3": _deepseek_v3,
}


def write_models(root: Path) -> dict[str, Path]:
    """One folder per family holding its tiny config.json."""
    folders = {}
    for name, make in FAMILIES.items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(make()))
        folders[name] = folder
    return folders
