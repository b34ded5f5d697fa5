"""A Hugging Face config.json (and its safetensors index) turned into the planner's
`Architecture`."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from serving.catalog.architecture import int4_bytes_per_weight
from serving.catalog.attention import BOUNDED_KINDS
from serving.catalog.importer.counting import (
    COUNTED_TYPES,
    VISION_TYPES,
    Counts,
    dense_mlp_width,
    language_model,
    vision_tower,
)
from serving.catalog.importer.index import checked_total, read_index
from serving.catalog.importer.layers import (
    MLA_TYPES,
    attention_runs,
    expert_count,
    experts_per_token,
    layer_kinds,
    moe_layers,
)
from serving.catalog.importer.quantization import quantization_block, weight_block, weight_dtypes
from serving.catalog.importer.reading import Fields, JsonFile, check_shape_fields
from serving.catalog.importer.upstream import check_served_by_vllm, transformers_config
from serving.catalog.models import BYTES_PER_WEIGHT, Architecture
from serving.errors import ServestackError

# torch dtypes a checkpoint may be published in that vLLM serves as 16-bit weights (its
# `dtype=auto` serves float32 checkpoints in 16 bits too).
SIXTEEN_BIT = {None, "bfloat16", "float16", "float32"}


def import_architecture(
    config: JsonFile,
    index: JsonFile | None = None,
    *,
    key: str = "inline",
    hf_repo: str | None = None,
    source: str | None = None,
) -> Architecture:
    """The architecture `config` describes; `source` records where it was read (default: the
    file's sha256)."""
    raw = config.data
    file = config.file
    check_served_by_vllm(raw, file)
    check_shape_fields(raw, file)
    values = transformers_config(raw, file)
    top = Fields(values, file, given=raw)
    nested = isinstance(raw.get("text_config"), dict)
    text = Fields(values.text_config, file, "text_config.", raw["text_config"]) if nested else top
    model_type = str(getattr(text.values, "model_type", ""))
    if model_type not in COUNTED_TYPES:
        raise ServestackError(
            file, f"{text.prefix}model_type",
            f"servestack cannot yet count the weights of '{model_type}' models",
            "use a catalog architecture with --architecture; the importer reads "
            + ", ".join(sorted(COUNTED_TYPES)),
        )  # fmt: skip
    layers = text.whole("num_hidden_layers")
    kinds = layer_kinds(text, model_type)
    moe = moe_layers(text, model_type, layers)
    counts = language_model(text, model_type, kinds, moe)
    if isinstance(raw.get("vision_config"), dict):
        vision = Fields(values.vision_config, file, "vision_config.", raw["vision_config"])
        counts = counts + Counts(_vision_params(vision, text))
    weight_dtype, expert_dtype, group, block = _dtypes(raw, file, text.whole("hidden_size"))
    per_weight = {
        dtype: int4_bytes_per_weight(group)
        if dtype == "int4" and group
        else BYTES_PER_WEIGHT[dtype]
        for dtype in {weight_dtype, expert_dtype or weight_dtype}
    }
    total = counts.total
    if index is not None:
        shape_bytes = (
            _embedding_params(text, top) * BYTES_PER_WEIGHT["bf16"]
            + (counts.total - _embedding_params(text, top) - counts.routed_experts)
            * per_weight[weight_dtype]
            + counts.routed_experts * per_weight[expert_dtype or weight_dtype]
        )
        sixteen_bit = quantization_block(raw) is None and _torch_dtype(raw) in SIXTEEN_BIT
        facts = read_index(index, sixteen_bit)
        total = checked_total(facts, index, layers, counts.total, shape_bytes)
    bounded = sum(kind in BOUNDED_KINDS for kind in kinds)
    mla = model_type in MLA_TYPES
    experts = expert_count(text) if any(moe) else 0
    fields: dict[str, Any] = {
        "key": key,
        "hf_repo": hf_repo,
        "total_params": float(total),
        "active_params": float(total - counts.routed_experts + counts.active_routed_experts),
        "num_layers": layers,
        "hidden_size": text.whole("hidden_size"),
        "num_attention_heads": text.whole("num_attention_heads"),
        "num_kv_heads": text.kv_heads(),
        "head_dim": text.whole("v_head_dim") if mla else text.head_dim(),
        "intermediate_size": _expert_width(text, model_type) if experts else text.whole(
            "intermediate_size"),
        "vocab_size": text.whole("vocab_size"),
        "tied_embeddings": top.flag("tie_word_embeddings"),
        "max_position_embeddings": text.whole("max_position_embeddings"),
        "weight_dtype": weight_dtype,
        "expert_weight_dtype": expert_dtype,
        "weight_group_size": group,
        "weight_block": block,
        "dense_intermediate_size": (
            dense_mlp_width(text, model_type) if experts and moe.count(False) else None
        ),
        "attention": "mla" if mla else "gqa",
        "num_experts": experts,
        "experts_per_token": experts_per_token(text) if experts else 0,
        "num_shared_experts": _shared_experts(text, model_type) if experts else 0,
        "dense_layers": moe.count(False) if experts else 0,
        **(_expert_groups(text, model_type) if experts else {}),
        "sliding_window_layers": bounded,
        "attention_sinks": model_type == "gpt_oss",
        "attention_layers": attention_runs(text, kinds),
        "source": source or f"config.json sha256:{config.sha256}",
    }  # fmt: skip
    if mla:
        fields.update(
            kv_lora_rank=text.whole("kv_lora_rank"),
            qk_rope_head_dim=text.whole("qk_rope_head_dim"),
            q_lora_rank=text.optional_int("q_lora_rank"),
        )
    try:
        return Architecture.model_validate(fields)
    except ValidationError as exc:
        problem = "; ".join(error["msg"] for error in exc.errors())
        raise ServestackError(
            file,
            "",
            f"describes no model the planner can size: {problem}",
            "pass the model's published config.json",
        ) from None


def _vision_params(vision: Fields, text: Fields) -> int:
    vision_type = str(getattr(vision.values, "model_type", ""))
    if vision_type not in VISION_TYPES:
        raise vision.refuse(
            "model_type", f"servestack cannot count the weights of a '{vision_type}' image encoder",
            "use a catalog architecture with --architecture; the importer counts "
            + ", ".join(sorted(VISION_TYPES)),
        )  # fmt: skip
    return vision_tower(vision, text.whole("hidden_size"), vision_type)


def _embedding_params(text: Fields, top: Fields) -> int:
    tied = top.flag("tie_word_embeddings")
    return text.whole("vocab_size") * text.whole("hidden_size") * (1 if tied else 2)


def _expert_width(text: Fields, model_type: str) -> int:
    if model_type in ("mixtral", "gpt_oss", "llama4_text"):
        return text.whole("intermediate_size")
    return text.whole("moe_intermediate_size")


def _expert_groups(text: Fields, model_type: str) -> dict[str, int]:
    """Group-limited routing as vLLM's DeepSeek and GLM-4 MoE code reads it (`n_group` groups,
    a token's experts from `topk_group` of them); none elsewhere, nor where n_group is 0 or 1."""
    if model_type not in MLA_TYPES and model_type != "glm4_moe":
        return {}
    groups = text.optional_int("n_group", minimum=0) or 1
    if groups == 1:
        return {}
    return {
        "expert_groups": groups,
        "expert_groups_per_token": text.optional_int("topk_group", minimum=0) or 1,
    }


def _shared_experts(text: Fields, model_type: str) -> int:
    if model_type in MLA_TYPES or model_type == "glm4_moe":
        return text.whole("n_shared_experts", minimum=0)
    if model_type == "qwen3_next":
        return 1 if text.optional_int("shared_expert_intermediate_size", minimum=0) else 0
    if model_type == "llama4_text":
        return 1
    return 0


def _torch_dtype(raw: dict[str, Any]) -> Any:
    return raw.get("torch_dtype", raw.get("dtype"))


def _dtypes(
    raw: dict[str, Any], file: str, hidden_size: int
) -> tuple[str, str | None, int | None, tuple[int, int] | None]:
    """(weights, experts) dtypes as published, an int4 checkpoint's group size and an FP8
    checkpoint's scale blocks."""
    found = quantization_block(raw)
    if found is None:
        dtype = _torch_dtype(raw)
        if dtype not in SIXTEEN_BIT:
            raise ServestackError(
                file, "torch_dtype", f"is {dtype!r}, not a dtype servestack sizes",
                "use bfloat16, float16 or float32 weights, or a quantized checkpoint that "
                "declares itself in quantization_config",
            )  # fmt: skip
        return "bf16", None, None, None
    quantization, field = found
    weights, experts, group = weight_dtypes(quantization, file, field, row_width=hidden_size)
    return weights, experts, group, weight_block(quantization, file, field)
