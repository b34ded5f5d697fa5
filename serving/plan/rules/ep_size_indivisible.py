"""ep-size-indivisible: the expert-parallel size (data x tensor) divides a MoE model's experts."""

from __future__ import annotations

from serving.plan.rules.layouts import describe, smallest_layout
from serving.plan.rules.verdict import Case, Finding, Rule


def ep_size_indivisible(case: Case) -> Finding | None:
    spec, layout = case.spec, case.layout
    arch = spec.architecture
    # A dense model with experts asked is ep-on-dense's.
    if not layout.expert or not arch.is_moe or arch.num_experts % layout.expert_parallel_size == 0:
        return None
    sizes = [d for d in (1, 2, 4, 8, 16, 32, 64) if arch.num_experts % (d * layout.tensor) == 0]
    data = max((d for d in sizes if d <= max(layout.data, 1)), default=1)
    fix = smallest_layout(spec, layout.model_copy(update={"data": data}))
    return Finding(
        f"expert-parallel size {layout.expert_parallel_size} (data {layout.data} x tensor "
        f"{layout.tensor}) does not divide {arch.key}'s {arch.num_experts} experts — "
        + (f"use {describe(fix)}" if fix else "no expert-parallel layout holds it"),
        fix,
    )


RULE = Rule(
    code="ep-size-indivisible",
    severity="error",
    field="parallelism.data",
    meaning="EP size (DP × TP) does not divide the expert count",
    judge=ep_size_indivisible,
)
