"""Rank accelerators and layouts for one model by cost per million output tokens, within a
latency target, and say why each loser lost."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pydantic import BaseModel, ConfigDict, Field

from serving import catalog
from serving.catalog import MachineType
from serving.planner import Plan, plan, valid_tensor_sizes
from serving.spec import ModelSpec

DATA_PARALLEL_SIZES = (1, 2, 4, 8)
MAX_RECOMMENDED_PIPELINE = 4


class Candidate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int = Field(description="1 is the recommendation; losers follow, cheapest first.")
    machine_type: str
    accelerator: str
    layout: str
    gpus_per_replica: int
    usd_per_million_output_tokens: float | None
    ttft_s: float
    itl_at_batch_s: float
    output_tokens_per_s: float
    reason: str = Field(description="Why it won, or why it lost.")


def _layouts(spec: ModelSpec, machine: MachineType) -> Iterator[dict[str, object]]:
    per_node = machine.gpus_per_node
    for tensor in valid_tensor_sizes(spec, per_node):
        stages = range(1, MAX_RECOMMENDED_PIPELINE + 1) if tensor == per_node else (1,)
        for pipeline in stages:
            yield {"tensor": tensor, "pipeline": pipeline, "data": 1, "expert": False}
        if spec.architecture.is_moe:
            for data in DATA_PARALLEL_SIZES[1:]:
                if tensor * data <= per_node:
                    yield {"tensor": tensor, "pipeline": 1, "data": data, "expert": True}


def _variant(spec: ModelSpec, machine: MachineType, layout: dict[str, object]) -> ModelSpec:
    fields = spec.model_dump()
    fields.update(
        accelerator=machine.accelerator,
        machine_type=machine.name,
        parallelism=layout,
        disaggregation=None,
    )
    return ModelSpec.model_validate(fields)


def _describe(layout: dict[str, object]) -> str:
    text = f"TP={layout['tensor']} PP={layout['pipeline']}"
    return text + (f" DP={layout['data']}+EP" if layout["expert"] else "")


def recommend(
    spec: ModelSpec,
    itl_target_s: float,
    ttft_target_s: float,
    prices: Mapping[str, float] | None = None,
) -> list[Candidate]:
    """Every machine type and layout for the model, best first."""
    scored: list[tuple[dict[str, object], MachineType, Plan, str | None]] = []
    for machine in catalog.MACHINE_TYPES.values():
        for layout in _layouts(spec, machine):
            variant_plan = plan(_variant(spec, machine, layout), prices, itl_target_s)
            why_not = _disqualified(variant_plan, itl_target_s, ttft_target_s)
            scored.append((layout, machine, variant_plan, why_not))

    def cost(item: tuple[dict[str, object], MachineType, Plan, str | None]) -> float:
        value = item[2].usd_per_million_output_tokens
        return value if value is not None else float("inf")

    # The same layout on a 2-, 4- or 8-GPU node of one series costs the same per replica (the
    # larger nodes pack more replicas): keep the smallest node of each.
    scored.sort(key=lambda s: s[1].gpus_per_node)
    seen: set[tuple[str, str]] = set()
    unique = []
    for item in scored:
        key = (item[1].gke_accelerator, _describe(item[0]))
        if key not in seen:
            seen.add(key)
            unique.append(item)
    eligible = sorted((s for s in unique if s[3] is None), key=cost)
    rejected = sorted((s for s in unique if s[3] is not None), key=cost)
    best_cost = cost(eligible[0]) if eligible else None
    candidates = []
    for rank, (layout, machine, variant_plan, why_not) in enumerate(eligible + rejected, start=1):
        if why_not is None and rank == 1:
            reason = "cheapest per million output tokens within the latency targets"
        elif why_not is None:
            assert best_cost is not None
            reason = (
                f"{cost((layout, machine, variant_plan, None)) / best_cost:.2f}x the winner's cost"
            )
        else:
            reason = why_not
        group = variant_plan.groups[0]
        candidates.append(
            Candidate(
                rank=rank,
                machine_type=machine.name,
                accelerator=machine.accelerator,
                layout=_describe(layout),
                gpus_per_replica=group.placement.gpus_per_replica,
                usd_per_million_output_tokens=variant_plan.usd_per_million_output_tokens,
                ttft_s=variant_plan.ttft_s,
                itl_at_batch_s=group.estimates.itl_at_batch_s,
                output_tokens_per_s=variant_plan.output_tokens_per_s,
                reason=reason,
            )
        )
    return candidates


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
