"""How fast one replica serves: decode steps, prefill, time to first token, saturated throughput.

A decode step streams this GPU's weights and its sequences' KV cache from HBM, or is bound by
tensor-core math at large batches, whichever is slower; then come the tensor-parallel
all-reduces, the expert-parallel all-to-alls, the MoE layers' routing kernels and the engine's
per-step CPU work, which grows with the batch. Prefill is bound by math, with causal attention
less efficient than the dense matmuls. A request's first token also waits for a fixed floor
(HTTP, chat template and tokenization, scheduling); a chat workload's mean time to first token
is the mean over its prompts' spread of lengths, not that of its mean prompt. A saturated
server decodes as many sequences as its KV cache holds at their average length, not at their
longest.

The efficiency constants were fitted on the `fit` rows of `tests/calibration_set.py` (published
vLLM runs) and are judged on its `held` rows; `serving.plan.accuracy` holds the error that check
measures.
"""

from __future__ import annotations

import itertools
import math
import statistics

from pydantic import Field

from serving.catalog import MachineType
from serving.frozen import Frozen
from serving.plan.collectives import P2P_LATENCY_S, comm_s
from serving.plan.memory import (
    MemoryBreakdown,
    dense_weight_bytes_per_gpu,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    replicated_params,
    weight_bytes,
)
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

# Every constant below marked "fitted" was fitted once, by least squares on log error, to the
# `fit` rows of the calibration set (tests/calibration_set.py), within physically plausible
# bounds, by scripts/fit_speed_constants.py; the `held` rows then judge them
# (serving.plan.accuracy).

# Fraction of peak HBM bandwidth a decode step reaches streaming dense weights (fitted; near the
# 0.85 bound, about what a streaming read reaches on H100/A100)...
HBM_EFFICIENCY = 0.838
# ...streaming expert weights through grouped GEMMs (fitted)...
EXPERT_HBM_EFFICIENCY = 0.706
# ...and reading paged KV cache in the decode attention kernel, a streaming read of pages
# (fitted, at its lower bound of 0.5: what sequences cost beyond their bytes is per-sequence
# work, PER_SEQUENCE_STEP_S, not a slower stream, or long contexts would be mispriced).
ATTENTION_HBM_EFFICIENCY = 0.5
# Fraction of peak tensor-core FLOP/s reached by prefill, by compute capability major version,
# and by compute-bound decode (fitted). Hopper's peak is three times Ampere's and reachable only
# by kernels built for it (wgmma, TMA); the GEMMs a serving engine runs reach a smaller share of
# it than Ampere's, as the published runs show: Qwen3-14B prefills 2K prompts at about 60% of an
# A100's peak and 35% of an H100's.
PREFILL_MFU = {8: 0.669, 9: 0.453}
DECODE_MFU = 0.292
# Causal attention in prefill reaches less of the peak than the matmuls, and a smaller share of
# Hopper's far larger peak than of Ampere's, by compute capability major version. Ampere:
# FlashAttention-2 reaches 50-73% of A100 peak (Dao, "FlashAttention-2", 2023), taken at 0.6;
# Hopper: fitted.
ATTENTION_MFU = {8: 0.6, 9: 0.373}
# Attention sinks (gpt-oss) run on vLLM's Triton attention backend where FlashAttention 3 is not
# available (Ampere), at this share of the peak (fitted on gpt-oss-20b at 32k on an A100).
TRITON_ATTENTION_MFU = 0.11
# Grouped expert GEMMs reach this share of the dense matmuls' efficiency (fitted).
EXPERT_MFU_SHARE = 0.764
# FP8 expert weights run vLLM's fused-MoE kernels with a scale per 128x128 weight block (the
# format of DeepSeek-V3's and Qwen3's FP8 checkpoints), which gain this much over the same
# kernels' BF16 math, far from the 2x of FP8 tensor cores (fitted on Qwen3-235B-A22B-FP8).
FP8_EXPERT_MATH_SPEEDUP = 1.06
# Fixed cost of one engine step (scheduling, input preparation, launch) with CUDA graphs on
# (fitted). Async scheduling hides it behind the GPU's work on the step before (see
# _async_scheduling)...
STEP_OVERHEAD_S = 0.529e-3
# ...and what each running sequence adds (scheduler bookkeeping, sampling, detokenizing and
# streaming its token), which grows with the batch: vLLM found the CPU side a large share of an
# H100's step (https://blog.vllm.ai/2024/09/05/perf-update.html). Fitted.
PER_SEQUENCE_STEP_S = 31.3e-6
# One transformer layer's dozen small kernels (norms, rotary, attention, activation) cost a few
# microseconds each even replayed from a CUDA graph; per layer and step (fitted, at its bound).
LAYER_OVERHEAD_S = 40e-6
# A MoE layer's routing, top-k, token permutation and grouped-GEMM launches, per layer and step
# (fitted).
MOE_LAYER_OVERHEAD_S = 33.3e-6
# Time to first token that no prefill explains: the HTTP request, chat template and
# tokenization, scheduling and detokenizing the first token (fitted). It is the frontend of the
# vLLM servestack deploys: published runs on vLLM 0.11 also parsed the chat template anew for
# every request, which later versions cache, and are judged with that time added to them.
TTFT_FLOOR_S = 19.2e-3
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
# Throughput is that of this many requests queued at once: `vllm bench serve`'s default
# --num-prompts, the way published serving throughput is measured.
BURST_REQUESTS = 1000
DRAIN_POINTS = 24


