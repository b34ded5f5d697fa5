"""tp-crosses-node: tensor parallelism stays inside one node, one NVLink domain. The one wording
of that rule (`tensor_across_nodes`), which infra's platform plan also gives."""

from __future__ import annotations

from serving.plan.placement import choose_machine
from serving.plan.rules.verdict import Case, Finding, Rule


def tensor_across_nodes(tensor: int, machine_type: str, gpus_per_node: int) -> str:
    """What is wrong when a tensor-parallel group is wider than a node of `machine_type`."""
    return f"tensor={tensor} needs {tensor} GPUs on one node; {machine_type} has {gpus_per_node}"


def tp_crosses_node(case: Case) -> Finding | None:
    layout = case.layout
    if layout.tensor <= case.per_node:
        return None
    machine = choose_machine(case.spec, layout.gpus_per_replica)
    problem = tensor_across_nodes(layout.tensor, machine.name, case.per_node)
    return Finding(f"{problem} — {case.use}", case.smallest)


RULE = Rule(
    code="tp-crosses-node",
    severity="error",
    field="parallelism.tensor",
    meaning="tensor parallelism larger than the GPUs of one node (one NVLink domain)",
    judge=tp_crosses_node,
)
