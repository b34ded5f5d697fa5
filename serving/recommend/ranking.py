"""Rank accelerators and layouts for one model by cost per million output tokens, within a
latency target, and say why each loser lost.

Candidates whose cost is within the planner's measured throughput error of the winner's
(serving.plan.accuracy) are marked as ties: the estimates cannot tell them apart. For
mixture-of-experts models, DP+EP groups may span whole nodes where the machine type's GPUs have
their own NICs (`MachineType.expert_parallel_across_nodes`).

A calibration record (`serving.spec.calibration`) scales the estimates of the one candidate it
was measured on (its machine type and layout, as the planner applies it); the others keep the
planner's, and the candidate says which it has (`calibrated_by`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pydantic import Field

from serving import catalog
from serving.catalog import NODE_POOLS_ATTACH_GPU_NETWORK, MachineType
from serving.catalog.consumption import CONSUMPTION_MODES, ConsumptionMode
from serving.frozen import Frozen
from serving.plan.accuracy import error_band
from serving.plan.cost import usd_per_million_on
from serving.plan.planner import Plan, plan
from serving.plan.rules import valid_tensor_sizes
from serving.spec.calibration import Calibration
from serving.spec.parts import DEFAULT_ITL_TARGET_MS, DEFAULT_TTFT_TARGET_MS, Parallelism
from serving.spec.profile import ModelSpec

# The latency targets a recommendation meets unless asked otherwise: a profile's defaults.
DEFAULT_ITL_TARGET_S = DEFAULT_ITL_TARGET_MS / 1e3
DEFAULT_TTFT_TARGET_S = DEFAULT_TTFT_TARGET_MS / 1e3
DATA_PARALLEL_SIZES = (1, 2, 4, 8)
MAX_RECOMMENDED_PIPELINE = 4
# DP+EP groups across nodes: whole nodes, up to this many (wide EP beyond that is a deployment of
# its own, with prefill/decode disaggregation).
MAX_EXPERT_PARALLEL_NODES = 4


class Candidate(Frozen):
    rank: int = Field(description="1 is the recommendation; losers follow, cheapest first.")
    machine_type: str
    accelerator: str
    layout: str
    parallelism: Parallelism
    gpus_per_replica: int
    usd_per_million_output_tokens: float | None
    ttft_s: float
    itl_at_batch_s: float
    output_tokens_per_s: float
    tie: bool = Field(
        default=False,
        description="Costs within the planner's measured throughput error of the winner's.",
    )
    reason: str = Field(description="Why it won, or why it lost.")
    meets_targets: bool = Field(
        default=True,
        description="Works and meets the latency targets: in the running for the recommendation.",
    )
    refused_by: str | None = Field(
        default=None,
        description="The planner's error verdict on this layout (the policy pack refuses it by "
        "the same verdict), e.g. 'needless-span'.",
    )
    usd_per_million_by_mode: dict[ConsumptionMode, float | None] = Field(
        default_factory=dict,
        description="$ per million output tokens with the nodes obtained each way (on_demand, "
        "spot, flex_start, reservation); None where the machine type is not sold so or no "
        "price is known.",
    )
    beyond_measured: list[str] = Field(
        default_factory=list,
        description="What this candidate's estimates rest on that the planner's measured error "
        "does not cover (Plan.beyond_measured): its cost is an extrapolation there.",
    )
    calibrated_by: str | None = Field(
        default=None,
        description="The bench run (bench.json) whose calibration record scaled this "
        "candidate's estimates: only the machine type and layout it measured.",
    )


def _layouts(spec: ModelSpec, machine: MachineType) -> Iterator[Parallelism]:
    per_node = machine.gpus_per_node
    for tensor in valid_tensor_sizes(spec, per_node):
        stages = range(1, MAX_RECOMMENDED_PIPELINE + 1) if tensor == per_node else (1,)
        for pipeline in stages:
            yield Parallelism(tensor=tensor, pipeline=pipeline)
        if not spec.architecture.is_moe:
            continue
        for data in DATA_PARALLEL_SIZES[1:]:
            if tensor * data <= per_node:
                yield Parallelism(tensor=tensor, data=data, expert=True)
        if machine.expert_parallel_across_nodes:
            for nodes in range(2, MAX_EXPERT_PARALLEL_NODES + 1):
                yield Parallelism(tensor=tensor, data=nodes * per_node // tensor, expert=True)


def _variant(spec: ModelSpec, machine: MachineType, layout: Parallelism) -> ModelSpec:
    fields = spec.model_dump()
    fields.update(
        accelerator=machine.accelerator,
        machine_type=machine.name,
        parallelism=layout.model_dump(),
        disaggregation=None,
    )
    if not catalog.ACCELERATORS[machine.accelerator].has_fp8_math:
        # An FP8 KV cache is refused where there are no FP8 tensor cores; such a GPU is
        # compared with the KV cache it would actually run.
        fields["kv_cache_dtype"] = "auto"
    return ModelSpec.model_validate(fields)


@dataclass(frozen=True)
class _Scored:
    machine: MachineType
    layout: Parallelism
    plan: Plan
    why_not: str | None

    @property
    def cost(self) -> float:
        value = self.plan.usd_per_million_output_tokens
        return value if value is not None else float("inf")


def _score_all(
    spec: ModelSpec,
    itl_target_s: float,
    ttft_target_s: float,
    prices: Mapping[str, float] | None,
    calibration: Calibration | None = None,
) -> list[_Scored]:
    # The same layout on a 2-, 4- or 8-GPU node of one series costs the same per replica (the
    # larger nodes pack more replicas): plan it once, on the smallest node that holds it.
    seen: set[tuple[str, str]] = set()
    scored = []
    for machine in sorted(catalog.MACHINE_TYPES.values(), key=lambda m: m.gpus_per_node):
        for layout in _layouts(spec, machine):
            if (machine.gke_accelerator, layout.label) in seen:
                continue
            seen.add((machine.gke_accelerator, layout.label))
            variant_plan = plan(
                _variant(spec, machine, layout), prices, itl_target_s, calibration=calibration
            )
            why_not = _disqualified(variant_plan, itl_target_s, ttft_target_s)
            scored.append(_Scored(machine, layout, variant_plan, why_not))
    return scored


def plan_on(
    spec: ModelSpec,
    candidate: Candidate,
    machine: MachineType,
    prices: Mapping[str, float] | None,
    itl_target_s: float,
) -> Plan:
    """The plan of `candidate`'s layout on `machine` (a node size of the same GPU that holds it:
    a capacity chain's machine type, say)."""
    return plan(_variant(spec, machine, candidate.parallelism), prices, itl_target_s)


