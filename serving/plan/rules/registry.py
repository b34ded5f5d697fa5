"""Every rule, in the order its verdicts are given (`RULES`), and `verdicts`: the one set of
rules the planner and the policy pack both ask."""

from __future__ import annotations

from serving.plan.memory import MemoryBreakdown
from serving.plan.placement import largest_node
from serving.plan.replicas import Role
from serving.plan.rules import (
    does_not_fit,
    ep_on_dense,
    ep_size_indivisible,
    fp8_block_shard,
    fp8_weight_only,
    lora_routing,
    needless_span,
    over_sharded,
    placement_strategy,
    tp_crosses_node,
    tp_heads,
)
from serving.plan.rules.verdict import Case, Rule, Verdict
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

RULES: tuple[Rule, ...] = (
    tp_crosses_node.RULE,
    tp_heads.RULE,
    does_not_fit.RULE,
    over_sharded.RULE,
    needless_span.RULE,
    placement_strategy.RULE,
    ep_on_dense.RULE,
    ep_size_indivisible.RULE,
    fp8_block_shard.RULE,
    fp8_weight_only.RULE,
    lora_routing.RULE,
)


def verdicts(
    spec: ModelSpec,
    role: Role,
    layout: Parallelism,
    mem: MemoryBreakdown,
    *,
    gpus_per_node: int | None = None,
    strategy: str | None = None,
) -> list[Verdict]:
    """Every rule a layout must pass, the one set the planner and the policy pack both ask.

    `gpus_per_node` is the GPUs of one worker pod (one node); by default the node the planner
    would choose. `strategy` is the Ray placement strategy the deployment uses; by default the
    profile's, where it sets one (the compiler's own choice passes by construction)."""
    case = Case(
        spec=spec, role=role, layout=layout, mem=mem,
        per_node=gpus_per_node or largest_node(spec), strategy=strategy,
    )  # fmt: skip
    return [v for v in (rule.verdict(case) for rule in RULES) if v is not None]
