"""tp-heads: vLLM shards attention by heads, so TP divides the attention heads and divides the
KV heads or is a multiple of them."""

from __future__ import annotations

from serving.plan.rules.layouts import valid_tensor_sizes
from serving.plan.rules.verdict import Case, Finding, Rule


def tp_heads(case: Case) -> Finding | None:
    arch, layout = case.spec.architecture, case.layout
    if layout.tensor in valid_tensor_sizes(case.spec, max(layout.tensor, 1)):
        return None
    return Finding(
        f"tensor={layout.tensor} does not divide {arch.key}'s {arch.num_attention_heads} "
        f"attention heads and {arch.num_kv_heads} KV heads — {case.use}",
        case.smallest,
    )


RULE = Rule(
    code="tp-heads",
    severity="error",
    field="parallelism.tensor",
    meaning="TP does not divide the attention heads, or neither divides nor is a multiple of "
    "the KV heads",
    judge=tp_heads,
)