class Estimates(Frozen):
    """Estimates for one replica (see the module docstring)."""

    prefill_s: float = Field(description="Prefill of the workload's input at batch 1.")
    ttft_s: float = Field(description="Time to first token at low load.")
    itl_s: float = Field(description="Inter-token latency at batch 1.")
    decode_batch: int = Field(description="Sequences decoded per step at the throughput point.")
    itl_at_batch_s: float = Field(description="Inter-token latency at that batch.")
    requests_per_s: float
    output_tokens_per_s: float


def _math_flops(spec: ModelSpec) -> float:
    """FP8 weights run FP8 math only where the GPU has it; elsewhere they are weight-only."""
    gpu = spec.gpu
    if spec.weights_dtype == "fp8" and gpu.has_fp8_math:
        assert gpu.fp8_dense_flops is not None
        return gpu.fp8_dense_flops
    return gpu.bf16_dense_flops


def _expert_bytes_touched_per_gpu(spec: ModelSpec, layout: Parallelism, tokens: int) -> float:
    """A decode step reads only the experts its tokens route to: with t tokens choosing k of E
    experts each, a given expert is read with probability 1 - (1 - k/E)^t."""
    arch = spec.architecture
    if not arch.is_moe:
        return 0.0
    _, experts = weight_bytes(spec)
    shards = layout.expert_parallel_size if layout.expert else layout.tensor
    touched = 1 - (1 - arch.experts_per_token / arch.num_experts) ** tokens
    return experts / (shards * layout.pipeline) * touched


def _expert_flops_share(spec: ModelSpec) -> float:
    """Share of a token's active parameters that sit in routed experts."""
    arch = spec.architecture
    if not arch.is_moe:
        return 0.0
    routed = arch.expert_params * arch.experts_per_token / arch.num_experts
    return routed / arch.active_params


def _expert_math_flops(spec: ModelSpec) -> float:
    """Peak rate of the grouped expert GEMMs: FP8 expert weights gain less than FP8 peak."""
    gpu = spec.gpu
    if spec.expert_weights_dtype == "fp8" and gpu.has_fp8_math:
        return gpu.bf16_dense_flops * FP8_EXPERT_MATH_SPEEDUP
    return _math_flops(spec)


