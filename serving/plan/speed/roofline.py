"""What every engine step is made of: the GPU's math rate for the weights' format, the share
of a MoE model's work and bytes that sits in its routed experts, matmul time through the
active weights, the per-layer kernel costs, and whether async scheduling hides the step's CPU
work. Decode and prefill both build on these."""

from __future__ import annotations

from serving.plan import fitted
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
        return gpu.bf16_dense_flops * fitted.FP8_EXPERT_MATH_SPEEDUP
    return math_flops(spec)


def matmul_s(spec: ModelSpec, layout: Parallelism, tokens: int, mfu: float) -> float:
    """Math for `tokens` tokens through the active weights; expert GEMMs run less efficiently.
    The weights every TP rank holds whole (MLA's down-projections) are multiplied on every rank,
    not shared out."""
    share = _expert_flops_share(spec)
    flops = 2 * spec.architecture.active_params * tokens
    replicated = 2 * replicated_params(spec) * tokens
    gpu_rate = math_flops(spec) * mfu
    expert_rate = layout.tensor * _expert_math_flops(spec) * mfu * fitted.EXPERT_MFU_SHARE
    dense = flops * (1 - share)
    return (
        (dense - replicated) / (layout.tensor * gpu_rate)
        + replicated / gpu_rate
        + flops * share / expert_rate
    )


def layers_overhead_s(spec: ModelSpec, layout: Parallelism) -> float:
    """Per-layer kernel costs of one step on one pipeline stage chain (stages run in turn)."""
    arch = spec.architecture
    per_layer = fitted.LAYER_OVERHEAD_S + (fitted.MOE_LAYER_OVERHEAD_S if arch.is_moe else 0.0)
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
