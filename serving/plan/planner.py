"""The capacity planner: does a spec fit, on how many GPUs and nodes, how fast, at what cost.

A plan puts together what `serving.plan.memory` (the per-GPU memory breakdown), `serving.plan.speed`
(latency and throughput estimates), `serving.plan.placement` (machine type, nodes) and
`serving.plan.rules` (the verdicts on the layout) say about each replica group, and what the groups
cost. The memory and speed names stay importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, computed_field

from serving.catalog import GIB
from serving.frozen import Frozen
from serving.plan import calibrated, lora
from serving.plan.accuracy import beyond_measured, error_band
from serving.plan.calibrated import CalibrationNote
from serving.plan.collectives import ALLTOALL_LATENCY_S, alltoall_bytes_per_rank, alltoall_s
from serving.plan.cost import replica_share
from serving.plan.lora import LoraPlan
from serving.plan.memory import (
    MemoryBreakdown,
    activation_bytes_per_gpu,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    memory,
    runtime_overhead_bytes,
    weight_bytes,
    weight_bytes_per_gpu,
)
from serving.plan.placement import Placement, choose_machine, placement
from serving.plan.replicas import ReplicaGroup, Role, replica_groups
from serving.plan.rules import Verdict, verdicts
from serving.plan.speed import (
    BURST_REQUESTS,
    Estimates,
    decode_step_s,
    estimates,
    prefill_compute_s,
    prefill_s,
    saturated_batch,
    ttft_s,
)
from serving.spec.calibration import Calibration
from serving.spec.parts import Parallelism
from serving.spec.profile import ModelSpec

__all__ = [
    "ALLTOALL_LATENCY_S",
    "GIB",
    "Estimates",
    "MemoryBreakdown",
    "activation_bytes_per_gpu",
    "alltoall_bytes_per_rank",
    "alltoall_s",
    "decode_step_s",
    "estimates",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_gpu",
    "memory",
    "prefill_compute_s",
    "prefill_s",
    "runtime_overhead_bytes",
    "saturated_batch",
    "ttft_s",
    "weight_bytes",
    "weight_bytes_per_gpu",
]


class Cost(Frozen):
    price_per_hour_usd: float = Field(description="One replica's share of its nodes.")
    min_fleet_per_hour_usd: float = Field(description="All nodes at min replicas.")
    usd_per_million_output_tokens: float | None = Field(
        description="At the throughput point; None where the replica cannot run."
    )


class GroupPlan(Frozen):
    """The plan of one replica group: the server, or the prefill or decode side. It holds the
    `ReplicaGroup` it plans, the very object the compiler and the worker pods read."""

    replica_group: ReplicaGroup = Field(description="The group planned: role, layout, bounds.")
    memory: MemoryBreakdown
    placement: Placement
    estimates: Estimates
    cost: Cost
    lora: LoraPlan | None = Field(
        default=None,
        description="What the profile's LoRA adapters cost one replica (serving.plan.lora); "
        "None without adapters. The estimates include it.",
    )

    # Read through the group, and kept in the plan's JSON where `plan --json` always had them.
    @computed_field  # type: ignore[prop-decorator]
    @property
    def role(self) -> Role:
        return self.replica_group.role

    @computed_field  # type: ignore[prop-decorator]
    @property
    def parallelism(self) -> Parallelism:
        return self.replica_group.parallelism


class Plan(Frozen):
    model: str
    architecture: str
    total_params: float = Field(description="The architecture's parameters, all of them.")
    active_params: float = Field(description="Parameters one token runs through (MoE: routed).")
    architecture_source: str = Field(
        description="Where the architecture's shapes were read: 'hf:<repo>@<commit>', "
        "'config.json sha256:<digest>', or the servestack catalog entry."
    )
    accelerator: str
    weights_dtype: str
    max_model_len: int
    groups: list[GroupPlan]
    verdicts: list[Verdict]
    ttft_s: float = Field(description="Workload's time to first token (prefill side for P/D).")
    itl_s: float = Field(description="Inter-token latency at batch 1 (decode side for P/D).")
    requests_per_s: float = Field(description="At min replicas (at least one of each group).")
    output_tokens_per_s: float
    usd_per_million_output_tokens: float | None
    measured_error: dict[str, float] = Field(
        description="The planner's measured error for this kind of model, by estimate "
        "(decode, ttft, saturation): |estimate / published - 1| that 80% of held-back published "
        "vLLM runs stay within (serving.plan.accuracy)."
    )
    beyond_measured: list[str] = Field(
        default_factory=list,
        description="What the estimates rest on that too few held-back published runs "
        "exercised for `measured_error` to cover it (serving.plan.accuracy.beyond_measured): "
        "a Blackwell GPU, int4 weights, linear or sparse attention, a pipeline, say.",
    )
    calibration: CalibrationNote | None = Field(
        default=None,
        description="The calibration record (stacks/calibrations/<model>.yaml) that scaled the "
        "estimates, or was ignored and why; None where the model has none.",
    )

    @property
    def ok(self) -> bool:
        return not any(v.severity == "error" for v in self.verdicts)

    @property
    def total_gpus_min(self) -> int:
        return sum(g.placement.gpus_per_replica * g.placement.min_replicas for g in self.groups)

    def group(self, role: Role) -> GroupPlan:
        return next(g for g in self.groups if g.role == role)

    @property
    def replica_groups(self) -> list[ReplicaGroup]:
        """The spec's replica groups as the planner worked them out, once."""
        return [g.replica_group for g in self.groups]


