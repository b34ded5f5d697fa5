"""ep-on-dense: expert parallelism only on a mixture-of-experts model."""

from __future__ import annotations

from serving.plan.rules.layouts import smallest_layout
from serving.plan.rules.verdict import Case, Finding, Rule


def ep_on_dense(case: Case) -> Finding | None:
    spec, layout = case.spec, case.layout
    if not layout.expert or spec.architecture.is_moe:
        return None
    fix = smallest_layout(spec, layout.model_copy(update={"expert": False, "data": 1}))
    return Finding(
        "expert parallelism needs a mixture-of-experts model; "
        f"{spec.architecture.key} is dense — set parallelism.expert: false (and scale with "
        "replicas instead of data)",
        fix,
    )


RULE = Rule(
    code="ep-on-dense",
    severity="error",
    field="parallelism.expert",
    meaning="expert parallelism asked of a dense model",
    judge=ep_on_dense,
)
