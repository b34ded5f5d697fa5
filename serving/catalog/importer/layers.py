"""How each layer of a language model attends, and which layers carry experts, as the config
(with transformers' defaults) and vLLM's model code lay them out."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from serving.catalog.attention import LayerAttention
from serving.catalog.importer.reading import Fields

# transformers' `layer_types` names (transformers.configuration_utils.ALLOWED_LAYER_TYPES)
# and the planner's kinds.
LAYER_TYPES = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
}
# Families whose every layer is DeepSeek's latent attention.
MLA_TYPES = frozenset({"deepseek_v3", "deepseek_v32"})


@dataclass(frozen=True)
class Layer:
    attention: str  # full, sliding, chunked, linear or mla
    moe: bool


def layer_kinds(text: Fields, model_type: str) -> list[str]:
    """One attention kind per layer."""
    layers = text.whole("num_hidden_layers")
    if model_type in MLA_TYPES:
        return ["mla"] * layers
    declared = text.raw("layer_types")
    if declared is not None:
        if not isinstance(declared, list | tuple) or len(declared) != layers:
            raise text.refuse(
                "layer_types", f"does not list one type for each of the {layers} layers",
                "list one of full_attention, sliding_attention, chunked_attention, "
                "linear_attention per layer",
            )  # fmt: skip
        unknown = sorted({str(kind) for kind in declared} - set(LAYER_TYPES))
        if unknown:
            raise text.refuse(
                "layer_types", f"names {', '.join(unknown)}, which servestack cannot model",
                "use full_attention, sliding_attention, chunked_attention or linear_attention",
            )  # fmt: skip
        return [LAYER_TYPES[kind] for kind in declared]
    # Families without layer_types (Llama, Mistral, Mixtral, Phi-3, GLM): one window for all
    # layers where the config sets one.
    window = text.optional_int("sliding_window")
    return ["sliding" if window is not None else "full"] * layers


def moe_layers(text: Fields, model_type: str, layers: int) -> list[bool]:
    """Which layers route to experts, by the rule vLLM's model code applies."""
    experts = expert_count(text)
    if not experts:
        return [False] * layers
    if model_type in MLA_TYPES or model_type == "glm4_moe":
        first_dense = text.whole("first_k_dense_replace", minimum=0)
        every = text.optional_int("moe_layer_freq") or 1
        return [i >= first_dense and i % every == 0 for i in range(layers)]
    if model_type == "llama4_text":
        listed = set(text.int_list("moe_layers") or [])
        return [i in listed for i in range(layers)]
    if model_type in ("qwen3_moe", "qwen3_next"):
        dense = set(text.int_list("mlp_only_layers") or [])
        step = text.whole("decoder_sparse_step")
        return [i not in dense and (i + 1) % step == 0 for i in range(layers)]
    return [True] * layers


def expert_count(text: Fields) -> int:
    for name in ("num_local_experts", "num_experts", "n_routed_experts"):
        value = text.optional_int(name, minimum=0)
        if value:
            return value
    return 0


def experts_per_token(text: Fields) -> int:
    for name in ("num_experts_per_tok", "experts_per_token"):
        value = text.optional_int(name, minimum=0)
        if value:
            return value
    raise text.refuse(
        "num_experts_per_tok", "is missing (or 0) for a mixture-of-experts model",
        "set num_experts_per_tok as published",
    )  # fmt: skip


def attention_runs(text: Fields, kinds: list[str]) -> list[LayerAttention]:
    """The layers' kinds as runs for `Architecture.attention_layers`."""
    runs: list[LayerAttention] = []
    for kind, count in Counter(kinds).items():
        window = None
        state = conv = None
        if kind == "sliding":
            window = text.whole("sliding_window")
        elif kind == "chunked":
            window = text.whole("attention_chunk_size")
        elif kind == "linear":
            value_heads = text.whole("linear_num_value_heads")
            key_dim = text.whole("linear_key_head_dim")
            value_dim = text.whole("linear_value_head_dim")
            key_heads = text.whole("linear_num_key_heads")
            channels = 2 * key_heads * key_dim + value_heads * value_dim
            state = [value_heads, key_dim, value_dim]
            conv = [channels, text.whole("linear_conv_kernel_dim", minimum=2) - 1]
        runs.append(
            LayerAttention(
                kind=kind,  # type: ignore[arg-type]
                layers=count,
                window=window,
                state_shape=state,
                conv_state_shape=conv,
                indexer_topk=text.optional_int("index_topk") if kind == "mla" else None,
                indexer_head_dim=_indexer_head_dim(text) if kind == "mla" else None,
            )
        )
    return runs


def _indexer_head_dim(text: Fields) -> int | None:
    """DeepSeek V3.2's indexer keys, cached beside the latent (None: dense MLA)."""
    if text.optional_int("index_topk") is None:
        return None
    return text.whole("index_head_dim")
