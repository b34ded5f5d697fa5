"""What every engine step is made of: the GPU's math rate for the weights' format, the share
of a MoE model's work and bytes that sits in its routed experts, matmul time through the
active weights, the per-layer kernel costs, and whether async scheduling hides the step's CPU
work. Decode and prefill both build on these."""

from __future__ import annotations

import math

from serving.plan import fitted
from serving.plan.collectives import deepep_dispatch
from serving.plan.memory import replicated_params, weight_bytes
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec


def math_flops(spec: ModelSpec) -> float:
    """FP8 weights run FP8 math only where the GPU has it; elsewhere they are weight-only."""
    gpu = spec.gpu
    if spec.weights_dtype == "fp8" and gpu.has_fp8_math:
        assert gpu.fp8_dense_flops is not None
        return gpu.fp8_dense_flops
    return gpu.bf16_dense_flops


def expert_bytes_touched_per_gpu(spec: ModelSpec, layout: Parallelism, tokens: int) -> float:
    """A decode step reads only the experts its tokens route to: with t tokens choosing k of E
    experts each, a given expert is read with probability 1 - (1 - k/E)^t."""
    arch = spec.architecture
    if not arch.is_moe:
        return 0.0
    _, experts = weight_bytes(spec)
    shards = layout.expert_parallel_size if layout.expert else layout.tensor
    touched = 1 - (1 - arch.experts_per_token / arch.num_experts) ** tokens
    return experts / (shards * layout.pipeline) * touched


def _routed_params(spec: ModelSpec) -> float:
    """A token's active parameters that sit in routed experts."""
    arch = spec.architecture
    if not arch.is_moe:
        return 0.0
    return arch.expert_params * arch.experts_per_token / arch.num_experts


def _expert_math_flops(spec: ModelSpec, layout: Parallelism) -> float:
    """Peak rate of the grouped expert GEMMs. FP8 expert weights gain less than FP8 peak over
    BF16, by the kernel that multiplies them. vLLM picks it by layout (fused_moe/oracle/fp8.py,
    `_get_priority_backends` and `select_fp8_moe_backend`, vLLM 0.22): for weights in 128x128
    blocks on Hopper it prefers its Triton fused-MoE kernel under tensor parallelism, and where
    DeepEP dispatches the tokens (collectives.deepep_dispatch) the experts run grouped GEMMs
    built for FP8 blocks: DeepGEMM's (BatchedDeepGemmExperts under the low-latency backend;
    under the high-throughput one DeepGEMM's or FlashInfer's CUTLASS kernel, which vLLM 0.22
    ranks first for expert parallelism on Hopper), each path at its own fitted share of the FP8
    tensor cores' 2x; llm-d's wide-EP runs, which fit the second, ran DeepGEMM. Tensor
    parallelism with experts sharded over it but no DeepEP (`enable_expert_parallel` at one DP
    rank) is priced at the Triton kernel's rate, the slower: vLLM 0.22 ranks FlashInfer's
    CUTLASS kernel first there too, which no published run here measures."""
    gpu = spec.gpu
    if spec.expert_weights_dtype == "fp8" and gpu.has_fp8_math:
        if deepep_dispatch(spec, layout):
            return gpu.bf16_dense_flops * fitted.DEEPGEMM_EXPERT_MATH_SPEEDUP
        return gpu.bf16_dense_flops * fitted.FP8_EXPERT_MATH_SPEEDUP
    return math_flops(spec)


# Expert weights vLLM multiplies with its Triton fused-MoE kernel, whose tiles _block_m sizes.
# MXFP4 experts (gpt-oss) run other kernels (triton_kernels' matmul_ogs on Hopper, Marlin on
# Ampere) with tiles of their own, not modelled here.
FUSED_MOE_DTYPES = ("bf16", "fp8")


def _block_m(spec: ModelSpec, step_tokens: float) -> int:
    """Rows of vLLM's fused-MoE tile for a step of `step_tokens` tokens, by its default configs
    (vllm/model_executor/layers/fused_moe/fused_moe.py, get_default_config, vLLM 0.22): block
    FP8 weights 16 up to 64 tokens, else 64; others 16, 32, 64 up to 32, 96, 512 tokens, else
    128."""
    if spec.expert_weights_dtype == "fp8":
        return 16 if step_tokens <= 64 else 64
    for most, rows in ((32, 16), (96, 32), (512, 64)):
        if step_tokens <= most:
            return rows
    return 128


