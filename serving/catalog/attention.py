"""What each layer of a model attends with: the facts its KV cache (or recurrent state) follows.

A model's layers come in runs of one kind. Full attention caches every token; a sliding window
caches the last `window` tokens; chunked attention (Llama 4) the tokens of the current chunk of
`window`; linear attention (Qwen3-Next's Gated DeltaNet) keeps a fixed recurrent state per
sequence instead of a cache that grows; DeepSeek's latent attention (MLA) caches one compressed
latent per token, whose widths are the architecture's `kv_lora_rank` and `qk_rope_head_dim`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from serving.frozen import StrictFrozen

AttentionKind = Literal["full", "sliding", "chunked", "linear", "mla"]
# Kinds whose cache stops growing with the context: what the planner counts as not full.
BOUNDED_KINDS: frozenset[str] = frozenset({"sliding", "chunked", "linear"})


class LayerAttention(StrictFrozen):
    """A number of layers that attend the same way (their order does not change memory)."""

    kind: AttentionKind = Field(description="full, sliding, chunked, linear or mla.")
    layers: int = Field(gt=0, le=100_000, description="How many layers attend this way.")
    window: int | None = Field(
        default=None,
        gt=0,
        le=100_000_000,
        description="sliding: tokens in the window; chunked: tokens in a chunk.",
    )
    state_shape: list[int] | None = Field(
        default=None,
        description="linear: one layer's recurrent state per sequence, e.g. Gated DeltaNet's "
        "(value heads, key head dim, value head dim).",
    )
    conv_state_shape: list[int] | None = Field(
        default=None,
        description="linear: one layer's short-convolution state per sequence (channels, "
        "kernel - 1).",
    )
    indexer_topk: int | None = Field(
        default=None,
        gt=0,
        description="mla: tokens DeepSeek V3.2's sparse indexer selects (None: dense MLA).",
    )
    indexer_head_dim: int | None = Field(
        default=None,
        gt=0,
        le=100_000,
        description="mla: width of the sparse indexer's cached key (DeepSeek V3.2: 128).",
    )

    @model_validator(mode="after")
    def _fields_of_its_kind(self) -> LayerAttention:
        windowed = self.kind in ("sliding", "chunked")
        if windowed != (self.window is not None):
            raise ValueError("window is set for sliding and chunked layers, and only for them")
        linear = self.kind == "linear"
        if linear != (self.state_shape is not None):
            raise ValueError("state_shape is set for linear-attention layers, and only for them")
        if self.conv_state_shape is not None and not linear:
            raise ValueError("conv_state_shape is for linear-attention layers only")
        for shape in (self.state_shape, self.conv_state_shape):
            if shape is not None and not (shape and all(0 < d <= 1_000_000 for d in shape)):
                raise ValueError("a state shape is a list of positive dimensions")
        if self.indexer_topk is not None and self.kind != "mla":
            raise ValueError("indexer_topk is for mla layers only")
        if (self.indexer_topk is None) != (self.indexer_head_dim is None):
            raise ValueError("indexer_topk and indexer_head_dim go together (a sparse indexer)")
        return self
