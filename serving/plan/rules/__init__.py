"""The rules a layout must pass, one per module, listed in order by `registry.RULES`; `verdicts`
asks them all (the planner and the policy pack both do), and `smallest_layout` is the layout
every suggestion names. The names callers import stay importable from here."""

from serving.plan.rules.layouts import MAX_PIPELINE_STAGES, smallest_layout, valid_tensor_sizes
from serving.plan.rules.registry import RULES, verdicts
from serving.plan.rules.tp_crosses_node import tensor_across_nodes
from serving.plan.rules.verdict import Case, Finding, Rule, Severity, Verdict

__all__ = [
    "MAX_PIPELINE_STAGES",
    "RULES",
    "Case",
    "Finding",
    "Rule",
    "Severity",
    "Verdict",
    "smallest_layout",
    "tensor_across_nodes",
    "valid_tensor_sizes",
    "verdicts",
]
