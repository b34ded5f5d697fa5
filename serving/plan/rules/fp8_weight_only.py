"""fp8-weight-only: FP8 weights get FP8 math only on GPUs with FP8 tensor cores; elsewhere they
run weight-only (W8A16)."""

from __future__ import annotations

from serving import catalog
from serving.plan.rules.verdict import Case, Finding, Rule


def fp8_weight_only(case: Case) -> Finding | None:
    spec, gpu = case.spec, case.spec.gpu
    if spec.weights_dtype != "fp8" or gpu.has_fp8_math:
        return None
    return Finding(
        f"{gpu.key} has no FP8 tensor cores (compute capability "
        f"{'.'.join(map(str, gpu.compute_capability))} < 8.9): FP8 weights run weight-only "
        "(W8A16), saving memory but not compute — use "
        f"{' / '.join(catalog.FP8_ACCELERATORS)} for FP8 math"
    )


RULE = Rule(
    code="fp8-weight-only",
    severity="warning",
    field="accelerator",
    meaning="FP8 on an A100: weight-only (W8A16), memory saved but no FP8 math",
    judge=fp8_weight_only,
)