def recommend(
    spec: ModelSpec,
    itl_target_s: float,
    ttft_target_s: float,
    prices: Mapping[str, float] | None = None,
    calibration: Calibration | None = None,
) -> list[Candidate]:
    """Every machine type and layout for the model, best first; the one `calibration` was
    measured on with its estimates scaled by it."""
    scored = _score_all(spec, itl_target_s, ttft_target_s, prices, calibration)
    eligible = sorted((s for s in scored if s.why_not is None), key=lambda s: s.cost)
    rejected = sorted((s for s in scored if s.why_not is not None), key=lambda s: s.cost)
    band = error_band(spec.architecture.is_moe, "saturation").band
    candidates = []
    for rank, item in enumerate(eligible + rejected, start=1):
        tie = False
        if item.why_not is not None:
            reason = item.why_not
        elif rank == 1:
            reason = "cheapest per million output tokens within the latency targets"
        else:
            ratio = item.cost / eligible[0].cost
            tie = ratio - 1 <= band
            reason = f"{ratio:.2f}x the winner's cost" + (
                f"; a tie: within the planner's measured ±{band:.0%} throughput error"
                if tie
                else ""
            )
        group = item.plan.groups[0]
        if group.placement.spans_nodes and item.layout.expert and item.why_not is None:
            reason += (
                f"; DP+EP over {group.placement.nodes_per_replica} nodes on "
                f"{item.machine.gpu_network}"
                + ("" if NODE_POOLS_ATTACH_GPU_NETWORK else " (node pools do not attach it yet)")
            )
        if item.plan.beyond_measured:
            reason += f"; beyond the measured runs: {', '.join(item.plan.beyond_measured)}"
        candidates.append(
            Candidate(
                rank=rank,
                machine_type=item.machine.name,
                accelerator=item.machine.accelerator,
                layout=item.layout.label,
                parallelism=item.layout,
                gpus_per_replica=group.placement.gpus_per_replica,
                usd_per_million_output_tokens=item.plan.usd_per_million_output_tokens,
                ttft_s=item.plan.ttft_s,
                itl_at_batch_s=group.estimates.itl_at_batch_s,
                output_tokens_per_s=item.plan.output_tokens_per_s,
                tie=tie,
                reason=reason,
                beyond_measured=item.plan.beyond_measured,
                meets_targets=item.why_not is None,
                refused_by=next(
                    (v.code for v in item.plan.verdicts if v.severity == "error"), None
                ),
                usd_per_million_by_mode=by_mode(item.plan, item.machine, prices),
                calibrated_by=(
                    item.plan.calibration.run
                    if item.plan.calibration is not None and item.plan.calibration.applied
                    else None
                ),
            )
        )
    return candidates


def by_mode(
    planned: Plan, machine: MachineType, prices: Mapping[str, float] | None = None
) -> dict[ConsumptionMode, float | None]:
    """$ per million output tokens of `planned` on `machine`, each way of obtaining its nodes:
    None where GCP does not sell the type that way or no price is known."""
    costs: dict[ConsumptionMode, float | None] = {}
    for mode in CONSUMPTION_MODES:
        price = machine.price_for(mode, prices)
        sold = mode != "on_demand" or machine.on_demand
        costs[mode] = usd_per_million_on(planned, machine, price) if price and sold else None
    return costs


def candidate_spec(spec: ModelSpec, candidate: Candidate) -> ModelSpec:
    """The profile as it would read with the candidate's machine type and layout."""
    machine = catalog.MACHINE_TYPES[candidate.machine_type]
    return _variant(spec, machine, candidate.parallelism)


def catalog_spec(architecture_key: str) -> ModelSpec:
    """A profile for a catalog model nobody has written one for yet: published weights, an
    8k context (or less where the model is shorter), the default workload."""
    arch = catalog.architecture(architecture_key)
    return ModelSpec.model_validate(
        {
            "name": arch.key,
            "source": arch.hf_repo or "unknown/unknown",
            "architecture": arch.key,
            "accelerator": "h100-80gb",
            "max_model_len": min(8192, arch.max_position_embeddings),
        }
    )


def _disqualified(variant: Plan, itl_target_s: float, ttft_target_s: float) -> str | None:
    errors = [v.message for v in variant.verdicts if v.severity == "error"]
    if errors:
        return errors[0]
    if variant.itl_s > itl_target_s:
        return (
            f"inter-token latency {variant.itl_s * 1e3:.1f} ms even at batch 1, above the "
            f"{itl_target_s * 1e3:.0f} ms target"
        )
    if variant.ttft_s > ttft_target_s:
        return (
            f"time to first token {variant.ttft_s * 1e3:.0f} ms, above the "
            f"{ttft_target_s * 1e3:.0f} ms target"
        )
    if variant.usd_per_million_output_tokens is None:
        return "no room for even one sequence of the workload in the KV cache"
    return None
