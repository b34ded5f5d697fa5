"""A transformer's shape as the planner reads it: what decides memory, KV cache and compute.

The catalog's entries (`serving.catalog.models`), the importer's reading of a config.json and a
profile's inline fields all go through `Architecture`, so all are checked the same way.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from serving.catalog.attention import BOUNDED_KINDS, LayerAttention
from serving.frozen import StrictFrozen

WeightDtype = Literal["bf16", "fp8", "mxfp4", "int4"]

# Bytes per weight. MXFP4 is 4-bit E2M1 values plus one 8-bit scale per 32 values: 4.25 bits.
# INT4 (AWQ, GPTQ, compressed-tensors W4A16) is sized per group by `int4_bytes_per_weight`.
BYTES_PER_WEIGHT: dict[str, float] = {"bf16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8}
# An INT4 group carries an FP16 scale and at most a 4-bit zero point; Marlin, which runs W4A16
# in vLLM, repacks the weights without widening them.
INT4_GROUP_OVERHEAD_BITS = 16 + 4


def int4_bytes_per_weight(group_size: int) -> float:
    return (4 + INT4_GROUP_OVERHEAD_BITS / group_size) / 8


# Bounds far beyond any published model (the largest have about 2e12 parameters and 1e7-token
# contexts) that keep an inline architecture's arithmetic finite.
MAX_PARAMS = 1e15
MAX_DIMENSION = 100_000_000
# Routing groups: published models have at most 8 (DeepSeek-V3).
MAX_EXPERT_GROUPS = 1024
# Bytes per weight as vLLM holds them on the GPU. Below Blackwell vLLM repacks MXFP4 experts into
# the padded layouts of its Marlin/Triton kernels (on B200 the same size is assumed: see
# serving.catalog.fp4): gpt-oss-120b
# logs "Model loading took 65.9651 GiB" on an H100 (vLLM 0.10.1, Marlin;
# https://github.com/vllm-project/vllm/issues/23278) and 64.38 GiB (vLLM 0.14.1, Triton;
# https://github.com/vllm-project/vllm/issues/33155), against 59.8 GiB at 4.25 bits. The larger
# log, less the BF16 non-expert weights, is 4.7 bits per expert weight.
BYTES_PER_WEIGHT_AS_LOADED: dict[str, float] = BYTES_PER_WEIGHT | {"mxfp4": 4.7 / 8}


class Architecture(StrictFrozen):
    """A transformer's shape. Parameter counts are totals over the whole model."""

    key: str = Field(default="inline", description="Catalog key, e.g. 'llama-3.1-8b'.")
    hf_repo: str | None = Field(default=None, description="Where the figures were read.")
    total_params: float = Field(
        gt=0, le=MAX_PARAMS, description="All parameters, embeddings included."
    )
    active_params: float = Field(
        gt=0, le=MAX_PARAMS, description="Parameters used per token (MoE: routed subset)."
    )
    num_layers: int = Field(
        gt=0, le=MAX_DIMENSION, description="Transformer layers (config: num_hidden_layers)."
    )
    hidden_size: int = Field(
        gt=0, le=MAX_DIMENSION, description="Model width (config: hidden_size)."
    )
    num_attention_heads: int = Field(gt=0, le=MAX_DIMENSION, description="Query heads per layer.")
    num_kv_heads: int = Field(
        gt=0, le=MAX_DIMENSION, description="Key/value heads (GQA); equals heads for MHA."
    )
    head_dim: int = Field(gt=0, le=MAX_DIMENSION, description="Width of one attention head.")
    intermediate_size: int = Field(
        gt=0, le=MAX_DIMENSION, description="Dense MLP width (MoE: one expert's width)."
    )
    vocab_size: int = Field(
        gt=0, le=MAX_DIMENSION, description="Tokenizer vocabulary (embedding rows)."
    )
    tied_embeddings: bool = Field(
        default=False, description="The output head shares the input embedding's weights."
    )
    max_position_embeddings: int = Field(
        gt=0, le=MAX_DIMENSION, description="Longest context the model supports."
    )
    weight_dtype: WeightDtype = Field(default="bf16", description="Dtype of the published weights.")
    expert_weight_dtype: WeightDtype | None = Field(
        default=None, description="Dtype of expert weights where it differs (gpt-oss: mxfp4)."
    )
    weight_group_size: int | None = Field(
        default=None,
        gt=0,
        le=MAX_DIMENSION,
        description="int4 weights: how many share one scale (quantization_config's group_size).",
    )
    weight_block: tuple[int, int] | None = Field(
        default=None,
        strict=False,  # a YAML or JSON profile writes the pair as a list
        description="FP8 weights quantized in blocks of [rows, columns], one scale each "
        "(quantization_config's weight_block_size, e.g. [128, 128]); None: per tensor or channel.",
    )
    dense_intermediate_size: int | None = Field(
        default=None,
        gt=0,
        le=MAX_DIMENSION,
        description="MoE models with dense layers: those layers' MLP width (config: "
        "intermediate_size), where intermediate_size is one expert's.",
    )
    attention: Literal["gqa", "mla"] = Field(
        default="gqa", description="gqa: grouped-query (MHA included); mla: DeepSeek's latent."
    )
    kv_lora_rank: int | None = Field(default=None, description="MLA compressed KV width.")
    qk_rope_head_dim: int | None = Field(default=None, description="MLA decoupled RoPE key width.")
    q_lora_rank: int | None = Field(
        default=None, description="MLA compressed query width (None: the query is not compressed)."
    )
    num_experts: int = Field(
        default=0, ge=0, description="Routed experts per MoE layer; 0 = dense."
    )
    experts_per_token: int = Field(default=0, ge=0, description="Experts routed per token.")
    sliding_window_layers: int = Field(
        default=0,
        ge=0,
        description="Layers whose cache does not grow with the context (sliding window, chunked "
        "or linear attention), as attention_layers lays them out.",
    )
    num_shared_experts: int = Field(
        default=0, ge=0, description="Shared experts every token visits (DeepSeek, GLM, Llama 4)."
    )
    dense_layers: int = Field(
        default=0, ge=0, description="MoE models: layers with a dense MLP instead of experts."
    )
    expert_groups: int = Field(
        default=1,
        ge=1,
        le=MAX_EXPERT_GROUPS,
        description="MoE models with group-limited routing (DeepSeek-V3's n_group): the routed "
        "experts split into this many equal groups; 1 = no groups.",
    )
    expert_groups_per_token: int = Field(
        default=1,
        ge=1,
        le=MAX_EXPERT_GROUPS,
        description="How many groups a token's experts may come from (topk_group).",
    )
    attention_layers: list[LayerAttention] | None = Field(
        default=None,
        description="How the layers attend, in runs of one kind (None: all full, or `attention`).",
    )
    source: str | None = Field(
        default=None, description="Where the shapes were read: hf:<repo>@<commit>, or a sha256."
    )
    attention_sinks: bool = Field(
        default=False,
        description="Learned attention sinks (gpt-oss): vLLM runs them on FlashAttention 3 on "
        "Hopper and on its Triton attention backend elsewhere.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Architecture:
        if self.active_params > self.total_params:
            raise ValueError("active_params cannot exceed total_params")
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_kv_heads")
        if self.attention == "mla" and (self.kv_lora_rank is None or self.qk_rope_head_dim is None):
            raise ValueError("attention 'mla' needs kv_lora_rank and qk_rope_head_dim")
        if bool(self.num_experts) != bool(self.experts_per_token):
            raise ValueError("num_experts and experts_per_token go together (both 0 for dense)")
        if self.num_experts and self.experts_per_token >= self.num_experts:
            raise ValueError("experts_per_token must be smaller than num_experts")
        if self.num_experts and self.active_params >= self.total_params:
            raise ValueError("a mixture-of-experts model has fewer active than total parameters")
        if self.sliding_window_layers > self.num_layers:
            raise ValueError("sliding_window_layers cannot exceed num_layers")
        if self.dense_layers and (not self.is_moe or self.dense_layers >= self.num_layers):
            raise ValueError("dense_layers is for MoE models and must leave a layer with experts")
        if self.expert_groups_per_token > self.expert_groups or (
            self.expert_groups > 1 and (not self.is_moe or self.num_experts % self.expert_groups)
        ):
            raise ValueError(
                "expert_groups must divide num_experts of a MoE model, and "
                "expert_groups_per_token must not exceed it"
            )
        if self.num_shared_experts and not self.is_moe:
            raise ValueError("num_shared_experts is for mixture-of-experts models")
        if (self.weight_group_size is not None) != ("int4" in self._dtypes):
            raise ValueError("int4 weights need weight_group_size, and only they take it")
        if self.weight_block is not None and (
            "fp8" not in self._dtypes
            or not all(0 < size <= MAX_DIMENSION for size in self.weight_block)
        ):
            raise ValueError("weight_block is for FP8 weights: two positive block sizes")
        if self.dense_intermediate_size is not None and not self.dense_layers:
            raise ValueError("dense_intermediate_size is for MoE models with dense_layers")
        if self.attention_layers is not None:
            self._consistent_layers(self.attention_layers)
        elif self.sliding_window_layers:
            raise ValueError(
                "sliding_window_layers needs attention_layers to say how those layers attend "
                "(kind sliding with its window, chunked with its chunk, or linear with its state)"
            )
        return self

    def _consistent_layers(self, runs: list[LayerAttention]) -> None:
        if sum(run.layers for run in runs) != self.num_layers:
            raise ValueError("attention_layers must account for num_layers layers")
        bounded = sum(run.layers for run in runs if run.kind in BOUNDED_KINDS)
        if bounded != self.sliding_window_layers:
            raise ValueError(
                "sliding_window_layers must count the sliding, chunked and linear layers of "
                f"attention_layers ({bounded})"
            )
        if any(run.kind == "mla" for run in runs) != (self.attention == "mla"):
            raise ValueError("attention 'mla' and mla attention_layers go together")

    @property
    def _dtypes(self) -> set[str]:
        return {self.weight_dtype, self.expert_weight_dtype or self.weight_dtype}

    def bytes_per_weight(self, dtype: str, as_loaded: bool = True) -> float:
        """Bytes one weight of `dtype` takes in this checkpoint (as vLLM loads it)."""
        if dtype == "int4":
            assert self.weight_group_size is not None
            return int4_bytes_per_weight(self.weight_group_size)
        return (BYTES_PER_WEIGHT_AS_LOADED if as_loaded else BYTES_PER_WEIGHT)[dtype]

    @property
    def provenance(self) -> str:
        """Where the shapes come from: the recorded source, else the catalog entry."""
        return self.source or f"servestack catalog '{self.key}' ({self.hf_repo or 'inline'})"

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def moe_layers(self) -> int:
        """Layers that route to experts (0 for a dense model)."""
        return self.num_layers - self.dense_layers if self.is_moe else 0

    @property
    def embedding_params(self) -> float:
        """Input embedding plus LM head; quantization leaves both in BF16."""
        return float(self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2))

    @property
    def expert_params(self) -> float:
        """Routed-expert parameters, derived from the published totals.

        total - active = (experts - experts_per_token) x one expert (over all layers), so the
        routed experts hold that per-expert size times the expert count. Shared experts count as
        active, non-expert weights, which is how they behave.
        """
        if not self.is_moe:
            return 0.0
        per_expert = (self.total_params - self.active_params) / (
            self.num_experts - self.experts_per_token
        )
        return per_expert * self.num_experts

    @property
    def full_attention_layers(self) -> int:
        return self.num_layers - self.sliding_window_layers

    @property
    def context_attention_layers(self) -> int:
        """Layers the speed model lets attend over the whole context: the full ones, or every
        layer of a model whose layers are all windowed (Mistral 7B v0.1, Phi-3 mini), whose
        windows the planner's workloads rarely pass."""
        return self.full_attention_layers or self.num_layers
