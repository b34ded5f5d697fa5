"""does-not-fit: the weights, activations, runtime and the KV cache of one `max_model_len`
sequence fit the usable memory of each GPU."""

from __future__ import annotations

from serving.catalog import GIB
from serving.plan.rules.layouts import describe
from serving.plan.rules.verdict import Case, Finding, Rule


def does_not_fit(case: Case) -> Finding | None:
    spec, mem = case.spec, case.mem
    if mem.fits:
        return None
    needed = mem.weights_bytes + mem.activation_bytes + mem.runtime_overhead_bytes
    needed += mem.lora_bytes
    needed += spec.max_model_len * mem.kv_cache_bytes_per_token_per_gpu
    held = "weights and LoRA slots" if mem.lora_bytes else "weights"
    return Finding(
        f"{spec.architecture.key} ({spec.weights_dtype}) with {describe(case.layout)} needs "
        f"{needed / GIB:.1f} GiB per GPU for {held} and one {spec.max_model_len:,}-token "
        f"sequence; {spec.gpu.key} offers {mem.usable_bytes / GIB:.1f} GiB at "
        f"gpu_memory_utilization {spec.gpu_memory_utilization} — {case.use}",
        case.smallest,
    )


RULE = Rule(
    code="does-not-fit",
    severity="error",
    field="parallelism",
    meaning="weights + activations + runtime + KV for one `max_model_len` sequence exceed "
    "usable memory",
    judge=does_not_fit,
)
