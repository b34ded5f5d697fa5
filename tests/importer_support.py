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
