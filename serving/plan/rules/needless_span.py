"""needless-span: a replica crosses nodes only when no layout inside one node holds the model."""

from __future__ import annotations

from serving.plan.rules.layouts import describe
from serving.plan.rules.verdict import Case, Finding, Rule


def needless_span(case: Case) -> Finding | None:
    layout, smallest, per_node = case.layout, case.smallest, case.per_node
    if (
        layout.gpus_per_replica <= per_node
        or smallest is None
        or smallest.gpus_per_replica > per_node
    ):
        return None
    return Finding(
        f"{describe(layout)} spans {-(-layout.gpus_per_replica // per_node)} nodes of "
        f"{per_node} GPUs, but {describe(smallest)} holds {case.spec.architecture.key} on "
        f"{smallest.gpus_per_replica} GPU(s) of one node — crossing nodes trades NVLink for "
        "the network",
        smallest,
    )


RULE = Rule(
    code="needless-span",
    severity="error",
    field="parallelism",
    meaning="a replica crosses nodes though a layout inside one node holds the model",
    judge=needless_span,
)
