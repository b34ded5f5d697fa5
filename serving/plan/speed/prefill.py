"""Prefill and the time to first token. Prefill is bound by math, with causal attention less
efficient than the dense matmuls, and streams the weights at least once per chunk. A request's
first token also waits for a fixed floor (HTTP, chat template and tokenization, scheduling); a
chat workload's mean time to first token is the mean over its prompts' spread of lengths, not
that of its mean prompt."""

from __future__ import annotations

import math
import statistics

from serving.catalog import MachineType
from serving.plan import fitted
from serving.plan.collectives import comm_s
from serving.plan.memory import streamed_weight_bytes_per_gpu
from serving.plan.speed.decode import decode_step_s
from serving.plan.speed.roofline import (
    async_scheduling,
    expert_bytes_touched_per_gpu,
    layers_overhead_s,
    math_flops,
    matmul_s,
)
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

# Fraction of peak tensor-core FLOP/s reached by prefill, by compute capability major version
# (both fitted: serving.plan.fitted says why Hopper's share is the smaller). Blackwell (10, B200)
# takes Hopper's share: the calibration set holds no published vLLM run on a B200, so nothing
# was fitted there and B200 estimates are extrapolations the measured error bands do not cover
# (a B200's plan says so: serving.plan.accuracy.beyond_measured).
PREFILL_MFU = {
    8: fitted.PREFILL_MFU_AMPERE,
    9: fitted.PREFILL_MFU_HOPPER,
    10: fitted.PREFILL_MFU_HOPPER,
}
# Causal attention in prefill reaches less of the peak than the matmuls, and a smaller share of
# Hopper's far larger peak than of Ampere's, by compute capability major version. Ampere:
# FlashAttention-2 reaches 50-73% of A100 peak (Dao, "FlashAttention-2", 2023), taken at 0.6;
# Hopper: fitted; Blackwell: Hopper's, as above.
ATTENTION_MFU = {8: 0.6, 9: fitted.ATTENTION_MFU_HOPPER, 10: fitted.ATTENTION_MFU_HOPPER}
# A chat workload's prompts are not all of its mean length: ShareGPT's, which the published chat
# runs replay, fall off from the shortest with a long tail (Kwon et al., "Efficient Memory
# Management for Large Language Model Serving with PagedAttention", SOSP 2023, Fig. 11), which
# the exponential around the mean draws from the mean alone, as burst_decode_s does for outputs.
# A mean time to first token is a mean over prompts, not the time of the mean prompt: a MoE
# prefill step reads the experts its tokens touch, 1 - (1 - k/E)^t of them, which is concave in
# t (a 30-token prompt of gpt-oss-120b touches 61% of them, a 460-token one all), and a dense
# prefill is memory-bound below the weights' ridge and math-bound above it. The mean is taken
# over this many slices of equal probability.
PROMPT_LENGTH_POINTS = 8


def _attention_width(spec: ModelSpec) -> float:
    """Mean of the query-key and value widths over all heads: the score product runs over the
    query-key width, the value product over the value width. MLA's prefill decompresses each
    head's key to its no-RoPE part plus the shared RoPE part (DeepSeek-V3: 128 + 64 = 192) and
    its value to head_dim (128)."""
    arch = spec.architecture
    key_width = arch.head_dim
    if arch.attention == "mla" and arch.qk_rope_head_dim is not None:
        key_width += arch.qk_rope_head_dim
    return arch.num_attention_heads * (key_width + arch.head_dim) / 2


def cached_prefix_tokens(spec: ModelSpec, prompt_tokens: int) -> int:
    """Of a prompt of `prompt_tokens`, those the prefix cache is expected to serve
    (`workload.prefix_cache_hit_rate`, none where unset). vLLM's scheduler starts a request at
    the tokens its cached blocks hold (`num_computed_tokens`, vllm/v1/core/sched/scheduler.py,
    vLLM 0.22) and computes only the rest, each attending over the whole prompt; it always
    computes a prompt's last token, so a prompt is never served from the cache whole."""
    rate = spec.workload.prefix_cache_hit_rate
    if not rate:
        return 0
    return min(prompt_tokens - 1, int(prompt_tokens * rate))


