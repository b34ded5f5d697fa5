"""How fast one replica serves: decode steps, prefill, time to first token, saturated throughput.

A decode step (`decode`) streams this GPU's weights and its sequences' KV cache from HBM, or is
bound by tensor-core math at large batches, whichever is slower; then come the tensor-parallel
all-reduces, the expert-parallel all-to-alls, the MoE layers' routing kernels and the engine's
per-step CPU work, which grows with the batch (`roofline` holds what decode and prefill share).
Prefill (`prefill`) is bound by math, with causal attention less efficient than the dense
matmuls. A request's first token also waits for a fixed floor (HTTP, chat template and
tokenization, scheduling); a chat workload's mean time to first token is the mean over its
prompts' spread of lengths, not that of its mean prompt. A saturated server (`saturation`)
decodes as many sequences as its KV cache holds at their average length, not at their longest,
and serves a burst (`burst`) in an opening, a queued phase and a drain.

The efficiency constants (`serving.plan.fitted`, generated) were fitted on the `fit` rows of
`tests/calibration_set.py` (published vLLM runs) by scripts/fit_speed_constants.py and are judged
on its `held` rows; `serving.plan.accuracy` holds the error that check measures. The names below
stay importable from here.
"""

from serving.plan.fitted import (
    ATTENTION_HBM_EFFICIENCY,
    DECODE_MFU,
    DEEPGEMM_EXPERT_MATH_SPEEDUP,
    EXPERT_HBM_EFFICIENCY,
    EXPERT_MFU,
    EXPERT_MFU_SHARE,
    FP8_EXPERT_MATH_SPEEDUP,
    HBM_EFFICIENCY,
    LAYER_OVERHEAD_S,
    MOE_LAYER_OVERHEAD_S,
    PER_SEQUENCE_STEP_S,
    STEP_OVERHEAD_S,
    TRITON_ATTENTION_MFU,
    TTFT_FLOOR_S,
)
from serving.plan.speed.burst import DRAIN_POINTS, burst_decode_s
from serving.plan.speed.decode import decode_step_s
from serving.plan.speed.prefill import (
    ATTENTION_MFU,
    PREFILL_MFU,
    PROMPT_LENGTH_POINTS,
    prefill_compute_s,
    prefill_s,
    prompt_lengths,
    ttft_s,
)
from serving.plan.speed.saturation import (
    BURST_REQUESTS,
    Estimates,
    estimates,
    saturated_batch,
)

__all__ = [
    "ATTENTION_HBM_EFFICIENCY",
    "ATTENTION_MFU",
    "BURST_REQUESTS",
    "DECODE_MFU",
    "DEEPGEMM_EXPERT_MATH_SPEEDUP",
    "DRAIN_POINTS",
    "EXPERT_HBM_EFFICIENCY",
    "EXPERT_MFU",
    "EXPERT_MFU_SHARE",
    "FP8_EXPERT_MATH_SPEEDUP",
    "HBM_EFFICIENCY",
    "LAYER_OVERHEAD_S",
    "MOE_LAYER_OVERHEAD_S",
    "PER_SEQUENCE_STEP_S",
    "PREFILL_MFU",
    "PROMPT_LENGTH_POINTS",
    "STEP_OVERHEAD_S",
    "TRITON_ATTENTION_MFU",
    "TTFT_FLOOR_S",
    "Estimates",
    "burst_decode_s",
    "decode_step_s",
    "estimates",
    "prefill_compute_s",
    "prefill_s",
    "prompt_lengths",
    "saturated_batch",
    "ttft_s",
]
