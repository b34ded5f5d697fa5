"""One decode step: this GPU's weights and its sequences' KV cache streamed from HBM, or
tensor-core math at large batches, whichever is slower; then the tensor-parallel all-reduces,
the expert-parallel all-to-alls, the layers' kernel costs and the engine's per-step CPU work,
which grows with the batch."""

from __future__ import annotations

from serving.catalog import MachineType
from serving.plan import fitted
from serving.plan.collectives import comm_s
from serving.plan.memory import kv_bytes_per_token_per_gpu, streamed_weight_bytes_per_gpu
from serving.plan.speed.roofline import (
    async_scheduling,
    expert_bytes_touched_per_gpu,
    layers_overhead_s,
    matmul_s,
)
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec


def decode_step_s(
    spec: ModelSpec, machine: MachineType, layout: Parallelism, batch: int, context: int
) -> float:
    """One decode step for `batch` sequences of `context` tokens on one DP rank."""
    hbm = spec.gpu.hbm_bandwidth_bytes_per_s
    dense = streamed_weight_bytes_per_gpu(spec, layout, batch)
    group_tokens = batch * layout.data  # experts see every DP rank's tokens
    experts_read = expert_bytes_touched_per_gpu(spec, layout, group_tokens)
    kv_read = batch * context * kv_bytes_per_token_per_gpu(spec, layout)
    # A token passes the pipeline stages one after another, so each stage's time adds up.
    memory_s = layout.pipeline * (
        dense / (hbm * fitted.HBM_EFFICIENCY)
        + experts_read / (hbm * fitted.EXPERT_HBM_EFFICIENCY)
        + kv_read / (hbm * fitted.ATTENTION_HBM_EFFICIENCY)
    )
    compute_s = matmul_s(spec, layout, batch, fitted.DECODE_MFU)
    return (
        max(memory_s, compute_s)
        + comm_s(spec, machine, layout, batch)
        + layers_overhead_s(spec, layout)
        + (0.0 if async_scheduling(spec) else fitted.STEP_OVERHEAD_S)
        + fitted.PER_SEQUENCE_STEP_S * batch
    )
