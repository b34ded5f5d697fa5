"""What a model served through a capacity chain costs at each step: the $ per million output
tokens of its plan with the nodes obtained that step's way (its machine type, its mode's price),
and the chain's worst step, what serving costs when GKE has fallen to the dearest way it has a
price for. A step without a known price (flex-start: none is published in the catalog) is named,
not guessed; `servestack:prices` can give it one (`<type>:flex_start`)."""

from __future__ import annotations

from pydantic import Field

from infra.platform.config import Stack
from infra.platform.stack_config import NAMESPACE
from serving import catalog
from serving.catalog.consumption import ConsumptionMode
from serving.frozen import Frozen
from serving.plan.cost import usd_per_million_on
from serving.plan.planner import Plan
from serving.recommend.ranking import Candidate, plan_on
from serving.spec.profile import ModelSpec


class StepCost(Frozen):
    step: int = Field(description="Its place in the chain, from 0 (GKE's first choice).")
    mode: ConsumptionMode
    machine_type: str
    node_price_per_hour_usd: float | None = Field(
        description="USD per node-hour obtained this way; None where no price is known."
    )
    usd_per_million_output_tokens: float | None
    note: str | None = Field(default=None, description="Why a step has no cost.")


class ChainCost(Frozen):
    model: str
    chain_of: str = Field(description="The machine type whose capacity chain serves the model.")
    steps: list[StepCost]
    worst_step: int | None = Field(
        description="The step that costs the most per million output tokens among those with "
        "a price (the later one on a tie: the chain's fall-back)."
    )
    worst_usd_per_million_output_tokens: float | None
    unpriced_steps: list[int] = Field(description="Steps without a known price.")


def chain_costs(stack: Stack, model_plan: Plan) -> ChainCost | None:
    """The per-step cost of `model_plan` where its machine type has a capacity chain in `stack`,
    else None."""
    planned = {group.placement.machine_type for group in model_plan.groups}
    chained = [
        machine
        for machine, options in stack.config.gpu_pools.items()
        if options.capacity and machine in planned
    ]
    if not chained:
        return None
    chain_of = chained[0]
    steps = []
    for index, step in enumerate(stack.config.gpu_pools[chain_of].capacity):
        machine = catalog.MACHINE_TYPES[step.machine_type or chain_of]
        price = machine.price_for(step.mode, stack.config.prices)
        note = None
        if step.mode == "on_demand" and not machine.on_demand:
            price, note = None, f"GCP does not sell {machine.name} on demand"
        elif price is None:
            note = (
                f"no {step.mode.replace('_', '-')} price for {machine.name} is published in the "
                f"catalog; set {NAMESPACE}:prices.{machine.name}:{step.mode}"
            )
        steps.append(
            StepCost(
                step=index,
                mode=step.mode,
                machine_type=machine.name,
                node_price_per_hour_usd=price,
                usd_per_million_output_tokens=(
                    usd_per_million_on(model_plan, machine, price, replacing=chain_of)
                    if price is not None
                    else None
                ),
                note=note,
            )
        )
    priced = [s for s in steps if s.usd_per_million_output_tokens is not None]
    worst = max(
        priced, key=lambda s: (s.usd_per_million_output_tokens or 0.0, s.step), default=None
    )
    return ChainCost(
        model=model_plan.model,
        chain_of=chain_of,
        steps=steps,
        worst_step=worst.step if worst else None,
        worst_usd_per_million_output_tokens=(
            worst.usd_per_million_output_tokens if worst else None
        ),
        unpriced_steps=[s.step for s in steps if s.node_price_per_hour_usd is None],
    )


def recommended_chain_costs(
    stack: Stack,
    spec: ModelSpec,
    ranked: list[Candidate],
    itl_target_s: float,
) -> list[ChainCost]:
    """For each capacity chain of the stack, the best candidate that works on the chain's
    machine type (its GPU, a replica within one of its nodes), priced at every step."""
    costs = []
    for machine_type, options in stack.config.gpu_pools.items():
        machine = catalog.MACHINE_TYPES.get(machine_type)
        if not options.capacity or machine is None:
            continue
        fitting = [
            c
            for c in ranked
            if c.meets_targets
            and c.accelerator == machine.accelerator
            and c.gpus_per_replica <= machine.gpus_per_node
        ]
        if not fitting:
            continue
        best = min(fitting, key=lambda c: c.rank)
        variant = plan_on(spec, best, machine, stack.config.prices, itl_target_s)
        chain = chain_costs(stack, variant)
        if chain is not None:
            costs.append(chain)
    return costs
