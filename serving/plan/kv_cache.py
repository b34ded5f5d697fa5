"""One GPU's KV cache as vLLM 0.22 lays it out: a page per layer by its attention kind, the
hybrid KV-cache manager's groups of layers, the blocks one sequence takes, and so how many
sequences the memory left over holds.

Read from vLLM 0.22's source (vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py,
vllm/platforms/interface.py `_align_hybrid_block_size`, vllm/config/vllm.py):

- A block is `block_size` tokens. Attention pages are block x 2 x KV heads x head dim x dtype;
  MLA pages block x (kv_lora_rank + RoPE key) x dtype, one latent for keys and values, or 656
  bytes a token in DeepSeek V3.2's fp8_ds_mla layout; V3.2's indexer keeps its keys in uint8,
  index_head_dim plus a 4-byte scale per 128, on the same blocks.
- A full-attention layer needs cdiv(L, block) blocks for a sequence of L tokens; a sliding one
  cdiv(min(window - 1 + B, L), block) + 1, where B is max_num_batched_tokens; a chunked one
  cdiv(min(chunk + B, L), block); a Gated DeltaNet (Mamba-type) layer one page of state, two
  when prefix caching keeps the state at block boundaries ("align" mode, what Qwen3-Next gets).
- When every layer has the same spec, or every layer is full attention of some width, all
  layers form one group and num_blocks = memory // (the layers' pages together). Otherwise
  (the hybrid KV-cache manager) the pages are made one size (a Mamba state padded to the
  attention page, the attention block grown to hold it), the layers of each kind are split
  into groups of `group_size` (the fewest layers of any kind, or the most when the most is
  under 1.5 times the fewest; the last group of a kind padded), every group's i-th layer
  shares one pool, and num_blocks = memory // page // group_size; a sequence takes a block
  table per group.
- vLLM 0.22 keeps the hybrid manager on for chunked attention (Llama 4):
  VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1 (vllm/envs.py), so chunked
  layers hold their window, not every token.

Block sizes are the default attention backends' on CUDA: 16 tokens for FlashAttention,
FlashInfer and Triton; for MLA 16 on Hopper (FlashAttention MLA, BF16 cache), 64 with an FP8
cache there (FlashMLA) and for sparse MLA (FlashMLA sparse), 32 on Blackwell (FlashInfer MLA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from serving.catalog.attention import LayerAttention
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

BLOCK_TOKENS = 16
# DeepSeek V3.2's FP8 latent: 512 FP8 values, 4 FP32 scales and a BF16 RoPE key of 64.
FP8_DS_MLA_TOKEN_BYTES = 656
INDEXER_QUANT_BLOCK = 128  # the indexer's keys carry one FP32 scale per 128 values
# Linear-attention state in the model's dtype (mamba_cache_dtype auto): servestack serves BF16.
STATE_BYTES = 2
# vLLM makes groups of the fewest layers of any kind unless the most is under 1.5 times that.
GROUP_SIZE_SLACK = 1.5

GroupKind = Literal["full", "sliding", "chunked", "mla", "linear"]


@dataclass(frozen=True)
class LayerSpec:
    """One layer's cache per GPU, as vLLM's spec of it says."""

    kind: GroupKind
    page_bytes: int  # one block of this layer
    block_tokens: int
    window: int = 0  # sliding window or attention chunk
    state_pages: int = 0  # linear: pages one sequence holds

    def blocks(self, length: int, batched: int) -> int:
        """Blocks a sequence of `length` tokens holds at most, `batched` tokens a step."""
        if self.kind == "sliding":
            return math.ceil(min(self.window - 1 + batched, length) / self.block_tokens) + 1
        if self.kind == "chunked":
            return math.ceil(min(self.window + batched, length) / self.block_tokens)
        if self.kind == "linear":
            return self.state_pages
        return math.ceil(length / self.block_tokens)

    @property
    def grows(self) -> bool:
        return self.kind in ("full", "mla")


@dataclass(frozen=True)
class Group:
    """Layers that share one block table: `slots` layers of one spec (padding included)."""

    spec: LayerSpec
    slots: int
    layers: int  # real layers among the slots


@dataclass(frozen=True)
class KVCacheLayout:
    """One GPU's cache: its groups and what one block costs across them."""

    groups: tuple[Group, ...]
    block_bytes: int  # memory one block takes: its page in every layer it spans
    batched_tokens: int

    def blocks_per_sequence(self, length: int) -> int:
        return sum(g.spec.blocks(length, self.batched_tokens) for g in self.groups)

    def sequences(self, num_blocks: int, length: int) -> float:
        """vLLM's maximum concurrency: sequences of `length` tokens the blocks hold."""
        return num_blocks / self.blocks_per_sequence(length)

    def num_blocks(self, kv_bytes: int) -> int:
        return max(0, kv_bytes // self.block_bytes)

    @property
    def bytes_per_token(self) -> int:
        """Memory each token of a sequence adds in the layers whose cache grows with it."""
        return sum(self.block_bytes // g.spec.block_tokens for g in self.groups if g.spec.grows)

    def bytes_per_sequence(self, length: int) -> int:
        """Memory a sequence holds in the layers whose cache is capped or fixed."""
        return sum(
            g.spec.blocks(length, self.batched_tokens) * self.block_bytes
            for g in self.groups
            if not g.spec.grows
        )


def layout(
    spec: ModelSpec, parallelism: Parallelism, block_tokens: int = BLOCK_TOKENS
) -> KVCacheLayout:
    """The cache one GPU of `parallelism` holds for `spec`; `block_tokens` is the attention
    backend's block (vLLM's CPU backend takes 128)."""
    specs = _layer_specs(spec, parallelism, block_tokens)
    batched = spec.max_num_batched_tokens
    distinct = {s for s, _ in specs}
    one_block = len({s.block_tokens for s in distinct}) == 1
    if len(distinct) == 1 or (one_block and all(s.grows for s in distinct)):
        # One group (every layer alike, or all full attention of some widths): each block
        # spans every layer, with each layer's own page.
        width = sum(s.page_bytes * n for s, n in specs)
        first = next(iter(distinct))
        kind = first.kind if len(distinct) == 1 else "full"
        group = LayerSpec(kind, width, first.block_tokens, first.window, first.state_pages)
        layers = sum(n for _, n in specs)
        return KVCacheLayout((Group(group, layers, layers),), width, batched)
    return _hybrid(specs, batched)


def _hybrid(specs: list[tuple[LayerSpec, int]], batched: int) -> KVCacheLayout:
    page = max(s.page_bytes for s, _ in specs)
    unified = []
    for s, n in specs:
        if s.kind == "linear":  # a Mamba state is padded to the page
            unified.append((LayerSpec(s.kind, page, s.block_tokens, s.window, s.state_pages), n))
            continue
        if page % s.page_bytes:
            raise ValueError("vLLM cannot unify these layers' page sizes")
        grown = s.block_tokens * (page // s.page_bytes)
        unified.append((LayerSpec(s.kind, page, grown, s.window, s.state_pages), n))
    fewest = min(n for _, n in unified)
    most = max(n for _, n in unified)
    size = most if most < fewest * GROUP_SIZE_SLACK else fewest
    groups = []
    for s, n in unified:
        count = math.ceil(n / size)
        for i in range(count):
            groups.append(Group(s, size, len(range(i, n, count))))
    return KVCacheLayout(tuple(groups), page * size, batched)


def layer_runs(spec: ModelSpec) -> list[LayerAttention]:
    """The layers by kind; an architecture without runs attends fully (or with MLA) in every
    layer, since Architecture requires runs wherever a layer's cache is bounded."""
    arch = spec.architecture
    if arch.attention_layers is not None:
        return list(arch.attention_layers)
    kind: GroupKind = "mla" if arch.attention == "mla" else "full"
    return [LayerAttention(kind=kind, layers=arch.num_layers)]


def _kv_dtype_bytes(spec: ModelSpec) -> int:
    return 1 if spec.kv_cache_dtype == "fp8" else 2


def _mla_block_tokens(spec: ModelSpec, sparse: bool) -> int:
    generation = spec.gpu.compute_capability[0]
    fp8 = spec.kv_cache_dtype == "fp8"
    if generation >= 10:
        return 64 if sparse and not fp8 else 32
    if generation == 9 and (fp8 or sparse):
        return 64
    return BLOCK_TOKENS


def _layer_specs(
    spec: ModelSpec, parallelism: Parallelism, block_tokens: int
) -> list[tuple[LayerSpec, int]]:
    """(spec, layers on this GPU) per kind: layers split over pipeline stages (the first,
    fullest stage), KV heads and linear-attention heads over tensor-parallel ranks (a KV head
    is replicated once TP exceeds them), MLA's latent whole on every rank."""
    arch = spec.architecture
    tp, dtype = parallelism.tensor, _kv_dtype_bytes(spec)
    hybrid_state = any(run.kind == "linear" for run in layer_runs(spec))
    attention_token = 2 * max(1, arch.num_kv_heads // tp) * arch.head_dim * dtype
    attention_block = block_tokens
    if hybrid_state:
        attention_block = _attention_block_for_state(spec, tp, attention_token, block_tokens)
    out: list[tuple[LayerSpec, int]] = []
    for run in layer_runs(spec):
        layers = math.ceil(run.layers / parallelism.pipeline)
        if run.kind == "mla":
            out.extend((s, layers) for s in _mla_specs(spec, run))
        elif run.kind == "linear":
            pages = 2 if spec.prefix_caching else 1
            page = _linear_state_bytes(run, tp)
            out.append((LayerSpec("linear", page, attention_block, state_pages=pages), layers))
        else:
            page = attention_token * attention_block
            out.append((LayerSpec(run.kind, page, attention_block, run.window or 0), layers))
    return out


def _mla_specs(spec: ModelSpec, run: LayerAttention) -> list[LayerSpec]:
    arch = spec.architecture
    assert arch.kv_lora_rank is not None and arch.qk_rope_head_dim is not None
    sparse = run.indexer_topk is not None
    block = _mla_block_tokens(spec, sparse)
    latent = arch.kv_lora_rank + arch.qk_rope_head_dim
    fp8_ds_mla = sparse and spec.kv_cache_dtype == "fp8" and block == 64
    token = FP8_DS_MLA_TOKEN_BYTES if fp8_ds_mla else latent * _kv_dtype_bytes(spec)
    specs = [LayerSpec("mla", token * block, block)]
    if sparse:
        assert run.indexer_head_dim is not None
        keys = run.indexer_head_dim + run.indexer_head_dim // INDEXER_QUANT_BLOCK * 4
        specs.append(LayerSpec("mla", keys * block, block))
    return specs


def _linear_state_bytes(run: LayerAttention, tp: int) -> int:
    """Gated DeltaNet: a convolution state (channels / TP, kernel - 1) and a recurrent state
    (value heads / TP, value dim, key dim), both in the model's dtype (vLLM's
    mamba_cache_dtype auto; mamba_utils.py gated_delta_net_state_shape)."""
    assert run.state_shape is not None
    state = math.prod(run.state_shape) // tp
    conv = math.prod(run.conv_state_shape) // tp if run.conv_state_shape else 0
    return (state + conv) * STATE_BYTES


def _attention_block_for_state(
    spec: ModelSpec, tp: int, attention_token: int, alignment: int
) -> int:
    """vLLM grows the attention block until its page holds one Mamba state, in steps of the
    larger of the kernel's smallest block and the configured one (16 for FlashAttention)."""
    state = max(_linear_state_bytes(r, tp) for r in layer_runs(spec) if r.kind == "linear")
    return alignment * math.ceil(state / (alignment * attention_token))
