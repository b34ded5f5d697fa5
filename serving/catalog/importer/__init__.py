"""Any model a team brings: the planner's `Architecture` read from its Hugging Face config.json
(and, where given, its model.safetensors.index.json).

One importer for every family servestack sizes: Llama 3.x and 4, Qwen2.5, Qwen3 dense and MoE,
Qwen3-Next, Mixtral, Mistral, Phi-4, Gemma 3, gpt-oss, GLM-4.5, DeepSeek-V3 and Kimi K2. What
the file leaves out is what transformers' config class for its `model_type` defaults to (read
from transformers, never restated here); what vLLM does not serve, by vLLM's own registry, is
refused. The counts are the checkpoint's: `total_params` every weight vLLM loads (an image
encoder included), `active_params` what one token runs through.
"""

from __future__ import annotations

from serving.catalog.importer.build import import_architecture
from serving.catalog.importer.reading import (
    CONFIG_FILE,
    INDEX_FILE,
    MAX_CONFIG_BYTES,
    MAX_INDEX_BYTES,
    JsonFile,
    ModelFiles,
    parse_json,
    read_json,
    read_model_files,
)

__all__ = [
    "CONFIG_FILE",
    "INDEX_FILE",
    "MAX_CONFIG_BYTES",
    "MAX_INDEX_BYTES",
    "JsonFile",
    "ModelFiles",
    "import_architecture",
    "parse_json",
    "read_json",
    "read_model_files",
]