def _matmul_s(spec: ModelSpec, layout: Parallelism, tokens: int, mfu: float) -> float:
    """Math for `tokens` tokens through the active weights; expert GEMMs run less efficiently.
    The weights every TP rank holds whole (MLA's down-projections) are multiplied on every rank,
    not shared out."""
    share = _expert_flops_share(spec)
    flops = 2 * spec.architecture.active_params * tokens
    replicated = 2 * replicated_params(spec) * tokens
    gpu_rate = _math_flops(spec) * mfu
    expert_rate = layout.tensor * _expert_math_flops(spec) * mfu * EXPERT_MFU_SHARE
    dense = flops * (1 - share)
    return (
        (dense - replicated) / (layout.tensor * gpu_rate)
        + replicated / gpu_rate
        + flops * share / expert_rate
    )


def _layers_overhead_s(spec: ModelSpec, layout: Parallelism) -> float:
    """Per-layer kernel costs of one step on one pipeline stage chain (stages run in turn)."""
    arch = spec.architecture
    per_layer = LAYER_OVERHEAD_S + (MOE_LAYER_OVERHEAD_S if arch.is_moe else 0.0)
    return arch.num_layers * per_layer


def _async_scheduling(spec: ModelSpec) -> bool:
    """vLLM's async scheduling, which the compiler turns on with the Ray V2 executor: the engine
    schedules and prepares step n+1 while the GPU runs step n. Two consequences, both seen in
    GPUStack's gpt-oss-120b runs on one A100 (vLLM 0.11, ShareGPT at concurrency 4) that differ
    only by it: the step's CPU work leaves the decode step (time per output token 11.67 ->
    11.03 ms, about STEP_OVERHEAD_S), and a request that arrives during step n can join step
    n+2 at the earliest, since n+1 was scheduled without it (time to first token 61.91 -> 71.15
    ms, about one step)."""
    return spec.fast_paths.ray_v2_executor


def decode_step_s(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, batch: int, context: int
) -> float:
    """One decode step for `batch` sequences of `context` tokens on one DP rank."""
    hbm = spec.gpu.hbm_bandwidth_bytes_per_s
    dense = dense_weight_bytes_per_gpu(spec, layout)
    group_tokens = batch * layout.data  # experts see every DP rank's tokens
    experts_read = _expert_bytes_touched_per_gpu(spec, layout, group_tokens)
    kv_read = batch * context * kv_bytes_per_token_per_gpu(spec, layout)
    # A token passes the pipeline stages one after another, so each stage's time adds up.
    memory_s = layout.pipeline * (
        dense / (hbm * HBM_EFFICIENCY)
        + experts_read / (hbm * EXPERT_HBM_EFFICIENCY)
        + kv_read / (hbm * ATTENTION_HBM_EFFICIENCY)
    )
    compute_s = _matmul_s(spec, layout, batch, DECODE_MFU)
    return (
        max(memory_s, compute_s)
        + comm_s(spec, machine, layout, batch)
        + _layers_overhead_s(spec, layout)
        + (0.0 if _async_scheduling(spec) else STEP_OVERHEAD_S)
        + PER_SEQUENCE_STEP_S * batch
    )


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


def _mla_context_flops(spec: ModelSpec, tokens: int) -> float:
    """What a chunked MLA prefill multiplies beyond the prompt's own tokens. vLLM's MLA prefill
    runs in the non-absorbed form (forward_mha): it up-projects the latent KV through kv_b_proj
    to every head's no-RoPE key and value (kv_lora_rank -> heads x (qk_nope + v)). A chunk's
    own tokens pass kv_b_proj like any weight (in active_params), but the chunk also attends to
    the chunks before it, kept only as latents in the cache, so _compute_prefill_context gathers
    them and up-projects them again, for every later chunk and layer
    (vllm/model_executor/layers/attention/mla_attention.py, vLLM 0.22; since 0.7). A prompt of
    n chunks of b tokens re-projects b x (0 + 1 + ... + n - 1) tokens."""
    arch = spec.architecture
    if arch.attention != "mla":
        return 0.0
    assert arch.kv_lora_rank is not None
    budget = spec.max_num_batched_tokens
    chunks = math.ceil(tokens / budget)
    context_tokens = budget * chunks * (chunks - 1) / 2
    # kv_b_proj: kv_lora_rank -> heads x (no-RoPE key width + value width), both head_dim.
    per_token = 2 * arch.kv_lora_rank * arch.num_attention_heads * 2 * arch.head_dim
    return context_tokens * per_token * arch.full_attention_layers


