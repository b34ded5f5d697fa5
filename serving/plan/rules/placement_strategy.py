"""placement-strategy: a model-parallel group that fits one node is placed STRICT_PACK (Ray's
PACK default lets its ranks spread), and pipeline stages across nodes are never scattered."""

from __future__ import annotations

from serving.plan.rules.verdict import Case, Finding, Rule

# Placement strategies that scatter a group over as many nodes as they can.
_SPREADING = ("SPREAD", "STRICT_SPREAD")


def placement_strategy(case: Case) -> Finding | None:
    spec, ranks = case.spec, case.layout.model_parallel_size
    chosen = case.strategy or (spec.placement if spec.placement != "auto" else None)
    if chosen is None or ranks <= 1:
        return None
    inside = ranks <= case.per_node
    if inside and chosen != "STRICT_PACK":
        return Finding(
            f"placement strategy {chosen} lets the {ranks} tensor/pipeline ranks land on "
            "different nodes; a group that fits one node must be STRICT_PACK — set placement: "
            "auto"
        )
    if not inside and chosen in _SPREADING:
        return Finding(
            f"placement strategy {chosen} scatters the ranks over as many nodes as it can; "
            "pipeline stages across nodes need PACK — set placement: auto"
        )
    return None


RULE = Rule(
    code="placement-strategy",
    severity="error",
    field="placement",
    meaning="the profile's `placement` lets a node-sized group spread, or scatters cross-node "
    "stages",
    judge=placement_strategy,
)