def computed_prompt(spec: ModelSpec) -> tuple[int, int]:
    """The workload's mean prompt as vLLM computes it: the tokens it computes, and the cached
    ones it skips (cached_prefix_tokens)."""
    cached = cached_prefix_tokens(spec, spec.workload.input_tokens)
    return spec.workload.input_tokens - cached, cached


def _mla_context_flops(spec: ModelSpec, tokens: int, cached: int = 0) -> float:
    """What a chunked MLA prefill multiplies beyond the prompt's own tokens. vLLM's MLA prefill
    runs in the non-absorbed form (forward_mha): it up-projects the latent KV through kv_b_proj
    to every head's no-RoPE key and value (kv_lora_rank -> heads x (qk_nope + v)). A chunk's
    own tokens pass kv_b_proj like any weight (in active_params), but the chunk also attends to
    the chunks before it, kept only as latents in the cache, so _compute_prefill_context gathers
    them and up-projects them again, for every later chunk and layer
    (vllm/model_executor/layers/attention/mla_attention.py, vLLM 0.22; since 0.7). A prompt of
    n chunks of b tokens re-projects b x (0 + 1 + ... + n - 1) tokens, and each chunk also the
    `cached` tokens of a prefix the cache served."""
    arch = spec.architecture
    if arch.attention != "mla":
        return 0.0
    assert arch.kv_lora_rank is not None
    budget = spec.max_num_batched_tokens
    chunks = math.ceil(tokens / budget)
    context_tokens = budget * chunks * (chunks - 1) / 2 + chunks * cached
    # kv_b_proj: kv_lora_rank -> heads x (no-RoPE key width + value width), both head_dim.
    per_token = 2 * arch.kv_lora_rank * arch.num_attention_heads * 2 * arch.head_dim
    return context_tokens * per_token * arch.context_attention_layers


def prefill_compute_s(
    spec: ModelSpec,
    layout: Parallelism,
    tokens: int,
    step_tokens: float | None = None,
    cached: int = 0,
    sampled: float | None = None,
) -> float:
    """Math for `tokens` prompt tokens after `cached` ones the prefix cache served: the active
    weights, plus causal attention (half of the tokens x tokens score and value products, and
    all of them against the cached tokens) at the attention kernel's efficiency, plus MLA's
    re-projection of earlier chunks (_mla_context_flops, heads split over TP). Attention
    runs in BF16 whatever the weights' format: FP8 weights quantize the linear layers, not the
    query, key and value activations (vLLM's FlashAttention and FlashMLA prefill take BF16).
    The LM head multiplies one row per step the prompt's chunks take (`sampled`, by default
    ceil(tokens / max_num_batched_tokens): roofline.lm_head_flops), not every prompt token."""
    arch = spec.architecture
    pairs = tokens * (tokens + 2 * cached)
    attention_flops = 2 * pairs * _attention_width(spec) * arch.context_attention_layers
    generation = spec.gpu.compute_capability[0]
    if arch.attention_sinks and generation < 9:
        efficiency = fitted.TRITON_ATTENTION_MFU
    else:
        efficiency = ATTENTION_MFU[generation]
    attention_s = attention_flops / (layout.tensor * spec.gpu.bf16_dense_flops * efficiency)
    mfu = PREFILL_MFU[generation]
    context_s = _mla_context_flops(spec, tokens, cached) / (layout.tensor * math_flops(spec) * mfu)
    # A lone prompt fills its steps up to the token budget; a saturated server's steps carry
    # other prompts and decodes too (`step_tokens`), which fills the experts' tiles.
    step = min(tokens, spec.max_num_batched_tokens) if step_tokens is None else step_tokens
    rows = math.ceil(tokens / spec.max_num_batched_tokens) if sampled is None else sampled
    return matmul_s(spec, layout, tokens, mfu, step, rows) + attention_s + context_s