def prefill_compute_s(spec: ModelSpec, layout: Parallelism, tokens: int) -> float:
    """Math for `tokens` prompt tokens: the active weights, plus causal attention (half of the
    tokens x tokens score and value products) at the attention kernel's efficiency, plus MLA's
    re-projection of earlier chunks (_mla_context_flops, heads split over TP). Attention
    runs in BF16 whatever the weights' format: FP8 weights quantize the linear layers, not the
    query, key and value activations (vLLM's FlashAttention and FlashMLA prefill take BF16)."""
    arch = spec.architecture
    attention_flops = 2 * tokens * tokens * _attention_width(spec) * arch.full_attention_layers
    generation = spec.gpu.compute_capability[0]
    if arch.attention_sinks and generation < 9:
        efficiency = TRITON_ATTENTION_MFU
    else:
        efficiency = ATTENTION_MFU[generation]
    attention_s = attention_flops / (layout.tensor * spec.gpu.bf16_dense_flops * efficiency)
    mfu = PREFILL_MFU[generation]
    context_s = _mla_context_flops(spec, tokens) / (layout.tensor * _math_flops(spec) * mfu)
    return _matmul_s(spec, layout, tokens, mfu) + attention_s + context_s


def prefill_s(spec: ModelSpec, machine: MachineType, layout: Parallelism, tokens: int) -> float:
    """Chunked prefill of one prompt: math-bound, at least one weight read per chunk."""
    chunks = math.ceil(tokens / spec.max_num_batched_tokens)
    hbm = spec.gpu.hbm_bandwidth_bytes_per_s
    dense = dense_weight_bytes_per_gpu(spec, layout)
    # Each chunk streams the dense weights, and the experts its tokens route to at the grouped
    # GEMMs' efficiency, as a decode step does.
    chunk_tokens = min(tokens, spec.max_num_batched_tokens) * layout.data
    experts_read = _expert_bytes_touched_per_gpu(spec, layout, chunk_tokens)
    memory_s = (
        chunks
        * layout.pipeline
        * (dense / (hbm * HBM_EFFICIENCY) + experts_read / (hbm * EXPERT_HBM_EFFICIENCY))
    )
    comm = comm_s(spec, machine, layout, tokens) + (chunks - 1) * comm_s(spec, machine, layout, 0)
    step = STEP_OVERHEAD_S + _layers_overhead_s(spec, layout)
    return max(prefill_compute_s(spec, layout, tokens), memory_s) + comm + chunks * step


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
    prompts)."""
    work = spec.workload
    wait = 0.0
    if running:
        context = work.input_tokens + work.output_tokens // 2
        steps = 1.5 if _async_scheduling(spec) else 0.5
        wait = steps * decode_step_s(spec, machine, layout, running, context)
    # no prompt is longer than the context leaves room for beside its output
    longest = max(1, spec.max_model_len - work.output_tokens)
    lengths = prompt_lengths(work.input_tokens) if spread else [work.input_tokens]
    lengths = [min(length, longest) for length in lengths]
    joined_step = statistics.fmean(
        prefill_s(spec, machine, layout, length + running) for length in lengths
    )
    return TTFT_FLOOR_S + joined_step + PER_SEQUENCE_STEP_S * running + wait


def _kv_transfer_s(spec: ModelSpec, machine: MachineType) -> float:
    """P/D: the prefill side ships the prompt's KV cache to the decode side over the network."""
    size = spec.workload.input_tokens * kv_bytes_per_token(spec)
    return P2P_LATENCY_S + size / machine.network_bandwidth_bytes_per_s