def expert_tile_efficiency(spec: ModelSpec, layout: Parallelism, step_tokens: float) -> float:
    """Share of the grouped expert GEMMs' rows that carry a token. The fused-MoE kernel pads each
    expert's tokens to whole tiles of BLOCK_SIZE_M rows (_block_m). With m tokens per expert
    on average (the step's tokens from every DP rank, times experts_per_token, over the
    experts), an expert's tokens spread around m (Poisson), so from half a tile up its last
    tile is on average half empty: m / BLOCK_SIZE_M + 1/2 tiles; below that an expert takes one
    tile if any token routes to it, 1 - e^-m (the two meet at m = BLOCK_SIZE_M / 2). A large
    MoE whose step's tokens spread over many experts, or a small token budget (A100s' 2,048),
    pads the most."""
    arch = spec.architecture
    if not arch.is_moe or spec.expert_weights_dtype not in FUSED_MOE_DTYPES:
        return 1.0
    step = step_tokens * layout.data
    rows = _block_m(spec, step)
    per_expert = step * arch.experts_per_token / arch.num_experts
    if per_expert <= 0:
        return 1.0
    tiles = 1 - math.exp(-per_expert) if per_expert < rows / 2 else per_expert / rows + 0.5
    return per_expert / (rows * tiles)


def matmul_s(
    spec: ModelSpec,
    layout: Parallelism,
    tokens: float,
    mfu: float,
    step_tokens: float | None = None,
    sampled: float | None = None,
) -> float:
    """Math for `tokens` tokens through the active weights, in steps of `step_tokens` (all of
    them at once, by default). The dense GEMMs run at `mfu`, the phase's and generation's share
    of peak. BF16 and FP8 experts run vLLM's fused-MoE kernel (Triton's, Marlin's W8A16 for FP8
    on Ampere), which reaches one share of peak on every generation, EXPERT_MFU, and pads its
    tiles (expert_tile_efficiency); experts in other formats (MXFP4, int4) run kernels written
    for each generation, at a share of `mfu`, EXPERT_MFU_SHARE. The weights every TP rank
    holds whole (MLA's down-projections) are multiplied on every rank, not shared out. Two of
    the active weights are not multiplied by every token (lm_head_flops): the input embedding
    is a row lookup, and the LM head multiplies only the `sampled` rows (every token, by
    default: a decode step's)."""
    arch = spec.architecture
    routed = _routed_params(spec)
    body = arch.active_params - routed - arch.embedding_params
    dense = 2 * body * tokens + lm_head_flops(spec, tokens if sampled is None else sampled)
    replicated = 2 * replicated_params(spec) * tokens
    gpu_rate = math_flops(spec) * mfu
    tiles = expert_tile_efficiency(spec, layout, tokens if step_tokens is None else step_tokens)
    expert_peak = _expert_math_flops(spec, layout)
    if spec.expert_weights_dtype in FUSED_MOE_DTYPES:
        expert_mfu = fitted.EXPERT_MFU
    else:
        expert_mfu = mfu * fitted.EXPERT_MFU_SHARE
    expert_rate = layout.tensor * expert_peak * expert_mfu * tiles
    return (
        (dense - replicated) / (layout.tensor * gpu_rate)
        + replicated / gpu_rate
        + 2 * routed * tokens / expert_rate
    )


def lm_head_flops(spec: ModelSpec, sampled: float) -> float:
    """The LM head's math for `sampled` rows. vLLM computes logits only at the positions it
    samples from: `compute_logits(hidden_states[logits_indices])` with `logits_indices =
    query_start_loc[1:] - 1`, one row per request in the step, a prompt's chunk included
    (vllm/v1/worker/gpu_model_runner.py, vLLM 0.22; V0 likewise prunes the hidden states to
    its `selected_token_indices`). A decode step samples every token, a prefill one row per
    prompt and step. The input embedding is `F.embedding`, a row lookup
    (vllm/model_executor/layers/vocab_parallel_embedding.py): no multiply at all. A tied head
    is the same matrix, multiplied all the same."""
    arch = spec.architecture
    return 2 * arch.vocab_size * arch.hidden_size * sampled


def layers_overhead_s(spec: ModelSpec, layout: Parallelism) -> float:
    """Per-layer kernel costs of one step on one pipeline stage chain (stages run in turn): a
    layer's own, a MoE layer's routing, and MLA's extra kernels."""
    arch = spec.architecture
    per_layer = fitted.LAYER_OVERHEAD_S + (fitted.MOE_LAYER_OVERHEAD_S if arch.is_moe else 0.0)
    if arch.attention == "mla":
        per_layer += fitted.MLA_LAYER_OVERHEAD_S
    return arch.num_layers * per_layer


def async_scheduling(spec: ModelSpec) -> bool:
    """vLLM's async scheduling, which the compiler turns on with the Ray V2 executor: the engine
    schedules and prepares step n+1 while the GPU runs step n. Two consequences, both seen in
    GPUStack's gpt-oss-120b runs on one A100 (vLLM 0.11, ShareGPT at concurrency 4) that differ
    only by it: the step's CPU work leaves the decode step (time per output token 11.67 ->
    11.03 ms, about STEP_OVERHEAD_S), and a request that arrives during step n can join step
    n+2 at the earliest, since n+1 was scheduled without it (time to first token 61.91 -> 71.15
    ms, about one step)."""
    return spec.fast_paths.ray_v2_executor