def prefill_s(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    tokens: int,
    cached: int = 0,
    sampled: float | None = None,
) -> float:
    """Chunked prefill of `tokens` prompt tokens after `cached` ones the prefix cache served:
    math-bound, at least one weight read per chunk; the LM head multiplies `sampled` rows
    (prefill_compute_s)."""
    chunks = math.ceil(tokens / spec.max_num_batched_tokens)
    hbm = spec.gpu.hbm_bandwidth_bytes_per_s
    # Each chunk streams the dense weights, and the experts its tokens route to at the grouped
    # GEMMs' efficiency, as a decode step does.
    chunk_tokens = min(tokens, spec.max_num_batched_tokens) * layout.data
    dense = streamed_weight_bytes_per_gpu(spec, layout, min(tokens, spec.max_num_batched_tokens))
    experts_read = expert_bytes_touched_per_gpu(spec, layout, chunk_tokens)
    memory_s = (
        chunks
        * layout.pipeline
        * (
            dense / (hbm * fitted.HBM_EFFICIENCY)
            + experts_read / (hbm * fitted.EXPERT_HBM_EFFICIENCY)
        )
    )
    comm = comm_s(spec, machine, layout, tokens) + (chunks - 1) * comm_s(spec, machine, layout, 0)
    step = fitted.STEP_OVERHEAD_S + layers_overhead_s(spec, layout)
    compute_s = prefill_compute_s(spec, layout, tokens, cached=cached, sampled=sampled)
    return max(compute_s, memory_s) + comm + chunks * step


def prompt_lengths(mean_tokens: int, points: int = PROMPT_LENGTH_POINTS) -> list[int]:
    """Prompt lengths spread exponentially around `mean_tokens` (PROMPT_LENGTH_POINTS): the mean
    of each of `points` slices of equal probability. For the exponential of mean 1 the slice
    between its quantiles a and b has mean n((1 + a)e^-a - (1 + b)e^-b), the last (1 + a)e^-a
    times n, so the slices' means average exactly the mean."""
    edges = [-math.log(1 - i / points) for i in range(points)]
    tails = [(1 + a) * math.exp(-a) for a in edges] + [0.0]
    return [max(1, round(mean_tokens * points * (tails[i] - tails[i + 1]))) for i in range(points)]


def ttft_s(
    spec: ModelSpec,
    machine: MachineType,
    layout: Parallelism,
    running: int = 0,
    spread: bool = True,
) -> float:
    """Mean time to first token of the workload's prompts with `running` other sequences
    decoding: the fixed floor, the decode steps of theirs to wait out before a prompt joins the
    batch (on average half of the step under way, and under async scheduling also the next one,
    already scheduled without it), and the step that prefills it, which decodes the running
    sequences too: their tokens pass the same weights as the prompt's, and each costs its
    per-sequence work (scheduling, sampling, detokenizing). Prompts are spread like a chat
    workload's around the workload's mean (prompt_lengths), none longer than max_model_len
    leaves room for, or all of its length where `spread` is off (a synthetic benchmark's fixed
    prompts); of each, only what the prefix cache is not expected to serve is computed
    (cached_prefix_tokens)."""
    work = spec.workload
    wait = 0.0
    if running:
        context = work.decode_context_tokens
        steps = 1.5 if async_scheduling(spec) else 0.5
        wait = steps * decode_step_s(spec, machine, layout, running, context)
    # no prompt is longer than the context leaves room for beside its output
    longest = max(1, spec.max_model_len - work.output_tokens)
    lengths = prompt_lengths(work.input_tokens) if spread else [work.input_tokens]
    lengths = [min(length, longest) for length in lengths]
    cached = [cached_prefix_tokens(spec, length) for length in lengths]
    # The step samples the prompt once per chunk and each running sequence once.
    budget = spec.max_num_batched_tokens
    joined_step = statistics.fmean(
        prefill_s(spec, machine, layout, length - hit + running, hit,
                  math.ceil((length - hit) / budget) + running)
        for length, hit in zip(lengths, cached, strict=True)
    )  # fmt: skip
    return fitted.TTFT_FLOOR_S + joined_step + fitted.PER_SEQUENCE_STEP_S * running + wait