def saturated_batch(spec: ModelSpec, layout: Parallelism, mem: MemoryBreakdown) -> int:
    """Sequences one DP rank decodes at once when requests queue: what its KV cache holds with
    each sequence at its average length over its life (prompt plus half its output, since vLLM
    allocates blocks as tokens arrive), capped by max_num_seqs."""
    work = spec.workload
    per_rank_tokens = mem.kv_capacity_tokens // layout.data
    average_length = work.input_tokens + work.output_tokens // 2
    return min(spec.max_num_seqs, per_rank_tokens // average_length)


def burst_decode_s(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, batch: int, requests: float
) -> float:
    """Decode time of `requests` requests queued at once on one DP rank that decodes at most
    `batch` at a time, with output lengths spread like chat completions (exponentially around
    the workload's mean): the batch stays full while the queue lasts, then drains as requests
    finish, and the longest ones decode almost alone. Published serving throughput is measured
    this way (`vllm bench serve` sends its prompts at once), and the drain is where a server
    falls short of its full-batch rate."""
    work = spec.workload
    mean_output = work.output_tokens
    context = work.input_tokens + mean_output // 2
    full = decode_step_s(spec, machine, layout, batch, context)
    queued_tokens = max(0.0, requests - batch) * mean_output
    seconds = queued_tokens / batch * full
    # Draining from b sequences: b(t) = b e^(-t/mean), so the steps spent between batch sizes
    # B and B - dB are mean x dB / B. Sum that over batch sizes, log-spaced, down to one.
    draining = min(float(batch), requests)
    points = max(2, min(DRAIN_POINTS, int(draining)))
    sizes = [draining ** (1 - i / (points - 1)) for i in range(points)]
    for high, low in itertools.pairwise(sizes):
        middle = math.sqrt(high * low)
        steps = mean_output * math.log(high / low)
        seconds += steps * decode_step_s(spec, machine, layout, max(1, round(middle)), context)
    # The longest of them outlives the last drain step by about one mean length.
    return seconds + mean_output * decode_step_s(spec, machine, layout, 1, context)


def estimates(
    spec: ModelSpec,
    machine: MachineType,
    role: str,
    layout: Parallelism,
    mem: MemoryBreakdown,
    itl_target_s: float | None = None,
    burst_requests: int = BURST_REQUESTS,
) -> Estimates:
    """Latency at low load, and throughput of a burst of `burst_requests` requests decoded at
    the batch a saturated server reaches (lowered to meet an inter-token latency target if one
    is given). The size of the burst matters: the fewer the requests, the larger the share of
    the run spent draining, when the batch is no longer full."""
    work = spec.workload
    # P/D: the prefill side's prompt ends once its KV cache reaches the decode side.
    transfer = _kv_transfer_s(spec, machine) if role == "prefill" else 0.0
    prompt = prefill_s(spec, machine, layout, work.input_tokens) + transfer
    context = work.input_tokens + work.output_tokens // 2
    itl_1 = decode_step_s(spec, machine, layout, 1, context)

    batch = saturated_batch(spec, layout, mem)
    if itl_target_s is not None:
        while batch > 1 and decode_step_s(spec, machine, layout, batch, context) > itl_target_s:
            batch = max(1, int(batch * 0.8))
    ttft = ttft_s(spec, machine, layout) + transfer
    if batch < 1:
        return Estimates(
            prefill_s=prompt, ttft_s=ttft, itl_s=itl_1, decode_batch=0, itl_at_batch_s=itl_1,
            requests_per_s=0.0, output_tokens_per_s=0.0,
        )  # fmt: skip
    step = decode_step_s(spec, machine, layout, batch, context)
    requests = burst_requests / layout.data
    prefill_seconds = requests * prefill_compute_s(spec, layout, work.input_tokens)
    decode_seconds = burst_decode_s(spec, machine, layout, batch, requests)
    # A prefill-only replica pays no decode, a decode-only one no prefill.
    seconds = {
        "server": prefill_seconds + decode_seconds,
        "prefill": prefill_seconds,
        "decode": decode_seconds,
    }[role]
    requests_per_s = burst_requests / seconds
    return Estimates(
        prefill_s=prompt,
        ttft_s=ttft,
        itl_s=itl_1,
        decode_batch=batch,
        itl_at_batch_s=step,
        requests_per_s=requests_per_s,
        output_tokens_per_s=requests_per_s * work.output_tokens,
    )