# --- the plan -----------------------------------------------------------------------------


def plan(
    spec: ModelSpec,
    prices: Mapping[str, float] | None = None,
    itl_target_s: float | None = None,
    burst_requests: int = BURST_REQUESTS,
    calibration: Calibration | None = None,
    concurrency: int | None = None,
    arrival_s: float = 0.0,
) -> Plan:
    """Plan a spec. `prices` overrides catalog prices per machine type (USD per node-hour);
    throughput is that of `burst_requests` requests queued at once, or with `concurrency`,
    that of a closed loop of that many clients per replica. A `calibration` measured where the
    spec is deployed scales every group's estimates by its ratios, here and nowhere else; one
    measured elsewhere is ignored, and the plan says why. `arrival_s`: a server's serial work
    per request before its engine sees it, which paces a burst (speed.burst.opening); none
    by default, as servestack's own server has no measured figure for it."""
    groups: list[GroupPlan] = []
    found: list[Verdict] = []
    why_not = None
    if calibration is not None:
        # All groups or none: a P/D pair measured as a whole is scaled as a whole.
        misfits = []
        for g in replica_groups(spec):
            machine = choose_machine(spec, g.gpus_per_replica)
            misfits.append(calibrated.mismatch(calibration, machine, g.parallelism))
        why_not = "; ".join(m for m in misfits if m) or None
    for group in replica_groups(spec):
        role, layout = group.role, group.parallelism
        mem = memory(spec, layout)
        machine = choose_machine(spec, group.gpus_per_replica)
        where = placement(machine, group)
        # Throughput at the largest batch within the profile's inter-token target, unless the
        # caller asks about another target (the recommender's).
        target_s = spec.latency.itl_ms / 1e3 if itl_target_s is None else itl_target_s
        est = estimates(
            spec, machine, role, layout, mem, target_s, burst_requests, concurrency, arrival_s
        )
        adapters = lora.lora_plan(spec, layout)
        est = lora.applied(est, adapters)
        if calibration is not None and why_not is None:
            est = calibrated.applied(est, calibration)
        node_price = machine.list_price(prices)
        replica_price = replica_share(node_price, where)
        tokens_per_hour = est.output_tokens_per_s * 3600
        groups.append(
            GroupPlan(
                replica_group=group,
                memory=mem,
                placement=where,
                estimates=est,
                lora=adapters,
                cost=Cost(
                    price_per_hour_usd=replica_price,
                    min_fleet_per_hour_usd=node_price * where.min_nodes,
                    usd_per_million_output_tokens=(
                        replica_price / tokens_per_hour * 1e6 if tokens_per_hour else None
                    ),
                ),
            )
        )
        found.extend(verdicts(spec, role, layout, mem))

    # A serving unit is one replica of each group: P/D pairs a prefill and a decode replica.
    requests_per_s = min(g.estimates.requests_per_s for g in groups)
    output_tokens_per_s = requests_per_s * spec.workload.output_tokens
    unit_price = sum(g.cost.price_per_hour_usd for g in groups)
    first, last = groups[0], groups[-1]
    return Plan(
        model=spec.name,
        architecture=spec.architecture.key,
        total_params=spec.architecture.total_params,
        active_params=spec.architecture.active_params,
        architecture_source=spec.architecture.provenance,
        accelerator=spec.accelerator,
        weights_dtype=spec.weights_dtype,
        max_model_len=spec.max_model_len,
        groups=groups,
        verdicts=found,
        # P/D: the decode side makes the first token once the prompt's KV cache has arrived.
        ttft_s=first.estimates.ttft_s + (last.estimates.itl_s if first is not last else 0.0),
        itl_s=last.estimates.itl_s,
        requests_per_s=requests_per_s,
        output_tokens_per_s=output_tokens_per_s,
        usd_per_million_output_tokens=(
            unit_price / (output_tokens_per_s * 3600) * 1e6 if output_tokens_per_s else None
        ),
        measured_error={
            phase: error_band(spec.architecture.is_moe, phase).band
            for phase in ("decode", "ttft", "saturation")
        },
        beyond_measured=beyond_measured(spec, (g.parallelism for g in groups)),
        calibration=(calibrated.note(calibration, why_not) if calibration is not None else None),
    )
