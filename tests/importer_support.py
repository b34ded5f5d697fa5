"""The stored copies of published config.json files, for the importer's tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from repo import REPO

from serving.catalog.importer import JsonFile, parse_json

HF_CONFIGS = REPO / "tests" / "fixtures" / "hf_configs"
FIXTURES = sorted(path.name for path in HF_CONFIGS.iterdir() if path.is_dir())


def config_dict(fixture: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF_CONFIGS / fixture / "config.json").read_text())
    return copy.deepcopy(data)


def as_file(data: dict[str, Any], file: str = "config.json") -> JsonFile:
    return parse_json(json.dumps(data).encode(), file)


def fixture_file(fixture: str) -> JsonFile:
    path: Path = HF_CONFIGS / fixture / "config.json"
    return parse_json(path.read_bytes(), f"{fixture}/config.json")


def deepseek_v3_2_config() -> dict[str, Any]:
    """DeepSeek-V3.2-Exp's config.json is DeepSeek-V3's with the sparse indexer's three fields
    and its own architecture name (https://huggingface.co/deepseek-ai/DeepSeek-V3.2-Exp); the
    Hub is out of reach here, so it is built from the stored V3 copy."""
    return config_dict("deepseek-ai__DeepSeek-V3") | {
        "architectures": ["DeepseekV32ForCausalLM"],
        "model_type": "deepseek_v32",
        "index_head_dim": 128,
        "index_n_heads": 64,
        "index_topk": 2048,
    }


def glm_4_5_air_config() -> dict[str, Any]:
    """GLM-4.5-Air's config.json is GLM-4.5's with a smaller model in the same architecture
    (Glm4MoeForCausalLM): hidden 4,096, 46 layers of which the first is dense (intermediate
    10,944), 128 routed experts of width 1,408 and one shared, routed scaling 1.0, no QK norm;
    heads, KV heads, head_dim, rotary, vocabulary and context are GLM-4.5's. Those values are
    transformers' Glm4MoeConfig defaults (models/glm4_moe/configuration_glm4_moe.py, the
    pre-release name GLM-4-100B-A10B) and slime's model script for it
    (scripts/models/glm4.5-106B-A12B.sh, as in github.com/vllm-project/vime: 1 dense and 45
    MoE layers, 96 heads, 8 query groups, kv-channels 128, rotary base 1e6, QKV bias, no QK
    layernorm); the Hub is out of reach here, so it is built from the stored GLM-4.5 copy."""
    return config_dict("zai-org__GLM-4.5") | {
        "hidden_size": 4096,
        "intermediate_size": 10944,
        "num_hidden_layers": 46,
        "first_k_dense_replace": 1,
        "n_routed_experts": 128,
        "moe_intermediate_size": 1408,
        "routed_scaling_factor": 1.0,
        "use_qk_norm": False,
    }
